// Package layout has no code: its test keeps the package graph the one
// docs/ARCHITECTURE.md draws (stages import no other stage, internal/
// packages import no stage, cmd/rtrace calls the stages only through
// their entry points).
package layout
