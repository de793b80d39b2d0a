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
)

// Available returns the bytes this process may still allocate, and where
// the figure comes from. It fails where neither source can be read (not
// Linux); callers then skip their check.
func Available() (int64, string, error) {
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

// cgroup returns the cgroup v2 memory limit and use, ok false without a limit.
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
		return v, err == nil
	}
	limit, ok = read("memory.max")
	if !ok {
		return 0, 0, false
	}
	use, _ = read("memory.current")
	return limit, use, true
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
// bytes do not fit; nil when they fit or the free memory cannot be read.
func Check(what string, need int64) error {
	free, src, err := Available()
	if err != nil || need <= free {
		return nil
	}
	return fmt.Errorf("%s needs %.1f MiB but this machine has %.1f MiB free (%s)", what, float64(need)/(1<<20), float64(free)/(1<<20), src)
}
