// Package labcuda builds and runs the CUDA C kernel a student writes in lab
// 5 (a fused bias + GELU): NVRTC compiles it, the CUDA driver loads and
// launches it, and pkg/lab grades it against the CPU twin
// (lab.BiasGELUKernel). It is apart from pkg/lab because it imports
// pkg/cuda, a cgo package: only lab 5's notebook links it, and the other
// labs' cell programs stay small.
//
// Where there is no GPU (no driver, no device, or a build without cgo)
// the exercise is skipped with one line, and where NVRTC is installed the
// line says whether the kernel compiles: CI's machines have NVRTC and no
// GPU.
package labcuda

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/lab"
)

// BiasGELU is lab 5's kernel exercise for the CUDA C source src, which
// defines lab.BiasGELUKernelSignature: in a notebook,
// lab.Check(lang, labcuda.BiasGELU(kernelSrc)).
func BiasGELU(src string) lab.Exercise { return lab.BiasGELUKernel(src, &Runner{}) }

// NoGPUArch is what a kernel is compiled for where there is no GPU: PTX
// for compute_75 (T4, the oldest GPU druto supports), the embedded PTX's
// target.
const NoGPUArch = "compute_75"

// Runner is lab.KernelRunner with NVRTC and the CUDA driver on device 0.
// The zero value is ready; Options may hide libraries (tests).
type Runner struct {
	Options cuda.LoadOptions

	ctx *cuda.Context
	fn  *cuda.Function
	mod *cuda.Module
}

// GPU loads the driver and opens device 0. No driver, no device and a
// build without cgo wrap lab.ErrNoGPU; any other error is the GPU's.
func (r *Runner) GPU() (string, error) {
	drv, err := cuda.LoadDriver(r.Options)
	if err == nil {
		var n int
		if n, err = drv.DeviceCount(); err == nil && n == 0 {
			err = cuda.ErrNoDevice
		}
	}
	if err == nil {
		r.ctx, err = drv.NewContext(0)
	}
	switch {
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice), errors.Is(err, cuda.ErrNoGPUSupport):
		return "", fmt.Errorf("%w: %w", lab.ErrNoGPU, err)
	case err != nil:
		return "", err
	}
	return r.ctx.Device.Name + " (" + r.ctx.Device.Arch() + ")", nil
}

// Compile compiles src with NVRTC: a cubin for the GPU's architecture
// where NVRTC knows it, else PTX for the newest architecture NVRTC knows
// below it (the driver compiles that for the GPU), or NoGPUArch where there
// is no GPU. With a GPU it also loads the code and finds the kernel;
// without one it looks for the kernel's entry in the PTX.
func (r *Runner) Compile(src string) (string, error) {
	n, err := cuda.LoadNVRTC(r.Options)
	if err != nil {
		return "", fmt.Errorf("%w: %w", lab.ErrNoNVRTC, err)
	}
	ver := n.Version()
	arch := NoGPUArch
	if r.ctx != nil {
		if arch, err = pickArch(n, r.ctx.Device.Major*10+r.ctx.Device.Minor); err != nil {
			return ver, err
		}
	}
	code, _, err := n.Compile(src, lab.BiasGELUKernelName+".cu", arch)
	var ce *cuda.CompileError
	switch {
	case errors.As(err, &ce):
		return ver, &lab.CompileError{NVRTC: ver, Log: ce.Log}
	case err != nil:
		return ver, err
	case r.ctx == nil && !bytes.Contains(code, []byte(".entry "+lab.BiasGELUKernelName+"(")):
		return ver, fmt.Errorf("%w in the PTX NVRTC wrote", lab.ErrKernelName)
	case r.ctx == nil:
		return ver, nil
	}
	if r.mod, err = r.ctx.LoadModule(code); err != nil {
		return ver, err
	}
	if r.fn, err = r.mod.Function(lab.BiasGELUKernelName); err != nil {
		return ver, fmt.Errorf("%w: %w", lab.ErrKernelName, err)
	}
	return ver, nil
}

// pickArch is "sm_XY" for a GPU of compute capability cc (75 for 7.5)
// where NVRTC compiles for it, else "compute_XY" of the newest
// architecture NVRTC knows below cc.
func pickArch(n *cuda.NVRTC, cc int) (string, error) {
	archs, err := n.SupportedArchs()
	if err != nil {
		return "", err
	}
	if slices.Contains(archs, cc) {
		return fmt.Sprintf("sm_%d", cc), nil
	}
	best := 0
	for _, a := range archs {
		if a < cc {
			best = max(best, a)
		}
	}
	if best == 0 {
		return "", fmt.Errorf("labcuda: NVRTC %s compiles for %v, none of them for this GPU (sm_%d)", n.Version(), archs, cc)
	}
	return fmt.Sprintf("compute_%d", best), nil
}

// grid is the launch's blocks for n elements.
func grid(n int) cuda.Dim3 { return cuda.D1((n + lab.KernelBlock - 1) / lab.KernelBlock) }

// buffers allocates out (zeroed), inp and bias on the GPU for an (N, C)
// launch; free frees them.
func (r *Runner) buffers(N, C int) (out, inp, bias cuda.DevicePtr, free func(), err error) {
	p := r.ctx.Pool()
	var ptrs []cuda.DevicePtr
	free = func() {
		for _, q := range ptrs {
			_ = p.Free(q)
		}
	}
	for _, n := range []int{N * C, N * C, C} {
		q, err := p.Alloc(uint64(4 * n))
		if err != nil {
			free()
			return 0, 0, 0, func() {}, err
		}
		ptrs = append(ptrs, q)
	}
	if err := r.ctx.DefaultStream().Memset32(ptrs[0], 0, uint64(N*C)); err != nil {
		free()
		return 0, 0, 0, func() {}, err
	}
	return ptrs[0], ptrs[1], ptrs[2], free, nil
}

// Launch runs the kernel on (N, C): inputs uploaded, out zeroed first,
// ⌈N·C/256⌉ blocks of 256 threads, out downloaded.
func (r *Runner) Launch(out, inp, bias []float32, N, C int) error {
	dOut, dInp, dBias, free, err := r.buffers(N, C)
	if err != nil {
		return err
	}
	defer free()
	s := r.ctx.DefaultStream()
	return errors.Join(cuda.Upload(s, dInp, inp), cuda.Upload(s, dBias, bias),
		r.fn.Launch(s, grid(N*C), cuda.D1(lab.KernelBlock), 0, dOut, dInp, dBias, N, C),
		s.Synchronize(), cuda.Download(s, out, dOut))
}

// copyBytes is the size of the copy Bandwidth times, as pkg/bench's
// CopyBandwidth: 1 GiB.
const copyBytes = 1 << 30

// Bandwidth times the kernel on (N, C) (inputs left as the allocator
// gives them: the kernel's time does not depend on the values) and a
// device-to-device copy of 1 GiB, each the median of 10 runs after one
// warm-up, with CUDA events, as pkg/bench's CopyBandwidth; both count
// bytes read plus written: the kernel's 4·(2·N·C + C).
func (r *Runner) Bandwidth(N, C int) (kernel, copy float64, err error) {
	dOut, dInp, dBias, free, err := r.buffers(N, C)
	if err != nil {
		return 0, 0, err
	}
	defer free()
	s := r.ctx.DefaultStream()
	tk, err := r.median(func() error {
		return r.fn.Launch(s, grid(N*C), cuda.D1(lab.KernelBlock), 0, dOut, dInp, dBias, N, C)
	})
	if err != nil {
		return 0, 0, err
	}
	p := r.ctx.Pool()
	src, err1 := p.Alloc(copyBytes)
	dst, err2 := p.Alloc(copyBytes)
	defer func() { _ = p.Free(src); _ = p.Free(dst) }()
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	tc, err := r.median(func() error { return s.CopyDtoD(dst, src, copyBytes) })
	if err != nil {
		return 0, 0, err
	}
	return 4 * float64(2*N*C+C) / tk / 1e9, 2 * copyBytes / tc / 1e9, nil
}

// median times op with events on the default stream: one warm-up, then
// the median of 10 runs, in seconds.
func (r *Runner) median(op func() error) (float64, error) {
	d, err := r.ctx.Median(r.ctx.DefaultStream(), 10, op)
	return d.Seconds(), err
}

// Close unloads the kernel and closes the context.
func (r *Runner) Close() error {
	if r.ctx == nil {
		return nil
	}
	var err error
	if r.mod != nil {
		err = r.mod.Unload()
	}
	err = errors.Join(err, r.ctx.Close())
	r.ctx, r.mod, r.fn = nil, nil, nil
	return err
}
