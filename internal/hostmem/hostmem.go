// Package hostmem tells how much memory this process may still take: the
// cgroup's limit less its use where one is set (containers, CI), else the
// kernel's MemAvailable. Callers check a large allocation against it first,
// since Go cannot recover from running out of memory.
package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/druto/druto/pkg/device"
)

// Env names a variable that, when set to a size (device.ParseBytes: "2GiB",
// "500MB"), is taken as the free host memory: tests fake a small machine
// with it, and a user can keep druto below a share of a shared host.
const Env = "DRUTO_HOST_MEMORY"

// Available returns the bytes this process may still allocate, and where
// the figure comes from: Env when set, the cgroup's limit less its use
// (v2, then v1) when one is set, and MemAvailable. It fails where none can
// be read (not Linux); callers then skip their check.
func Available() (int64, string, error) {
	if v, ok := os.LookupEnv(Env); ok && v != "" {
		n, err := device.ParseBytes(v)
		if err != nil {
			return 0, "", fmt.Errorf("%s=%q: %v; write a size such as 16GiB or 8000MB (or unset it)", Env, v, err)
		}
		return n, Env, nil
	}
	if lim, use, ok := cgroup(); ok {
		free := lim - use
		if mem, err := memAvailable(); err == nil && mem < free {
			return mem, "MemAvailable", nil
		}
		return max(free, 0), "cgroup limit", nil
	}
	mem, err := memAvailable()
	if err != nil {
		return 0, "", err
	}
	return mem, "MemAvailable", nil
}

// noLimit is the smallest cgroup v1 limit that means none (the kernel
// writes the largest page-aligned int64, 9223372036854771712).
const noLimit = 1 << 62

// cgroup returns the cgroup memory limit and use (v2's memory.max and
// memory.current, else v1's memory.limit_in_bytes and usage_in_bytes), ok
// false without a limit.
func cgroup() (limit, use int64, ok bool) {
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil && v < noLimit
	}
	for _, f := range [][2]string{{"memory.max", "memory.current"}, {"memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"}} {
		if limit, ok = read(f[0]); ok {
			use, _ = read(f[1])
			return limit, use, true
		}
	}
	return 0, 0, false
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("hostmem: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("hostmem: MemAvailable %q: %w", f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("hostmem: no MemAvailable in /proc/meminfo")
}

// Check returns an error saying what is needed and what is free when need
// bytes do not fit; nil when they fit or the free memory cannot be read
// (an Env that is not a size is an error).
func Check(what string, need int64) error {
	free, src, err := Available()
	if err != nil && src == "" && os.Getenv(Env) != "" {
		return err
	}
	if err != nil || need <= free {
		return nil
	}
	return fmt.Errorf("%s needs %.1f MiB but this machine has %.1f MiB free (%s)", what, float64(need)/(1<<20), float64(free)/(1<<20), src)
}
