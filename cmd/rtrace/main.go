// Command rtrace is a ptrace-driven, preload-free tracer for native Linux
// programs that writes uftrace-format directories and sp-rtrace streams.
package main

import "os"

func main() { os.Exit(run(os.Args)) }
