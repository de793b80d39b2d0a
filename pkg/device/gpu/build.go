package gpu

// build.go: making the kernels of package kernels ready on one device:
// NVRTC for the device's exact sm_XY with an on-disk cubin cache, else the
// embedded PTX JIT-compiled by the driver (see package kernels for the
// sources and their manifest).

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// From says where a loaded kernel's code came from.
type From string

// The ways a kernel becomes available, best first.
const (
	FromNVRTC   From = "nvrtc-compiled" // compiled now by NVRTC for the exact sm_XY
	FromCache   From = "nvrtc-cached"   // an NVRTC cubin from the on-disk cache
	FromPTX     From = "ptx-jit"        // the embedded PTX (compute_75, or the file's druto:arch), JIT-compiled by the driver
	Unavailable From = "unavailable"    // neither worked: callers use the decomposed CPU fallback
)

// Built is one kernel variant made ready on a device (or not, with why).
type Built struct {
	kernels.Variant
	Arch        string        // the device's sm_XY
	From        From          // how the code was obtained
	CompileTime time.Duration // NVRTC compile time (0 when cached or PTX)
	LoadTime    time.Duration // module load time (the JIT compile for PTX)
	CacheFile   string        // the cubin's cache path, when NVRTC was used
	CacheErr    error         // a failure to read or write the cache (not fatal)
	Fallback    string        // why NVRTC's cubin was not used, when From is FromPTX
	Log         string        // NVRTC's or the JIT's log, often empty
	Attr        cuda.FuncAttributes
	Module      *cuda.Module
	Func        *cuda.Function
	Err         error // why the kernel is Unavailable
}

// ErrArch is wrapped by the error of a kernel whose source needs a newer
// GPU than the device (its druto:arch line).
var ErrArch = errors.New("gpu: GPU too old for this kernel")

// builder makes kernels ready on one device: NVRTC for the device's exact
// architecture with an on-disk cubin cache, else the embedded PTX.
type builder struct {
	Ctx      *cuda.Context
	NVRTC    *cuda.NVRTC // nil: embedded PTX only
	CacheDir string      // empty: DefaultCacheDir()
	NoCache  bool        // neither read nor write the cache

	// modules holds each (file, dtype) module built so far: the kernels of
	// one .cu file share one compile and one module load. Build may be
	// called from several goroutines; each module is built once.
	mu      sync.Mutex
	modules map[string]*moduleEntry
}

type moduleEntry struct {
	once sync.Once
	k    *Built // the first kernel built from the module
}

func moduleKey(v kernels.Variant) string { return v.File + "/" + v.DType.String() }

// DefaultCacheDir returns os.UserCacheDir()/druto/kernels.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("gpu: no user cache directory: %w", err)
	}
	return filepath.Join(d, "druto", "kernels"), nil
}

// nvrtcOptions are the options every variant is compiled with.
func nvrtcOptions(v kernels.Variant) []string { return []string{v.Define()} }

// CacheKey returns the cache file name of a variant's module (its source
// file compiled for its dtype) for arch by NVRTC version nvrtcVersion: it
// names the file, dtype, arch and version and ends in a hash of the source
// bytes and options. Every kernel of one file and dtype shares it.
func CacheKey(v kernels.Variant, src []byte, arch, nvrtcVersion string) string {
	h := sha256.New()
	h.Write(src)
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(nvrtcOptions(v), "\x00")))
	sum := hex.EncodeToString(h.Sum(nil))
	return fmt.Sprintf("%s-%s-%s-nvrtc%s-%s.cubin", strings.TrimSuffix(filepath.Base(v.File), ".cu"), v.DType, arch, nvrtcVersion, sum[:16])
}

// compileOnly compiles a variant with NVRTC for any architecture (no device
// needed): a cubin for "sm_XY", PTX for "compute_XY".
func compileOnly(n *cuda.NVRTC, v kernels.Variant, arch string) ([]byte, time.Duration, string, error) {
	src, err := v.Source()
	if err != nil {
		return nil, 0, "", err
	}
	start := time.Now()
	code, log, err := n.Compile(string(src), v.File, arch, nvrtcOptions(v)...)
	return code, time.Since(start), log, err
}

// buildAll builds every variant, in source order; each result carries its
// own error. The first kernel of each module (source file and dtype) is
// built in parallel, one NVRTC compile each; the others are looked up in
// their module.
func (b *builder) buildAll() ([]*Built, error) {
	vs, err := kernels.Variants()
	if err != nil {
		return nil, err
	}
	out := make([]*Built, len(vs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	seen := map[string]bool{}
	for i, v := range vs {
		if seen[moduleKey(v)] {
			continue
		}
		seen[moduleKey(v)] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = b.Build(v)
		}()
	}
	wg.Wait()
	for i, v := range vs {
		if out[i] == nil {
			out[i] = b.Build(v)
		}
	}
	return out, nil
}

// dtype is the variant's storage type as a tensor dtype.
func (k *Built) dtype() tensor.DType { return dtypeOf(k.Variant) }

func dtypeOf(v kernels.Variant) tensor.DType {
	dt, _ := tensor.ParseDType(v.DType.String()) // kernels accepts only f32, bf16 and f16
	return dt
}

// Build makes one variant ready: a cached cubin, else an NVRTC compile
// (cached for next time), else the embedded PTX. A failure at each step is
// recorded (Fallback, CacheErr) and the next step tried; only when the PTX
// fails too is the result Unavailable, with Err set.
func (b *builder) Build(v kernels.Variant) *Built {
	b.mu.Lock()
	if b.modules == nil {
		b.modules = map[string]*moduleEntry{}
	}
	e := b.modules[moduleKey(v)]
	if e == nil {
		e = &moduleEntry{}
		b.modules[moduleKey(v)] = e
	}
	b.mu.Unlock()
	first := false
	e.once.Do(func() { first, e.k = true, b.build(v) })
	if first {
		return e.k
	}
	// Same file and dtype as a kernel built before: reuse its module
	// (compile and load times were reported with that kernel).
	m := e.k
	k := &Built{Variant: v, Arch: m.Arch, From: m.From, Module: m.Module, CacheFile: m.CacheFile, Fallback: m.Fallback, Log: m.Log}
	if m.Module == nil {
		k.Err = m.Err
		return k
	}
	return b.finish(k)
}

// build makes v's module ready (see Build).
func (b *builder) build(v kernels.Variant) *Built {
	k := &Built{Variant: v, Arch: b.Ctx.Device.Arch()}
	if cc := b.Ctx.Device.Major*10 + b.Ctx.Device.Minor; cc < v.MinArch {
		k.From, k.Err = Unavailable, fmt.Errorf("gpu: %s needs sm_%d or newer (this device is %s): %w", v, v.MinArch, k.Arch, ErrArch)
		return k
	}
	if b.NVRTC != nil {
		if b.buildNVRTC(k) {
			return b.finish(k)
		}
	} else {
		k.Fallback = "NVRTC not loaded"
	}
	ptx, err := v.PTX()
	if err != nil {
		k.From, k.Err = Unavailable, fmt.Errorf("gpu: %s: no embedded PTX: %w", v, err)
		return k
	}
	m, err := b.Ctx.LoadModule(ptx)
	if err != nil {
		k.From, k.Err = Unavailable, fmt.Errorf("gpu: %s: PTX JIT failed (%s): %w", v, k.Fallback, err)
		return k
	}
	k.From, k.Module, k.LoadTime, k.Log = FromPTX, m, m.LoadTime, m.JITLog
	return b.finish(k)
}

// buildNVRTC tries the cache and then NVRTC; it reports success.
func (b *builder) buildNVRTC(k *Built) bool {
	src, err := k.Source()
	if err != nil {
		k.Fallback = err.Error()
		return false
	}
	dir := b.CacheDir
	if dir == "" && !b.NoCache {
		if dir, err = DefaultCacheDir(); err != nil {
			k.CacheErr = err
		}
	}
	if dir != "" && !b.NoCache {
		k.CacheFile = filepath.Join(dir, CacheKey(k.Variant, src, k.Arch, b.NVRTC.Version()))
		if cubin, err := os.ReadFile(k.CacheFile); err == nil && cuda.IsCubin(cubin) {
			m, err := b.Ctx.LoadModule(cubin)
			if err == nil {
				k.From, k.Module, k.LoadTime = FromCache, m, m.LoadTime
				return true
			}
			k.CacheErr = fmt.Errorf("gpu: cached %s did not load, recompiling: %w", k.CacheFile, err)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			k.CacheErr = err
		}
	}
	start := time.Now()
	cubin, log, err := b.NVRTC.Compile(string(src), k.File, k.Arch, nvrtcOptions(k.Variant)...)
	k.CompileTime, k.Log = time.Since(start), log
	if err != nil {
		k.Fallback = "NVRTC compile failed: " + err.Error()
		return false
	}
	if k.CacheFile != "" {
		if err := writeAtomic(k.CacheFile, cubin); err != nil {
			k.CacheErr = err
		}
	}
	m, err := b.Ctx.LoadModule(cubin)
	if err != nil {
		k.Fallback = fmt.Sprintf("NVRTC %s cubin did not load: %v", b.NVRTC.Version(), err)
		return false
	}
	k.From, k.Module, k.LoadTime = FromNVRTC, m, m.LoadTime
	return true
}

// finish looks the kernel up in its module and reads its attributes.
func (b *builder) finish(k *Built) *Built {
	f, err := k.Module.Function(k.Kernel)
	if err == nil {
		k.Func = f
		k.Attr, err = f.Attributes()
	}
	if err != nil {
		k.From, k.Err = Unavailable, fmt.Errorf("gpu: %s: %w", k.Variant, err)
	}
	return k
}

// writeAtomic writes data to a temp file in path's directory, then renames.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("gpu: cache: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("gpu: cache: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("gpu: cache: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("gpu: cache: %w", err)
	}
	return nil
}
