//go:build cgo && linux

package gpu

// build_test.go: building the kernels on a real GPU (their numerics against
// the CPU reference are tested by the root package's self-test tests).
// Skips without a GPU unless DRUTO_REQUIRE_GPU=1.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
)

func buildCtx(t *testing.T) (*cuda.Libraries, *cuda.Context) {
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
		gputest.Skip(t, err)
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
	libs, c := buildCtx(t)
	if libs.NVRTC == nil {
		t.Fatal("NVRTC not loaded")
	}
	dir := t.TempDir()
	blocks, err := kernels.KernelBlocks()
	if err != nil {
		t.Fatal(err)
	}
	for round, want := range []From{FromNVRTC, FromCache} {
		b := &builder{Ctx: c, NVRTC: libs.NVRTC, CacheDir: dir}
		start := time.Now()
		built, err := b.buildAll()
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
			// Each kernel must take the block its source defines (the
			// launchers use that one, kernels.KernelBlocks).
			minThreads := 32
			if n, ok := blocks[k.Kernel]; ok {
				minThreads = n
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
	// A corrupt cache entry is recompiled, not trusted. Loading it fails on
	// purpose, which compute-sanitizer counts as an API error: its runs
	// (scripts/gpu-bench.sh sets DRUTO_SANITIZER) leave this part out.
	if tool := os.Getenv("DRUTO_SANITIZER"); tool != "" {
		t.Logf("corrupt-cache check left out under compute-sanitizer %s (it fails a module load on purpose)", tool)
		return
	}
	vs, _ := kernels.Variants()
	src, _ := vs[0].Source()
	p := dir + "/" + CacheKey(vs[0], src, c.Device.Arch(), libs.NVRTC.Version())
	if err := os.WriteFile(p, []byte("\x7fELF garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := (&builder{Ctx: c, NVRTC: libs.NVRTC, CacheDir: dir}).Build(vs[0])
	if k.Err != nil || k.From != FromNVRTC || k.CacheErr == nil {
		t.Fatalf("corrupt cache: from %s, err %v, cache err %v", k.From, k.Err, k.CacheErr)
	}
}

// TestGPUPTXJIT: without NVRTC every variant loads from the embedded PTX,
// but those whose file needs a newer GPU than the device (ErrArch).
func TestGPUPTXJIT(t *testing.T) {
	_, c := buildCtx(t)
	built, err := (&builder{Ctx: c}).buildAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range built {
		if errors.Is(k.Err, ErrArch) { // the file needs a newer GPU (its druto:arch line)
			t.Logf("%-24s %v", k.Variant, k.Err)
			continue
		}
		if k.Err != nil || k.From != FromPTX || !k.Module.FromPTX || k.Fallback == "" {
			t.Fatalf("%s: from %s, err %v", k.Variant, k.From, k.Err)
		}
		t.Logf("%-24s JIT %v regs %d ptx %d binary %d", k.Variant, k.LoadTime.Round(time.Microsecond), k.Attr.Registers,
			k.Attr.PTXVersion, k.Attr.BinaryVersion)
	}
}

// TestNVRTCCompileOnly: every module (source file, dtype) compiles for
// sm_75 through sm_90 and compute_75, or for the targets listed in
// DRUTO_NVRTC_ARCHS (comma-separated: CI compiles for sm_75, sm_80 and
// sm_90 within its time); it needs NVRTC only, no device.
func TestNVRTCCompileOnly(t *testing.T) {
	n, err := cuda.LoadNVRTC(cuda.LoadOptions{})
	if err != nil {
		testreq.Skip(t, "DRUTO_NVRTC_TESTS", "NVRTC does not load: %v", err)
	}
	archs := []string{"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_75"}
	if s := os.Getenv("DRUTO_NVRTC_ARCHS"); s != "" {
		archs = strings.Split(s, ",")
	}
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	// One compile per module (source file, dtype): every kernel of a file is
	// in the same program, as pkg/device/gpu builds it.
	seen := map[[2]string]bool{}
	var modules []kernels.Variant
	for _, v := range vs {
		key := [2]string{v.File, v.DType.String()}
		if !seen[key] {
			seen[key] = true
			modules = append(modules, v)
		}
	}
	// The compiles run on every core (NVRTC programs are independent):
	// one after another they took 138 s of the H200 machine's test time.
	type job struct {
		v    kernels.Variant
		arch string
	}
	var jobs []job
	for _, arch := range archs {
		for _, v := range modules {
			if cc, _ := strconv.Atoi(arch[strings.IndexByte(arch, '_')+1:]); cc < v.MinArch {
				continue // the file needs a newer GPU (its druto:arch line)
			}
			jobs = append(jobs, job{v, arch})
		}
	}
	logs, errs := make([]string, len(jobs)), make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(1, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v, arch := jobs[i].v, jobs[i].arch
				code, d, _, err := compileOnly(n, v, arch)
				switch {
				case err != nil:
					errs[i] = fmt.Errorf("%s %s: %w", v, arch, err)
				case cuda.IsCubin(code) != (arch[:3] == "sm_"):
					errs[i] = fmt.Errorf("%s %s: wrong output kind", v, arch)
				}
				logs[i] = fmt.Sprintf("%-24s %-10s %6d bytes in %v", v, arch, len(code), d.Round(time.Millisecond))
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range jobs {
		if errs[i] != nil {
			t.Error(errs[i])
		}
		t.Log(logs[i])
	}
}
