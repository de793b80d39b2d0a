//go:build cgo && linux

package kernels

// gpu_test.go: building the kernels on a real GPU (their numerics against
// the CPU reference are tested by the root package's self-test tests).
// Skips without a GPU unless DRUTO_REQUIRE_GPU=1.

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/cuda"
)

func gpu(t *testing.T) (*cuda.Libraries, *cuda.Context) {
	t.Helper()
	libs := cuda.Load(cuda.LoadOptions{})
	err := libs.Err
	if err == nil {
		var n int
		if n, err = libs.Driver.DeviceCount(); err == nil && n == 0 {
			err = cuda.ErrNoDevice
		}
	}
	if err != nil {
		if os.Getenv("DRUTO_REQUIRE_GPU") == "1" {
			t.Fatalf("DRUTO_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	c, err := libs.Driver.NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return libs, c
}

// TestGPUBuildAndCache: NVRTC compiles every variant for the device, a
// second builder with the same cache directory loads the cubins instead.
func TestGPUBuildAndCache(t *testing.T) {
	libs, c := gpu(t)
	if libs.NVRTC == nil {
		t.Fatal("NVRTC not loaded")
	}
	dir := t.TempDir()
	for round, want := range []From{FromNVRTC, FromCache} {
		b := &Builder{Ctx: c, NVRTC: libs.NVRTC, CacheDir: dir}
		start := time.Now()
		built, err := b.BuildAll()
		if err != nil {
			t.Fatal(err)
		}
		total := time.Since(start)
		for _, k := range built {
			if k.Err != nil || k.From != want {
				t.Fatalf("round %d %s: from %s, err %v, fallback %q, cache err %v", round, k.Variant, k.From, k.Err, k.Fallback, k.CacheErr)
			}
			if k.CacheErr != nil {
				t.Errorf("%s: cache: %v", k.Variant, k.CacheErr)
			}
			// Each kernel's block must fit: the row kernels launch lnWarps
			// warps; the flash kernels are built for 128 threads (flash_fwd2,
			// flash_bwd2_hsN: 256)
			// (__launch_bounds__), the others for at least one warp.
			minThreads := 32
			if strings.HasPrefix(k.Kernel, "layernorm") {
				minThreads = 32 * lnWarps
			} else if strings.HasPrefix(k.Kernel, "flash_fwd2") || strings.HasPrefix(k.Kernel, "flash_bwd2_hs") {
				minThreads = 256
			} else if strings.HasPrefix(k.Kernel, "flash_fwd") || strings.HasPrefix(k.Kernel, "flash_bwd_hs") {
				minThreads = 128
			}
			if k.Attr.Registers <= 0 || k.Attr.MaxThreads < minThreads || k.Attr.Local != 0 {
				t.Errorf("%s: attributes %+v (want registers, >= %d threads, no local memory)", k.Variant, k.Attr, minThreads)
			}
			t.Logf("round %d %-24s %-15s compile %8v load %8v regs %d smem %d local %d maxthreads %d binary %d",
				round, k.Variant, k.From, k.CompileTime.Round(time.Microsecond), k.LoadTime.Round(time.Microsecond),
				k.Attr.Registers, k.Attr.SharedStatic, k.Attr.Local, k.Attr.MaxThreads, k.Attr.BinaryVersion)
		}
		t.Logf("round %d (%s): %d variants in %v", round, want, len(built), total.Round(time.Millisecond))
	}
	// A corrupt cache entry is recompiled, not trusted.
	vs, _ := Variants()
	src, _ := vs[0].Source()
	p := dir + "/" + CacheKey(vs[0], src, c.Device.Arch(), libs.NVRTC.Version())
	if err := os.WriteFile(p, []byte("\x7fELF garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := (&Builder{Ctx: c, NVRTC: libs.NVRTC, CacheDir: dir}).Build(vs[0])
	if k.Err != nil || k.From != FromNVRTC || k.CacheErr == nil {
		t.Fatalf("corrupt cache: from %s, err %v, cache err %v", k.From, k.Err, k.CacheErr)
	}
}

// TestGPUPTXJIT: without NVRTC every variant loads from the embedded PTX.
func TestGPUPTXJIT(t *testing.T) {
	_, c := gpu(t)
	built, err := (&Builder{Ctx: c}).BuildAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range built {
		if k.Err != nil || k.From != FromPTX || !k.Module.FromPTX || k.Fallback == "" {
			t.Fatalf("%s: from %s, err %v", k.Variant, k.From, k.Err)
		}
		t.Logf("%-24s JIT %v regs %d ptx %d binary %d", k.Variant, k.LoadTime.Round(time.Microsecond), k.Attr.Registers,
			k.Attr.PTXVersion, k.Attr.BinaryVersion)
	}
}

// TestNVRTCCompileOnly: every module (source file, dtype) compiles for
// sm_75 through sm_90 and compute_75; it needs NVRTC only, no device.
func TestNVRTCCompileOnly(t *testing.T) {
	n, err := cuda.LoadNVRTC(cuda.LoadOptions{})
	if err != nil {
		if os.Getenv("DRUTO_REQUIRE_GPU") == "1" {
			t.Fatalf("DRUTO_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
	vs, err := Variants()
	if err != nil {
		t.Fatal(err)
	}
	// One compile per module (source file, dtype): every kernel of a file is
	// in the same program, as pkg/device/gpu builds it.
	seen := map[[2]string]bool{}
	var modules []Variant
	for _, v := range vs {
		key := [2]string{v.File, v.DType.String()}
		if !seen[key] {
			seen[key] = true
			modules = append(modules, v)
		}
	}
	for _, arch := range []string{"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_75"} {
		for _, v := range modules {
			if cc, _ := strconv.Atoi(arch[strings.IndexByte(arch, '_')+1:]); cc < v.MinArch {
				continue // the file needs a newer GPU (its druto:arch line)
			}
			code, d, _, err := CompileOnly(n, v, arch)
			if err != nil {
				t.Fatalf("%s %s: %v", v, arch, err)
			}
			if cuda.IsCubin(code) != (arch[:3] == "sm_") {
				t.Fatalf("%s %s: wrong output kind", v, arch)
			}
			t.Logf("%-24s %-10s %6d bytes in %v", v, arch, len(code), d.Round(time.Millisecond))
		}
	}
}
