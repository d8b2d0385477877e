// Package uftrace reads and writes uftrace.data directories (file format
// version 4, as read by uftrace v0.13): the info header, task.txt, session
// maps, per-task record files, symbol and debug files, events and extern data.
package uftrace
