// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU time beside wall time (a shared machine's wall time moves
// more than its CPU time).
package cputime

import "time"

// Now returns the CPU time (user + system) the process has used so far, or
// 0 where the system does not report it.
func Now() time.Duration { return now() }
