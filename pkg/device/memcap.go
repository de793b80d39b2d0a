package device

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemoryCapEnv names the environment variable that caps the GPU memory
// druto allocates (e.g. DRUTO_GPU_MEMORY=16GiB: a T4's budget on a larger
// GPU). The GPU device enforces it (an allocation past it fails as out of
// memory does), and the training planner (druto train --fit) plans within
// it on any backend, the CPU included, so a budget can be tried anywhere.
const MemoryCapEnv = "DRUTO_GPU_MEMORY"

// MemoryCap returns the cap MemoryCapEnv sets in bytes, 0 when it is unset
// or empty, and an error naming the variable when its value is not a size.
func MemoryCap() (int64, error) {
	v, ok := os.LookupEnv(MemoryCapEnv)
	if !ok || v == "" {
		return 0, nil
	}
	n, err := ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v; write a size such as 16GiB or 8000MB (or unset it)", MemoryCapEnv, v, err)
	}
	return n, nil
}

// ParseBytes parses a positive size: a number (decimals allowed) with an
// optional unit B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB or
// K, M, G, T (powers of 1024), case-insensitive, e.g. "16GiB", "1.5G",
// "500000000".
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	v, err := strconv.ParseFloat(num, 64)
	switch {
	case mult == 0:
		return 0, fmt.Errorf("unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", strings.TrimSpace(t[i:]))
	case err != nil || num == "":
		return 0, fmt.Errorf("%q is not a size", s)
	case v*mult < 1 || v*mult > 1<<62:
		return 0, fmt.Errorf("%q is out of range (1 B to 4 EiB)", s)
	}
	return int64(v * mult), nil
}
