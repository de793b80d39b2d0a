package gpu

// buildcache_test.go: the kernel cache's key and writes, on any machine.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/kernels"
)

// TestCacheKey: the cache file changes with the source, arch and NVRTC
// version, and names them.
func TestCacheKey(t *testing.T) {
	v := kernels.Variant{Kernel: "layernorm_forward", File: "layernorm.cu", DType: kernels.F16}
	a := CacheKey(v, []byte("src"), "sm_90", "13.0")
	if !strings.HasPrefix(a, "layernorm-f16-sm_90-nvrtc13.0-") || !strings.HasSuffix(a, ".cubin") {
		t.Fatalf("key %q", a)
	}
	for _, b := range []string{
		CacheKey(v, []byte("src2"), "sm_90", "13.0"),
		CacheKey(v, []byte("src"), "sm_80", "13.0"),
		CacheKey(v, []byte("src"), "sm_90", "12.8"),
		CacheKey(kernels.Variant{Kernel: v.Kernel, File: v.File, DType: kernels.BF16}, []byte("src"), "sm_90", "13.0"),
	} {
		if b == a {
			t.Fatalf("key %q did not change", b)
		}
	}
	if CacheKey(v, []byte("src"), "sm_90", "13.0") != a {
		t.Fatal("key not deterministic")
	}
}

// TestWriteAtomic: the cache write leaves the file whole and no temp files.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	p := filepath.Join(dir, "k.cubin")
	for _, data := range [][]byte{[]byte("\x7fELF one"), []byte("\x7fELF two, longer")} {
		if err := writeAtomic(p, data); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d files left in the cache dir", len(entries))
	}
}
