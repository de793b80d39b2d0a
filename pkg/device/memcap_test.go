package device

import (
	"strings"
	"testing"
)

// TestParseBytes: units of 1000 and of 1024, decimals, spaces; bad sizes
// are errors.
func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{
		"16GiB": 16 << 30, "16gib": 16 << 30, "16G": 16 << 30, "16GB": 16e9, "1.5GiB": 3 << 29,
		"500000000": 5e8, "512 MiB": 512 << 20, "8000MB": 8e9, "1B": 1,
	} {
		got, err := ParseBytes(s)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "GiB", "16XB", "-1GiB", "0", "0.1B", "1e30GB", "1.2.3G"} {
		if got, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", s, got)
		}
	}
}

// TestMemoryCap: unset is no cap; a bad value names the variable.
func TestMemoryCap(t *testing.T) {
	t.Setenv(MemoryCapEnv, "")
	if n, err := MemoryCap(); n != 0 || err != nil {
		t.Errorf("empty: %d, %v", n, err)
	}
	t.Setenv(MemoryCapEnv, "16GiB")
	if n, err := MemoryCap(); n != 16<<30 || err != nil {
		t.Errorf("16GiB: %d, %v", n, err)
	}
	t.Setenv(MemoryCapEnv, "lots")
	if _, err := MemoryCap(); err == nil || !strings.Contains(err.Error(), MemoryCapEnv) {
		t.Errorf("lots: %v, want an error naming %s", err, MemoryCapEnv)
	}
}
