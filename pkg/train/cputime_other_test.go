//go:build !unix

package train

import "time"

// cpuTime is not measured on this system (the CPU metric is left out).
func cpuTime() time.Duration { return 0 }
