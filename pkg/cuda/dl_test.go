//go:build cgo && linux

package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/druto/druto/internal/testreq"
)

// TestDriverFnsLayout: newDriverAPI fills driverFns as a run of pointers in
// driverSymbols's order, so the two must have the same length.
func TestDriverFnsLayout(t *testing.T) {
	if n := unsafe.Sizeof(driverFns{}) / unsafe.Sizeof(unsafe.Pointer(nil)); int(n) != len(driverSymbols) {
		t.Fatalf("driverFns has %d fields, driverSymbols %d names", n, len(driverSymbols))
	}
}

// TestDlopenBrokenFile: a file that is not a library is reported with the
// loader's own message, not as absent.
func TestDlopenBrokenFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "libcuda.so.1"), []byte("not an ELF file at all, just text"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadDriver(LoadOptions{LibDir: dir, OnlyLibDir: true})
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "did not load") ||
		!(strings.Contains(err.Error(), "ELF") || strings.Contains(err.Error(), "too short")) {
		t.Fatalf("err = %v, want the dlopen message", err)
	}
	_, err = LoadDriver(LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true})
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("empty dir: %v", err)
	}
}

// fakeLibcuda compiles a shared library that exports driverSymbols (minus
// omit), whose cuDriverGetVersion reports version and whose cuInit
// returns initCode; it returns its directory. It skips the test when no C
// compiler is installed.
func fakeLibcuda(t *testing.T, version, initCode int, omit string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		testreq.Skip(t, "DRUTO_CC_TESTS", "no C compiler (%s) to build a fake libcuda: %v", cc, err)
	}
	var src strings.Builder
	fmt.Fprintf(&src, "int cuDriverGetVersion(int* v) { *v = %d; return 0; }\n", version)
	fmt.Fprintf(&src, "int cuInit(unsigned f) { return %d; }\n", initCode)
	src.WriteString(`int cuGetErrorName(int r, const char** s) {
	*s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_FAKE"; return 0; }
int cuDeviceGetCount(int* n) { *n = 0; return 0; }
`)
	for _, s := range driverSymbols {
		switch s {
		case omit, "cuDriverGetVersion", "cuInit", "cuGetErrorName", "cuDeviceGetCount":
			continue
		}
		fmt.Fprintf(&src, "int %s(void) { return 999; }\n", s)
	}
	dir := t.TempDir()
	c := filepath.Join(dir, "fake.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), c).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	return dir
}

// TestFakeLibcuda drives the real dlopen, dlsym and call trampolines with
// fake drivers: too old, a missing symbol, and one that sees no device.
func TestFakeLibcuda(t *testing.T) {
	dir := fakeLibcuda(t, 10020, 0, "")
	_, err := LoadDriver(LoadOptions{LibDir: dir, OnlyLibDir: true})
	if !errors.Is(err, ErrDriverTooOld) || !strings.Contains(err.Error(), "CUDA 10.2") {
		t.Fatalf("too old: %v", err)
	}

	dir = fakeLibcuda(t, 12040, 0, "cuLaunchKernel")
	_, err = LoadDriver(LoadOptions{LibDir: dir, OnlyLibDir: true})
	if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), "cuLaunchKernel") ||
		!strings.Contains(err.Error(), dir) {
		t.Fatalf("missing symbol: %v", err)
	}

	// Graphs and pinned memory are optional: a driver without them loads.
	dir = fakeLibcuda(t, 12040, 0, "cuGraphInstantiateWithFlags")
	if _, err = LoadDriver(LoadOptions{LibDir: dir, OnlyLibDir: true}); err != nil {
		t.Fatalf("a driver without cuGraphInstantiateWithFlags must load (no graphs, not no driver): %v", err)
	}

	dir = fakeLibcuda(t, 12040, 100, "")
	d, err := LoadDriver(LoadOptions{LibDir: dir, OnlyLibDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 12040 || d.Info().Version != "12.4" || !strings.HasPrefix(d.Info().Path, dir) {
		t.Fatalf("driver %d, info %+v", d.Version(), d.Info())
	}
	_, err = d.DeviceCount()
	var ce Error
	if !errors.Is(err, ErrNoDevice) || !errors.As(err, &ce) || ce.Call != "cuInit" || ce.Name != "CUDA_ERROR_NO_DEVICE" {
		t.Fatalf("no device: %v", err)
	}
}
