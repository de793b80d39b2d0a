package cpu

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Device is the CPU reference device. It is safe for use by one goroutine at
// a time; each op spreads its work over Threads worker goroutines.
type Device struct {
	fused   bool
	threads int
	err     error       // first error since the last Sync
	records [][]float32 // state snapshots (step.go)

	sampleScratch []*device.SampleScratch // SampleHead's, one a row
}

var _ device.Device = (*Device)(nil)

// New returns a CPU device.
func New(opt device.Options) *Device {
	loadBLAS()
	n := opt.Threads
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Device{fused: opt.Fused, threads: n}
}

// loadBLAS loads the BLAS library once with OPENBLAS_NUM_THREADS=1 in the
// environment (unless the user set it), then takes the variable away again
// so that child processes do not inherit it. pkg/blas runs OpenBLAS on one
// thread per call and spreads products over goroutines itself, but a
// pthread OpenBLAS started with more threads keeps a pool that spins in
// sched_yield, taking CPU time from druto's own goroutines (on a 2-core
// machine the fused fp32 step ran 1.3-2x slower with the pool); with one
// thread the pool is never made.
func loadBLAS() {
	blasOnce.Do(func() {
		const env = "OPENBLAS_NUM_THREADS"
		if _, set := os.LookupEnv(env); !set && os.Setenv(env, "1") == nil {
			defer os.Unsetenv(env)
		}
		blas.Name()
		fusedBF16 = bf16Policy()
	})
}

var blasOnce sync.Once

// Name describes the device.
func (d *Device) Name() string {
	return fmt.Sprintf("cpu (%d threads, %s)", d.threads, gemmName())
}

// Describe says which CPU path runs, for druto detect: the GEMM library,
// how bf16 linear layers multiply, the instruction set of the elementwise
// kernels and the worker threads.
func (d *Device) Describe() string {
	return fmt.Sprintf("GEMM %s; bf16 GEMMs %s; elementwise kernels %s; %d threads", gemmName(), bf16GemmName(), ISA(), d.threads)
}

// BF16Dot reports whether this CPU's linear layers multiply bf16 operands
// natively, with the AVX512_BF16 pair kernel (VDPBF16PS) — unless
// DRUTO_CPU_ISA keeps an older kernel — and names the instruction set.
// druto detect reports it and train.AutoPolicy decides from it, then
// measures.
func (d *Device) BF16Dot() (string, bool) {
	loadBLAS()
	if !fusedBF16 {
		return "", false
	}
	return blas.DotBF16()
}

// Fused reports whether the fused forms run.
func (d *Device) Fused() bool { return d.fused }

// Threads returns the number of worker goroutines.
func (d *Device) Threads() int { return d.threads }

// Alloc returns a zeroed host tensor.
func (d *Device) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("cpu: alloc of unknown dtype %v", dt)
	}
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("cpu: alloc with negative extent in %v", tensor.Shape(shape))
		}
	}
	return tensor.New(dt, shape...), nil
}

// Free does nothing: host memory is garbage collected.
func (d *Device) Free(t *tensor.Tensor) {}

// Upload copies src into dst (both host tensors here).
func (d *Device) Upload(dst, src *tensor.Tensor) { d.copyRaw(dst, src) }

// Download copies src into dst (both host tensors here).
func (d *Device) Download(dst, src *tensor.Tensor) { d.copyRaw(dst, src) }

func (d *Device) copyRaw(dst, src *tensor.Tensor) {
	if dst.DType != src.DType || dst.Numel() != src.Numel() {
		d.fail(fmt.Errorf("cpu: copy of %s%v into %s%v", src.DType, src.Shape, dst.DType, dst.Shape))
		return
	}
	copy(dst.Raw(), src.Raw())
}

// Zero sets every element of t to zero, in parallel chunks of at least
// 256 KiB (a training step zeroes megabytes of gradients).
func (d *Device) Zero(t *tensor.Tensor) {
	raw := t.Raw()
	d.parallel(len(raw), 1<<18, func(lo, hi int) { clear(raw[lo:hi]) })
}

// Cast converts src into dst, rounding to nearest even.
func (d *Device) Cast(dst, src *tensor.Tensor) {
	if !d.check(&device.Ops.Cast, []int{device.Numel(dst)}, dst, src) {
		return
	}
	if dst.DType == src.DType {
		copy(dst.Raw(), src.Raw())
		return
	}
	n := src.Numel()
	d.parallel(n, 1<<14, func(lo, hi int) {
		buf := make([]float32, hi-lo)
		load(buf, src, lo)
		store(dst, lo, buf)
	})
}

// Sync returns the first error recorded since the last Sync and clears it.
func (d *Device) Sync() error {
	err := d.err
	d.err = nil
	return err
}

// fail records the first error.
func (d *Device) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// parallel splits [0,n) into contiguous chunks of at least grain items and
// runs fn on each from up to d.threads goroutines: the caller's and the
// team's helpers (team.go), or new goroutines when the team is busy.
func (d *Device) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := d.threads
	if grain < 1 {
		grain = 1
	}
	if max := (n + grain - 1) / grain; workers > max {
		workers = max
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	if teamRun(n, chunk, workers, fn) {
		return
	}
	// The first chunk runs on the calling goroutine: one goroutine fewer to
	// start and wake per call.
	var wg sync.WaitGroup
	for lo := chunk; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, hi)
	}
	fn(0, min(chunk, n))
	wg.Wait()
}

// load widens len(dst) elements of src starting at element off into dst.
func load(dst []float32, src *tensor.Tensor, off int) {
	switch src.DType {
	case tensor.F32:
		copy(dst, src.F32()[off:off+len(dst)])
	case tensor.BF16:
		bf16ToF32s(dst, src.U16()[off:off+len(dst)])
	case tensor.F16:
		for i, h := range src.U16()[off : off+len(dst)] {
			dst[i] = tensor.F16ToF32(h)
		}
	default:
		panic("cpu: load of " + src.DType.String())
	}
}

// store rounds src into dst's elements starting at off.
func store(dst *tensor.Tensor, off int, src []float32) {
	switch dst.DType {
	case tensor.F32:
		copy(dst.F32()[off:off+len(src)], src)
	case tensor.BF16:
		f32ToBF16s(dst.U16()[off:off+len(src)], src)
	case tensor.F16:
		u := dst.U16()[off : off+len(src)]
		for i, f := range src {
			u[i] = tensor.F16FromF32(f)
		}
	default:
		panic("cpu: store into " + dst.DType.String())
	}
}

// f32 returns t's elements as float32: t's own memory when it is F32 (so
// writes go through), else a widened copy. Ops use it for inputs.
func f32(t *tensor.Tensor) []float32 {
	if t == nil {
		return nil
	}
	if t.DType == tensor.F32 {
		return t.F32()
	}
	return t.ToF32()
}

// accumulate adds v into t (t += v), rounding to t's dtype.
func accumulate(t *tensor.Tensor, v []float32) { addInto(t, 0, v) }
