//go:build unix

package gpt

import (
	"syscall"
	"time"
)

// benchCPUTime returns the process's user + system CPU time so far.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
