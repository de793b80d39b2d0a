//go:build !unix

package gpt

import "time"

// benchCPUTime is not measured here (0): the benchmarks report wall time only.
func benchCPUTime() time.Duration { return 0 }
