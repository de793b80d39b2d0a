package gpu

// gpu.go: the core of the CUDA device: construction (every kernel built
// once, cuBLAS and cuBLASLt handles, one stream), memory (Alloc, Free,
// Upload, Download, Zero through the context's Pool), error recording and
// Sync, and the helpers every op file uses:
//
//	d.fn(kernel, dt)             the built kernel, or nil with the error recorded
//	d.launch(kernel, dt, ...)    look up and queue a kernel on the device's stream
//	d.ptr(t)                     a tensor's device address (0 for nil)
//	d.fail(err)                  record the first error (Sync returns it)
//	d.unsupported(op, dts...)    record device.ErrUnsupported for a dtype combination
//	d.check(contract, sizes, ts...) the op's contract (device.Ops) at its boundary
//	d.checkDT(op, dt, ts...)     validate dtypes at an op's boundary
//	d.scratch(name, bytes)       a named, reused device buffer (never freed in a step)
//	d.do(fn)                     run a batch of driver calls in one hop to the context's thread
//	d.gemm(g), d.gemmBatched(g)  queue cuBLAS products; d.memset(p, n) zeroes bytes
//
// While launch_test.go's launchHook is set, launch records instead of
// launching and scratch, do, gemm, gemmBatched and memset touch no GPU, so
// the ops' kernel arguments are checked against the PTX on any machine.
//
// Ops never return errors: each records the first failure with d.fail and
// returns; Sync waits for the stream and returns that error, or the stream's
// own (an asynchronous launch failure), and clears it.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// WorkspaceBytes is the cuBLAS and cuBLASLt workspace each device holds
// (32 MiB, what cuBLAS recommends on Hopper).
const WorkspaceBytes = 32 << 20

// Config is everything New needs beyond the context; the zero value loads
// the libraries from their default places and uses the default kernel cache.
type Config struct {
	device.Options
	// Libs are libraries already loaded (cuda.Load); nil fields are loaded
	// here with Load. A nil NVRTC after loading means the embedded PTX.
	Libs *cuda.Libraries
	// Load says where to look for libraries that Libs lacks.
	Load cuda.LoadOptions
	// CacheDir is the kernel cubin cache; empty means DefaultCacheDir.
	CacheDir string
	// NoCache neither reads nor writes the kernel cache.
	NoCache bool
	// NoFlash keeps fused 16-bit attention on the cuBLAS path (probabilities
	// saved) where the flash-attention kernels would run: a kill switch and
	// the twin of parity tests.
	NoFlash bool
	// OwnContext makes Close close the context too (the device was given
	// a context made for it alone).
	OwnContext bool
}

// Device is device.Device on one CUDA GPU. Its ops queue work on one stream
// and return at once; Sync waits and returns the first error. It is safe
// for use by one goroutine at a time.
type Device struct {
	ctx      *cuda.Context
	stream   *cuda.Stream
	fused    bool
	noFlash  bool // Config.NoFlash
	flashV2  bool // the flash forward and backward of variant 2 (flash_attention2.cu) where built; off only for SelfTest and the micro-benchmarks
	dgeluEpi bool // MatmulBackwardGELU's fused 16-bit form is cuBLASLt's DGELU_BGRAD epilogue, not a stored dgrad + gelu_bias_backward; env DRUTO_DGELU=epilogue
	name     string
	owns     bool   // Close closes ctx
	noDecode string // why the decode ops are off (DisableDecode), "" while on

	nvrtc *cuda.NVRTC
	blas  *cuda.BLASHandle
	lt    *cuda.LtHandle
	ws    cuda.DevicePtr // WorkspaceBytes, shared by cuBLAS and cuBLASLt (one stream: never at once)

	built []*Built
	funcs map[kernelKey]*cuda.Function
	errs  map[kernelKey]error // why a kernel is unavailable
	pdl   map[kernelKey]bool  // launched as programmatic dependent launches (pdlOK)
	// tmaSmem is the dynamic shared memory a kernel of tmaKernels may take
	// a block, where it runs (tmaOK); noTMA: the micro-benchmarks' forms
	// without them (fused-l3, fused-generic).
	tmaSmem map[kernelKey]int
	noTMA   bool
	// noFixed: the layernorm kernels of run-time C instead of the
	// fixed-width ones (lnFixed), for the micro-benchmarks' generic forms
	// and the tests that compare the two.
	noFixed bool
	// attX: attention_decode's blocks a pair where above 0 (the
	// benchmarks' variants), in place of decSlots' choice.
	attX int

	scratches map[string]scratchBuf
	lts       map[ltKey]ltEntry // configured cuBLASLt matmuls (matmul.go)
	fp8NoBias map[ltKey]bool    // FP8 GEMM configurations whose bias epilogue cuBLASLt refused (fp8.go)
	dnn       dnnState          // cuDNN's fused attention, the second flash backend (cudnn.go)
	ltx       ltExtra           // algorithm forcing, tracing and tuning of those (matmul.go)
	tables    map[tableKey]layoutTable

	// trace, when not nil, records every kernel looked up to launch
	// (SelfTest: which kernels a conformance case ran).
	trace map[kernelKey]bool

	mu  sync.Mutex // guards err: fail may be called from helper goroutines
	err error

	launches  atomic.Int64 // kernels, cuBLAS(Lt) calls and memsets queued (Launches)
	capturing bool         // inside Capture: nothing may allocate or upload (step.go)
	records   *cuda.Pinned // state snapshots (step.go)
	nrecords  int
	stage     stager        // pinned ring for small uploads (stage.go)
	fetch     stager        // pinned ring for fetches (stage.go)
	marks     []*cuda.Event // timing marks (marks.go)
	moves     int           // scratch buffers and tables reallocated so far: a graph captured before a move is stale
}

// kernelKey names one kernel variant.
type kernelKey struct {
	name string
	dt   tensor.DType
}

// scratchBuf is one named scratch buffer.
type scratchBuf struct {
	ptr   cuda.DevicePtr
	bytes int
}

// layoutTable is a parameter layout's segment table uploaded to the device
// (adamw.go fills and uses it; the core frees it in Close).
type layoutTable struct {
	ptr  cuda.DevicePtr
	data []byte // what ptr holds, to see when the table changed
}

var (
	_ device.Device = (*Device)(nil)
	_ device.FP8    = (*Device)(nil)
)

// New returns a GPU device on ctx's device with the libraries loaded from
// their default places and every kernel built (NVRTC for the exact
// architecture with the on-disk cache, else the embedded PTX). It fails when
// cuBLAS or cuBLASLt is missing or a kernel the device needs cannot be built.
func New(ctx *cuda.Context, opts device.Options) (*Device, error) {
	return NewWith(ctx, Config{Options: opts})
}

// NewWith is New with libraries, search paths and the kernel cache given
// by cfg.
func NewWith(ctx *cuda.Context, cfg Config) (*Device, error) {
	if ctx == nil {
		return nil, errors.New("gpu: New with a nil context")
	}
	if _, err := gemmTuneEnv(); err != nil {
		return nil, err
	}
	dgeluEpi, err := dgeluEnv()
	if err != nil {
		return nil, err
	}
	attnMode, err := attentionEnv()
	if err != nil {
		return nil, err
	}
	pdlOn, err := pdlEnv()
	if err != nil {
		return nil, err
	}
	// DRUTO_GPU_MEMORY caps the context's pool: every buffer (tensors,
	// scratch, workspaces) comes from it, so the cap is enforced.
	memCap, err := device.MemoryCap()
	if err != nil {
		return nil, err
	}
	if memCap > 0 {
		ctx.Pool().SetLimit(uint64(memCap))
	}
	libs := cfg.Libs
	if libs == nil {
		libs = &cuda.Libraries{}
	}
	nvrtc, lt, blas := libs.NVRTC, libs.BLASLt, libs.BLAS
	if nvrtc == nil && !cfg.Load.NVRTCHidden() {
		nvrtc, _ = cuda.LoadNVRTC(cfg.Load) // optional: the embedded PTX otherwise
	}
	if lt == nil {
		if lt, err = cuda.LoadBLASLt(cfg.Load); err != nil {
			return nil, fmt.Errorf("gpu: cuBLASLt: %w", err)
		}
	}
	if blas == nil {
		if blas, err = cuda.LoadBLAS(cfg.Load); err != nil {
			return nil, fmt.Errorf("gpu: cuBLAS: %w", err)
		}
	}
	d := &Device{
		ctx: ctx, fused: cfg.Fused, noFlash: cfg.NoFlash, flashV2: true, dgeluEpi: dgeluEpi, nvrtc: nvrtc, owns: cfg.OwnContext,
		funcs: map[kernelKey]*cuda.Function{}, errs: map[kernelKey]error{}, pdl: map[kernelKey]bool{}, tmaSmem: map[kernelKey]int{},
		scratches: map[string]scratchBuf{}, lts: map[ltKey]ltEntry{}, tables: map[tableKey]layoutTable{},
	}
	ok := false
	defer func() {
		if !ok {
			d.owns = false // a failed New leaves the context to the caller
			_ = d.Close()
		}
	}()
	if d.stream, err = ctx.NewStream(); err != nil {
		return nil, fmt.Errorf("gpu: stream: %w", err)
	}
	if d.ws, err = ctx.Pool().Alloc(WorkspaceBytes); err != nil {
		return nil, fmt.Errorf("gpu: workspace: %w", err)
	}
	// Zeroed once: cuBLASLt's split-K reduction reads partial-sum slots its
	// GEMM kernel left unwritten (compute-sanitizer initcheck on the H200,
	// cublasLt::splitKreduce_kernel in the chunked LM head's GEMMs), so
	// their contents are defined, the same in every run and process.
	if err = d.stream.Memset8(d.ws, 0, WorkspaceBytes); err != nil {
		return nil, fmt.Errorf("gpu: workspace: %w", err)
	}
	if d.blas, err = blas.NewHandle(ctx, d.stream, d.ws, WorkspaceBytes); err != nil {
		return nil, fmt.Errorf("gpu: cuBLAS handle: %w", err)
	}
	// fp32 GEMMs stay fp32 (no TF32) so FP32 runs match the CPU reference;
	// 16-bit GEMMs use tensor cores with fp32 accumulation either way.
	if err = d.blas.SetMathMode(cuda.MathDefault); err != nil {
		return nil, fmt.Errorf("gpu: cuBLAS math mode: %w", err)
	}
	if d.lt, err = lt.NewHandle(ctx); err != nil {
		return nil, fmt.Errorf("gpu: cuBLASLt handle: %w", err)
	}
	if err = d.build(cfg, pdlOn); err != nil {
		return nil, err
	}
	d.initDNN(cfg, attnMode)
	rt := "embedded PTX"
	if nvrtc != nil {
		rt = "NVRTC " + nvrtc.Version()
	}
	d.name = fmt.Sprintf("gpu (%s, %s, %s, cuBLAS %s)", ctx.Device.Name, ctx.Device.Arch(), rt, blas.Info().Version)
	ok = true
	return d, nil
}

// build makes every kernel ready (builder.buildAll). A variant that cannot
// be built is recorded in d.errs (the op that needs it records the error
// when it runs); New fails only when nothing built.
func (d *Device) build(cfg Config, pdlOn bool) error {
	b := &builder{Ctx: d.ctx, NVRTC: d.nvrtc, CacheDir: cfg.CacheDir, NoCache: cfg.NoCache}
	built, err := b.buildAll()
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	d.built = built
	var msgs []string
	for _, k := range built {
		key := kernelKey{k.Kernel, k.dtype()}
		if n := dynamicSmem[k.Kernel]; n > 0 && k.Err == nil {
			// once per function: its dynamic shared memory above 48 KB
			if err := k.Func.SetMaxDynamicShared(n); err != nil {
				k.From, k.Func = Unavailable, nil
				k.Err = fmt.Errorf("gpu: %s in %s: %d bytes of dynamic shared memory: %w", k.Variant, k.File, n, err)
			}
		}
		if k.Err != nil {
			d.errs[key] = k.Err
			msgs = append(msgs, k.Err.Error())
			continue
		}
		d.funcs[key] = k.Func
		if tmaKernels[k.Kernel] && d.nvrtc != nil && tmaOK(k, d.ctx.Device.Major, d.nvrtc.Major) {
			// its rows take what shared memory a block can have
			if n := d.ctx.Device.SharedPerBlock - k.Attr.SharedStatic; n > 0 && k.Func.SetMaxDynamicShared(n) == nil {
				d.tmaSmem[key] = n
			}
		}
		if pdlOn && d.fused && pdlOK(k, d.ctx.Device.Major, d.ctx.PDL()) {
			d.pdl[key] = true
		}
	}
	if len(d.funcs) == 0 {
		return fmt.Errorf("gpu: no kernel could be built: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// Close releases the device's buffers, handles and stream, and the context
// when Config.OwnContext was set; otherwise the context stays open for its
// owner. Tensors from Alloc must be freed first or are released with the
// context's pool.
func (d *Device) Close() error {
	if d.ctx == nil {
		return nil
	}
	var errs []error
	if d.stream != nil {
		errs = append(errs, d.stream.Synchronize())
	}
	for _, e := range d.lts {
		if e.m != nil {
			errs = append(errs, e.m.Destroy())
		}
	}
	d.lts = map[ltKey]ltEntry{}
	errs = append(errs, d.closeDNN())
	pool := d.ctx.Pool()
	for _, s := range d.scratches {
		errs = append(errs, pool.Free(s.ptr))
	}
	d.scratches = map[string]scratchBuf{}
	for _, t := range d.tables {
		errs = append(errs, pool.Free(t.ptr))
	}
	d.tables = map[tableKey]layoutTable{}
	if d.records != nil {
		errs = append(errs, d.records.Free())
		d.records = nil
	}
	errs = append(errs, d.closeStage(), d.closeMarks())
	if d.lt != nil {
		errs = append(errs, d.lt.Destroy())
		d.lt = nil
	}
	if d.blas != nil {
		errs = append(errs, d.blas.Destroy())
		d.blas = nil
	}
	if d.ws != 0 {
		errs = append(errs, pool.Free(d.ws))
		d.ws = 0
	}
	if d.stream != nil {
		errs = append(errs, d.stream.Destroy())
		d.stream = nil
	}
	for _, k := range d.modules() {
		errs = append(errs, k.Unload())
	}
	d.funcs, d.built, d.pdl = map[kernelKey]*cuda.Function{}, nil, map[kernelKey]bool{}
	if d.owns {
		errs = append(errs, d.ctx.Close())
	}
	d.ctx = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gpu: close: %w", err)
	}
	return nil
}

// modules returns each loaded module once.
func (d *Device) modules() []*cuda.Module {
	seen := map[*cuda.Module]bool{}
	var out []*cuda.Module
	for _, k := range d.built {
		if k.Module != nil && !seen[k.Module] {
			seen[k.Module] = true
			out = append(out, k.Module)
		}
	}
	return out
}

// Name describes the device, e.g. "gpu (NVIDIA H200, sm_90, NVRTC 13.0, cuBLAS 13.0.0)".
func (d *Device) Name() string { return d.name }

// Fused reports whether the fused forms run.
func (d *Device) Fused() bool { return d.fused }

// Capability returns the device's compute capability, e.g. 9, 0 on sm_90.
func (d *Device) Capability() (major, minor int) {
	return d.ctx.Device.Major, d.ctx.Device.Minor
}

// Context returns the CUDA context the device runs in.
func (d *Device) Context() *cuda.Context { return d.ctx }

// Stream returns the stream every op is queued on (for events and timing).
func (d *Device) Stream() *cuda.Stream { return d.stream }

// Kernels returns how each kernel variant was built, in source order, for
// detection reports. The kernels of one source file and dtype share one
// module (one NVRTC compile), so they share its build times and origin.
func (d *Device) Kernels() []*Built { return d.built }

// KernelErrors returns, sorted, why each unavailable kernel variant is so.
func (d *Device) KernelErrors() []string {
	var out []string
	for k, err := range d.errs {
		out = append(out, fmt.Sprintf("%s/%s: %v", k.name, k.dt, err))
	}
	sort.Strings(out)
	return out
}

// Has reports whether kernel name is built for dtype dt.
func (d *Device) Has(name string, dt tensor.DType) bool { return d.funcs[kernelKey{name, dt}] != nil }

// Alloc returns a zeroed device tensor from the context's pool.
func (d *Device) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("gpu: alloc of unknown dtype %v", dt)
	}
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("gpu: alloc with negative extent in %v", tensor.Shape(shape))
		}
	}
	n := uint64(tensor.Shape(shape).Numel() * dt.Size())
	p, err := d.ctx.Pool().Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("gpu: alloc %s%v: %w", dt, tensor.Shape(shape), err)
	}
	if err := d.stream.Memset8(p, 0, n); err != nil {
		_ = d.ctx.Pool().Free(p)
		return nil, fmt.Errorf("gpu: alloc %s%v: zero: %w", dt, tensor.Shape(shape), err)
	}
	return tensor.OnDevice(dt, uintptr(p), shape...), nil
}

// Free returns a tensor from Alloc to the pool (not a view of one). Work
// already queued on the stream that uses it still completes first, since
// the pool hands the block out again only to later work on the same stream.
func (d *Device) Free(t *tensor.Tensor) {
	if t == nil || t.Dev == 0 {
		return
	}
	if err := d.ctx.Pool().Free(cuda.DevicePtr(t.Dev)); err != nil {
		d.fail(fmt.Errorf("gpu: free: %w", err))
		return
	}
	t.Dev = 0
}

// Upload copies a host tensor into a device tensor of the same dtype and size.
func (d *Device) Upload(dst, src *tensor.Tensor) {
	if !d.sameRaw("upload", dst, src) {
		return
	}
	if dst.Numel() == 0 {
		return
	}
	if !src.IsHost() || dst.IsHost() {
		d.fail(fmt.Errorf("gpu: upload wants a device destination and a host source"))
		return
	}
	if d.capturing {
		d.fail(fmt.Errorf("gpu: upload during graph capture (a replay would copy stale host memory)"))
		return
	}
	if d.stagedUpload(cuda.DevicePtr(dst.Dev), src.Raw()) {
		return
	}
	if err := d.stream.CopyHtoD(cuda.DevicePtr(dst.Dev), src.Raw()); err != nil {
		d.fail(fmt.Errorf("gpu: upload: %w", err))
	}
}

// Download copies a device tensor into a host tensor of the same dtype and
// size; dst holds the data when Download returns (queued work first).
func (d *Device) Download(dst, src *tensor.Tensor) {
	if !d.sameRaw("download", dst, src) {
		return
	}
	if dst.Numel() == 0 {
		return
	}
	if !dst.IsHost() || src.IsHost() {
		d.fail(fmt.Errorf("gpu: download wants a host destination and a device source"))
		return
	}
	if d.capturing {
		d.fail(fmt.Errorf("gpu: download during graph capture (a graph must not wait for the host)"))
		return
	}
	if err := d.stream.CopyDtoH(dst.Raw(), cuda.DevicePtr(src.Dev)); err != nil {
		d.fail(fmt.Errorf("gpu: download: %w", err))
	}
}

func (d *Device) sameRaw(op string, dst, src *tensor.Tensor) bool {
	if dst == nil || src == nil || dst.DType != src.DType || dst.Numel() != src.Numel() {
		d.fail(fmt.Errorf("gpu: %s of %v into %v: %w", op, desc(src), desc(dst), tensor.ErrShape))
		return false
	}
	return true
}

// Zero sets every element of a device tensor to zero.
func (d *Device) Zero(t *tensor.Tensor) {
	if t == nil || t.Numel() == 0 {
		return
	}
	if err := d.memset(d.ptr(t), t.Bytes()); err != nil {
		d.fail(fmt.Errorf("gpu: zero: %w", err))
	}
}

// Sync waits for the queued work and returns the first error recorded since
// the last Sync (or the stream's own asynchronous error), then clears it.
// A launch failure that corrupts the context (an illegal address) stays in
// the context: every later Sync returns it too, as CUDA does.
func (d *Device) Sync() error {
	serr := d.stream.Synchronize()
	d.mu.Lock()
	err := d.err
	d.err = nil
	d.mu.Unlock()
	if err == nil && serr != nil {
		err = fmt.Errorf("gpu: sync: %w", serr)
	}
	return err
}

// fail records err unless an earlier error is already recorded.
func (d *Device) fail(err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

// failed reports whether an error has been recorded since the last Sync;
// ops may skip queuing more work once one has.
func (d *Device) failed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err != nil
}

// unsupported records device.ErrUnsupported for op with the given dtypes,
// e.g. "gpu: matmul (out bf16, inp f32): device: unsupported".
func (d *Device) unsupported(op string, dts ...tensor.DType) {
	s := make([]string, len(dts))
	for i, dt := range dts {
		s[i] = dt.String()
	}
	d.fail(fmt.Errorf("gpu: %s with dtypes (%s): %w", op, strings.Join(s, ", "), device.ErrUnsupported))
}

// fn returns kernel name built for dtype dt, or nil after recording why it
// is unavailable. Kernels are named by their extern "C" name and dt is the
// DTYPE the module was compiled with (the policy's half type, or F32).
func (d *Device) fn(name string, dt tensor.DType) *cuda.Function {
	k := kernelKey{name, dt}
	if d.trace != nil {
		d.trace[k] = true
	}
	if f := d.funcs[k]; f != nil {
		return f
	}
	if err := d.errs[k]; err != nil {
		d.fail(fmt.Errorf("gpu: kernel %s/%s unavailable: %w", name, dt, err))
	} else {
		d.fail(fmt.Errorf("gpu: no kernel %s/%s: %w", name, dt, device.ErrUnsupported))
	}
	return nil
}

// launch queues kernel name (built for dt) on the device's stream with
// grid × block threads, shmem bytes of dynamic shared memory and args (see
// cuda.Function.Launch for the argument types). It records any failure and
// reports success. An empty grid (0 blocks) queues nothing and succeeds.
func (d *Device) launch(name string, dt tensor.DType, grid, block cuda.Dim3, shmem int, args ...any) bool {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 {
		return true
	}
	if err := checkGrid(name, dt, grid, block); err != nil {
		d.fail(err)
		return false
	}
	if launchHook != nil { // launch_test.go: record instead of launching
		if blockHook != nil {
			blockHook(name, block)
		}
		launchHook(name, dt, args)
		return true
	}
	f := d.fn(name, dt)
	if f == nil {
		return false
	}
	d.launches.Add(1)
	launch := f.Launch
	if d.pdl[kernelKey{name, dt}] {
		launch = f.LaunchPDL
	}
	if err := launch(d.stream, grid, block, shmem, args...); err != nil {
		d.fail(fmt.Errorf("gpu: %s/%s grid (%d,%d,%d): %w", name, dt, grid.X, grid.Y, grid.Z, err))
		return false
	}
	return true
}

// PDLEnv turns programmatic dependent launch off ("off") or leaves it on
// ("on" or unset): on sm_90 and newer, the fused device launches the
// kernels that begin with pdl_enter() (kernels/common.cuh) so that each may
// be scheduled while the kernel before it drains, and waits for it on the
// GPU (griddepcontrol.wait) rather than behind the stream's launch order.
const PDLEnv = "DRUTO_PDL"

// pdlEnv reads PDLEnv: whether programmatic dependent launch may be used.
func pdlEnv() (bool, error) {
	switch v := os.Getenv(PDLEnv); v {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	default:
		return false, fmt.Errorf("gpu: %s=%q: want on or off (programmatic dependent launch) or unset", PDLEnv, v)
	}
}

// tmaKernels need DRUTO_HAVE_TMA (kernels/common.cuh) and take what shared
// memory a block can have.
var tmaKernels = map[string]bool{kernCETMA: true, kernLNBackTMA: true}

// tmaOK reports whether k has its Hopper bulk-copy (TMA) code: sm_90 or
// newer, built there by NVRTC 12 or newer (PTX ISA 8.0). The embedded PTX,
// made by nvcc 11.8, and older NVRTCs compile an empty body in its place.
func tmaOK(k *Built, major, nvrtcMajor int) bool {
	return major >= 9 && nvrtcMajor >= 12 && (k.From == FromNVRTC || k.From == FromCache)
}

// pdlOK reports whether kernel k may be launched as a programmatic
// dependent launch on a device of compute capability major.x whose driver
// has cuLaunchKernelEx (launchEx): the kernel begins with pdl_enter and was
// compiled by NVRTC for this sm_90+ device. The embedded PTX is made for
// compute_75 or _80, where pdl_enter compiles to nothing, so a kernel
// JIT-compiled from it must keep the stream's full serialisation.
func pdlOK(k *Built, major int, launchEx bool) bool {
	return k.PDL && launchEx && major >= 9 && (k.From == FromNVRTC || k.From == FromCache)
}

// PDLKernels returns how many kernels the device launches as programmatic
// dependent launches (0 where it cannot or PDLEnv is off).
func (d *Device) PDLKernels() int { return len(d.pdl) }

// PDLStatus says in a line whether the device's kernels are launched as
// programmatic dependent launches, and if not, why.
func (d *Device) PDLStatus() string {
	if n := len(d.pdl); n > 0 {
		return fmt.Sprintf("programmatic dependent launch for %d kernel builds: each starts while the kernel before it drains (%s=off: plain launches)", n, PDLEnv)
	}
	on, _ := pdlEnv()
	why := ""
	switch {
	case !on:
		why = PDLEnv + "=off"
	case !d.fused:
		why = "the decomposed form"
	case d.ctx.Device.Major < 9:
		why = "it needs sm_90 or newer (this GPU is " + d.ctx.Device.Arch() + ")"
	case !d.ctx.PDL():
		why = "the driver has no cuLaunchKernelEx (CUDA 12.0)"
	default:
		why = "the kernels were not compiled by NVRTC for this GPU (the embedded PTX has no griddepcontrol)"
	}
	return "plain launches (" + why + ")"
}

// CUDA's launch limits (every architecture since sm_30).
const (
	maxGridX   = 1<<31 - 1
	maxGridYZ  = 65535
	maxThreads = 1024
)

// checkGrid returns an error naming the kernel and the launch shape when
// grid × block exceeds CUDA's limits, which a launch would reject (or, for a
// grid computed in a narrower integer, silently cover too little).
func checkGrid(name string, dt tensor.DType, grid, block cuda.Dim3) error {
	if uint64(grid.X) > maxGridX || grid.Y > maxGridYZ || grid.Z > maxGridYZ ||
		block.X == 0 || block.Y == 0 || block.Z == 0 || block.Z > 64 ||
		uint64(block.X)*uint64(block.Y)*uint64(block.Z) > maxThreads {
		return fmt.Errorf("gpu: %s/%s: launch of grid (%d,%d,%d) × block (%d,%d,%d) exceeds CUDA's limits "+
			"(grid x < 2^31, y and z <= 65535, at most 1024 threads a block): the tensor is too large for this kernel: %w",
			name, dt, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, tensor.ErrShape)
	}
	return nil
}

// grid1 is a one-dimensional grid of n blocks. A count past CUDA's limit
// (or a negative one, from an overflow) saturates, so checkGrid rejects the
// launch with an error instead of cuda.D1's uint32 truncation launching a
// grid that covers too little.
func grid1(n int) cuda.Dim3 {
	if n < 0 || n > maxGridX {
		return cuda.Dim3{X: 1<<32 - 1, Y: 1, Z: 1}
	}
	return cuda.D1(n)
}

// blocks returns how many blocks of per items cover n items.
func blocks(n, per int) int { return (n + per - 1) / per }

// ptr returns t's device address; nil gives 0 (a null pointer for kernels
// that take optional outputs). A host tensor records an error and gives 0.
func (d *Device) ptr(t *tensor.Tensor) cuda.DevicePtr {
	if t == nil {
		return 0
	}
	if t.Dev == 0 && t.Numel() > 0 {
		d.fail(fmt.Errorf("gpu: a host tensor %v was passed to a GPU op", desc(t)))
		return 0
	}
	return cuda.DevicePtr(t.Dev)
}

// check records the first rule of op's contract (device.Ops) that the
// arguments break, or a tensor that is not in device memory; it reports
// whether the arguments hold. The ops check only what is the GPU's own
// after it: the dtype combinations the kernels implement.
func (d *Device) check(c *device.Contract, s []int, ts ...*tensor.Tensor) bool {
	if err := c.Check(s, ts...); err != nil {
		d.fail(fmt.Errorf("gpu: %w", err))
		return false
	}
	for i, t := range ts {
		if t != nil && t.Dev == 0 && t.Numel() > 0 {
			d.fail(fmt.Errorf("gpu: %s: %s (%v) is a host tensor", c.Op, c.Params[i].Name, desc(t)))
			return false
		}
	}
	return true
}

// checkDT records device.ErrUnsupported unless every non-nil tensor has
// dtype dt; it reports whether all did.
func (d *Device) checkDT(op string, dt tensor.DType, ts ...*tensor.Tensor) bool {
	for i, t := range ts {
		if t != nil && t.DType != dt {
			d.fail(fmt.Errorf("gpu: %s: argument %d is %s, want %s: %w", op, i, t.DType, dt, device.ErrUnsupported))
			return false
		}
	}
	return true
}

// scratch returns a device buffer of at least bytes bytes kept under name
// and reused by every later call with that name; it grows (through the
// pool, once per larger size) and is never freed before Close, so a
// training step that has run once allocates nothing. Work queued earlier on
// the stream may still use the old contents: one stream orders it. It
// returns 0 after recording an error.
func (d *Device) scratch(name string, bytes int) cuda.DevicePtr {
	p, _ := d.scratchFresh(name, bytes)
	return p
}

// scratchFresh is scratch, also reporting whether this call allocated the
// buffer (its contents are then undefined).
func (d *Device) scratchFresh(name string, bytes int) (cuda.DevicePtr, bool) {
	if launchHook != nil {
		return hookAddr, false
	}
	if bytes <= 0 {
		bytes = 1
	}
	s, ok := d.scratches[name]
	if ok && s.bytes >= bytes {
		return s.ptr, false
	}
	if d.capturing {
		d.fail(fmt.Errorf("gpu: scratch %s needs %d bytes during graph capture (run the step once before capturing)", name, bytes))
		return 0, false
	}
	pool := d.ctx.Pool()
	if ok {
		// The stream orders the old buffer's queued users before any later
		// user of the recycled block, so freeing it to the pool is safe.
		if err := pool.Free(s.ptr); err != nil {
			d.fail(fmt.Errorf("gpu: scratch %s: %w", name, err))
			return 0, false
		}
		delete(d.scratches, name)
		d.moves++
	}
	p, err := pool.Alloc(uint64(bytes))
	if err != nil {
		d.fail(fmt.Errorf("gpu: scratch %s of %d bytes: %w", name, bytes, err))
		return 0, false
	}
	d.scratches[name] = scratchBuf{ptr: p, bytes: bytes}
	return p, true
}

// zeroScratch is scratch whose bytes are zero when it is made (a kernel's
// counters, which the kernel returns to zero itself).
func (d *Device) zeroScratch(name string, bytes int) cuda.DevicePtr {
	p, fresh := d.scratchFresh(name, bytes)
	if p != 0 && fresh {
		if err := d.memset(p, max(bytes, 1)); err != nil {
			d.fail(fmt.Errorf("gpu: scratch %s: zero: %w", name, err))
			return 0
		}
	}
	return p
}

// do runs fn on the context's thread in one hop: batch many small driver
// calls (launches, copies) inside it where their number matters.
func (d *Device) do(fn func() error) {
	if launchHook != nil {
		d.fail(fn())
		return
	}
	if err := d.ctx.Do(fn); err != nil {
		d.fail(fmt.Errorf("gpu: %w", err))
	}
}

// gemm queues one cuBLAS product (nothing while launchHook is set).
func (d *Device) gemm(g cuda.Gemm) error {
	if launchHook != nil {
		return nil
	}
	d.launches.Add(1)
	return d.blas.GemmEx(g)
}

// gemmBatched queues a strided-batched cuBLAS product (nothing while
// launchHook is set).
func (d *Device) gemmBatched(g cuda.Gemm) error {
	if launchHook != nil {
		return nil
	}
	d.launches.Add(1)
	return d.blas.GemmStridedBatched(g)
}

// memset queues zeroing n bytes at p (nothing while launchHook is set).
func (d *Device) memset(p cuda.DevicePtr, n int) error {
	if launchHook != nil {
		if memsetHook != nil {
			memsetHook(p, n)
		}
		return nil
	}
	d.launches.Add(1)
	return d.stream.Memset8(p, 0, uint64(n))
}

// desc describes a tensor for error messages, e.g. "bf16(4,768)".
func desc(t *tensor.Tensor) string {
	if t == nil {
		return "nil"
	}
	return t.DType.String() + t.Shape.String()
}
