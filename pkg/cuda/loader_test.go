//go:build linux

package cuda

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSearchOrder checks the documented order: DRUTO_CUDA_LIB_DIR, the bare
// sonames, then the well-known directories, newest soname first in each.
func TestSearchOrder(t *testing.T) {
	t.Setenv(EnvLibDir, "/opt/fake")
	ld := &fakeLoader{}
	_, info, err := find(specBLAS, LoadOptions{Loader: ld})
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("err = %v, want ErrLibraryNotFound", err)
	}
	var want []string
	for _, s := range specBLAS.sonames {
		want = append(want, filepath.Join("/opt/fake", s))
	}
	want = append(want, specBLAS.sonames...)
	for _, d := range WellKnownDirs() {
		for _, s := range specBLAS.sonames {
			want = append(want, filepath.Join(d, s))
		}
	}
	if !reflect.DeepEqual(ld.asked, want) {
		t.Fatalf("asked\n%q\nwant\n%q", ld.asked, want)
	}
	if len(info.Tried) != len(want) || info.Found {
		t.Fatalf("info = %+v", info)
	}
	if !strings.Contains(err.Error(), EnvLibDir) || !strings.Contains(err.Error(), "libcublas.so.13") {
		t.Fatalf("error does not say what to do: %v", err)
	}
	if WellKnownDirs()[0] != "/usr/local/cuda/targets/x86_64-linux/lib" && !strings.Contains(WellKnownDirs()[0], "sbsa") {
		t.Fatalf("first well-known dir %q", WellKnownDirs()[0])
	}
}

// TestSearchOnlyLibDir: OnlyLibDir searches the override alone, and the
// option wins over the environment.
func TestSearchOnlyLibDir(t *testing.T) {
	t.Setenv(EnvLibDir, "/ignored")
	ld := &fakeLoader{}
	_, _, err := find(specDriver, LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	if want := []string{"/d/libcuda.so.1"}; !reflect.DeepEqual(ld.asked, want) {
		t.Fatalf("asked %q, want %q", ld.asked, want)
	}
}

// TestSearchFirstWinsAndBrokenIsReported: a broken candidate is reported
// in Tried with the loader's message, and the search goes on to the next.
func TestSearchFirstWinsAndBrokenIsReported(t *testing.T) {
	ld := &fakeLoader{
		broken: map[string]string{"/d/libnvrtc.so.13": "libnvrtc.so.13: wrong ELF class: ELFCLASS32"},
		libs:   map[string][]string{"libnvrtc.so.12": nil, "/usr/local/cuda/lib64/libnvrtc.so.13": nil},
	}
	lib, info, err := find(specNVRTC, LoadOptions{LibDir: "/d", Loader: ld})
	if err != nil {
		t.Fatal(err)
	}
	if lib.Path() != "libnvrtc.so.12" || info.Soname != "libnvrtc.so.12" || !info.Found {
		t.Fatalf("loaded %s, info %+v; want the bare soname libnvrtc.so.12 (the loader path comes before the well-known dirs)", lib.Path(), info)
	}
	if len(info.Tried) != 4 || !strings.Contains(info.Tried[0], "ELFCLASS32") || info.Tried[3] != "libnvrtc.so.13: absent" {
		t.Fatalf("tried = %q", info.Tried)
	}
	// Broken everywhere: the error names the loader's message.
	ld = &fakeLoader{broken: map[string]string{"/d/libcuda.so.1": "libcuda.so.1: undefined symbol: foo"}}
	_, _, err = find(specDriver, LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "undefined symbol: foo") {
		t.Fatalf("err = %v", err)
	}
}

// TestSymbolMissing: a library without the functions druto needs names
// every missing one (the cgo build resolves; without cgo there is no GPU
// support at all).
func TestSymbolMissing(t *testing.T) {
	ld := &fakeLoader{libs: map[string][]string{"/d/libcuda.so.1": {"cuInit", "cuDriverGetVersion"}}}
	_, err := LoadDriver(LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
	if systemLoader == nil {
		if !errors.Is(err, ErrNoGPUSupport) {
			t.Fatalf("err = %v, want ErrNoGPUSupport in a build without cgo", err)
		}
		return
	}
	if !errors.Is(err, ErrSymbol) || !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrSymbol and ErrNoDriver", err)
	}
	for _, s := range []string{"cuMemAlloc_v2", "cuLaunchKernel", "cuModuleLoadDataEx"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not name %s: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), "cuGraphInstantiateWithFlags") || strings.Contains(err.Error(), "cuMemHostAlloc") {
		t.Errorf("error names an optional symbol (graphs and pinned memory may be missing): %v", err)
	}
	if strings.Contains(err.Error(), "cuInit,") {
		t.Errorf("error names a symbol that is there: %v", err)
	}
	// The same for NVRTC, cuBLAS, cuBLASLt and NVML.
	for _, tc := range []struct {
		load func(LoadOptions) error
		lib  string
		want string
	}{
		{func(o LoadOptions) error { _, err := LoadNVRTC(o); return err }, "libnvrtc.so.13", "nvrtcCompileProgram"},
		{func(o LoadOptions) error { _, err := LoadBLAS(o); return err }, "libcublas.so.13", "cublasGemmEx"},
		{func(o LoadOptions) error { _, err := LoadBLASLt(o); return err }, "libcublasLt.so.13", "cublasLtMatmul"},
		{func(o LoadOptions) error { _, err := LoadNVML(o); return err }, "libnvidia-ml.so.1", "nvmlInit_v2"},
	} {
		ld := &fakeLoader{libs: map[string][]string{"/d/" + tc.lib: nil}}
		err := tc.load(LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
		if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrSymbol naming %s", tc.lib, err, tc.want)
		}
	}
}

// TestDriverTooOld: a driver older than CUDA 11.8 is refused with what to do.
func TestDriverTooOld(t *testing.T) {
	f := newFakeDriver()
	f.ver = 11040
	_, err := newDriver(f, LibInfo{Path: "/fake/libcuda.so.1"})
	if !errors.Is(err, ErrDriverTooOld) {
		t.Fatalf("err = %v, want ErrDriverTooOld", err)
	}
	for _, s := range []string{"11.4", "11.8", "update the driver", "/fake/libcuda.so.1"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	f.ver = MinDriverVersion
	if _, err := newDriver(f, LibInfo{}); err != nil {
		t.Fatalf("CUDA 11.8 refused: %v", err)
	}
}

// TestNoDevice: cuInit's CUDA_ERROR_NO_DEVICE becomes ErrNoDevice and keeps
// the driver's Error.
func TestNoDevice(t *testing.T) {
	f := newFakeDriver()
	f.initErr = Error{Call: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE"}
	d, err := newDriver(f, LibInfo{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.DeviceCount()
	var ce Error
	if !errors.Is(err, ErrNoDevice) || !errors.As(err, &ce) || ce.Code != 100 {
		t.Fatalf("err = %v, want ErrNoDevice wrapping cuInit's Error", err)
	}
	if _, err := d.NewContext(0); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("NewContext: %v, want ErrNoDevice", err)
	}
}

// TestErrorFormat: Error names the call, code and name; Is matches sentinels.
func TestErrorFormat(t *testing.T) {
	e := Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	if got, want := e.Error(), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if !errors.Is(e, ErrOutOfMemory) || errors.Is(e, ErrNoDevice) {
		t.Fatal("Is does not match the sentinels")
	}
	if got := codeName(driverErrorNames, "CUDA_ERROR", 12345); got != "CUDA_ERROR_12345" {
		t.Fatalf("unknown code named %q", got)
	}
	if got := versionString(13000); got != "13.0" {
		t.Fatalf("versionString(13000) = %q", got)
	}
	if got := versionString(11080); got != "11.8" {
		t.Fatalf("versionString(11080) = %q", got)
	}
}

// TestLoadRecordsEveryLibrary: Load reports all five libraries, found or
// not, with the reason.
func TestLoadRecordsEveryLibrary(t *testing.T) {
	libs := Load(LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true, Loader: &fakeLoader{}})
	if libs.Err == nil || libs.Driver != nil {
		t.Fatalf("driver loaded from an empty fake directory: %v", libs.Err)
	}
	var names []string
	for _, l := range libs.Info {
		names = append(names, l.Name)
		if l.Found || l.Error == "" {
			t.Errorf("%s: found %v, error %q", l.Name, l.Found, l.Error)
		}
	}
	if want := []string{"cuda", "nvrtc", "cublasLt", "cublas", "nvml"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("libraries %q, want %q", names, want)
	}
	t.Setenv(EnvNoNVRTC, "1")
	if _, err := LoadNVRTC(LoadOptions{Loader: &fakeLoader{}}); err == nil || !strings.Contains(err.Error(), "hidden") {
		t.Fatalf("DRUTO_NO_NVRTC=1 did not hide NVRTC: %v", err)
	}
}
