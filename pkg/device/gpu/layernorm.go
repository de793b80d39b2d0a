package gpu

// layernorm.go: LayerNorm, ResidualLayerNorm, LayerNormBackward and Add,
// the launchers of kernels/layernorm.cu (its header describes each kernel),
// and the launch helpers the files of this op group share (run, the typed
// kernel wrappers' hook, alignment flags, grids, occupancy).
//
// Dtypes: out, weight, bias and dout are the module's type T (the policy's
// half type, or F32); the row input, the residual sum and dinp may be T or
// F32 (the policy keeps the residual stream in F32: the _rf32 kernels);
// mean, rstd, dweight and dbias are F32. Other combinations record
// device.ErrUnsupported.
//
// Fused: one kernel per op (forward: a warp per row; backward: one pass
// over the rows into per-block partials of dweight and dbias, then
// layernorm_reduce, 32 columns × 32 slices of partial rows per block). The
// backward grid is as many blocks as are resident at once (a persistent
// grid), so every block sums the same number of rows and the partials are
// few. Rows of fp32 whose C is one of lnCWidths (128, 256, 512, 768, 1024;
// the backward to 768) take the fixed-width kernels (lnFixed): the same
// arithmetic with C known at compile time and every load of a row issued
// before anything that waits on one. In the run-time-C kernels the loads
// of weight and bias (and, in the residual form, of the next row) wait
// behind the stores before them, which the compiler may not reorder; the
// fixed-width kernels take GPT-2's 16384 × 768 rows from 76-83% to 86-88%
// of the copy bandwidth on an H200 (bench/results/README.md has the run).
// Other widths: on sm_90 (NVRTC 12+) the backward of fp32 rows with
// C % 8 == 0 is
// layernorm_backward_tma_rf32: the bulk-copy engine brings chunks of 8 rows
// into a ring of shared-memory stages (lnTMAStages), one block an SM.
// Decomposed: the CPU reference's passes, one kernel each, through fp32
// scratch buffers (xhat, products, row means) reused across calls.

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Launch geometry of layernorm.cu.
const (
	lnFastMaxC   = 1024
	lnColsumRows = 64 // rows per partial of the decomposed column sums
	// ewGridUnit is the block ewGrid sizes grids for: the grid-stride
	// kernels are correct for any grid; their blocks are in blocks.go.
	ewGridUnit = 256
)

// launchHook, when set (by tests on machines without a GPU), receives every
// launch of this file group's typed kernel wrappers instead of the device,
// so that their argument lists can be checked against the kernels' PTX
// signatures. It is nil in normal use.
var launchHook func(kernel string, dt tensor.DType, args []any)

// run queues kernel (built for dt) with args, or hands it to launchHook. It
// reports whether the launch was queued.
func (d *Device) run(kernel string, dt tensor.DType, grid, block cuda.Dim3, shmem int, args ...any) bool {
	if err := checkGrid(kernel, dt, grid, block); err != nil {
		d.fail(err)
		return false
	}
	if launchHook != nil {
		if blockHook != nil {
			blockHook(kernel, block)
		}
		launchHook(kernel, dt, args)
		return true
	}
	return d.launch(kernel, dt, grid, block, shmem, args...)
}

// hookAddr is the fake device address buf returns while launchHook is set.
const hookAddr = cuda.DevicePtr(1 << 40)

// buf is d.scratch, or a fake address while launchHook is set.
func (d *Device) buf(name string, bytes int) cuda.DevicePtr {
	if launchHook != nil {
		return hookAddr
	}
	return d.scratch(name, bytes)
}

// batch runs fn, a sequence of launches, in one hop to the context's
// thread (d.do), or directly while launchHook is set.
func (d *Device) batch(fn func()) {
	if launchHook != nil {
		fn()
		return
	}
	d.do(func() error {
		fn()
		return nil
	})
}

// vec4 returns 1 when every non-null pointer, of elements elems[i] bytes
// wide, is aligned to 4 elements (what ld4/st4 of common.cuh need), else 0.
// Pairs are (pointer, element size).
func vec4(pairs ...any) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		p, es := pairs[i].(cuda.DevicePtr), pairs[i+1].(int)
		if p != 0 && uint64(p)%uint64(4*es) != 0 {
			return 0
		}
	}
	return 1
}

// ewGrid is the grid of a grid-stride kernel over n items with per items
// per thread: one thread per group while that is under 64 blocks per SM,
// capped there (each thread then loops).
func (d *Device) ewGrid(n int64, per int) cuda.Dim3 {
	b := (n + int64(per*ewGridUnit) - 1) / int64(per*ewGridUnit)
	limit := int64(max(1, d.sms()) * 64)
	return cuda.D1(int(max(1, min(b, limit))))
}

// sms is the device's multiprocessor count (132 on an H200; a guess
// without a context, for hooked tests).
func (d *Device) sms() int {
	if d.ctx == nil || d.ctx.Device.SMs <= 0 {
		return 132
	}
	return d.ctx.Device.SMs
}

// attrCache holds each kernel's attributes (they never change once loaded).
var attrCache sync.Map // *cuda.Function -> cuda.FuncAttributes

// residentBlocks returns how many blocks of kernel (dt) with threads
// threads and dyn bytes of dynamic shared memory fit on one SM at once, from
// its registers and shared memory and the architecture's limits; it errs
// low, and returns 1 when the attributes cannot be read.
func (d *Device) residentBlocks(kernel string, dt tensor.DType, threads, dyn int) int {
	if launchHook != nil || d.ctx == nil {
		return 4
	}
	f := d.fn(kernel, dt)
	if f == nil {
		return 1
	}
	var a cuda.FuncAttributes
	if v, ok := attrCache.Load(f); ok {
		a = v.(cuda.FuncAttributes)
	} else {
		var err error
		if a, err = f.Attributes(); err != nil {
			return 1
		}
		attrCache.Store(f, a)
	}
	// Per-SM limits by compute capability: threads, blocks, shared memory.
	maxThreads, maxBlocks, smem := 1024, 16, 64<<10 // sm_75 (and the unknown)
	switch cc := d.ctx.Device.Major*10 + d.ctx.Device.Minor; {
	case cc == 80 || cc == 87:
		maxThreads, maxBlocks, smem = 2048, 32, 164<<10
	case cc == 86 || cc == 89:
		maxThreads, maxBlocks, smem = 1536, 16, 100<<10
	case cc == 90:
		maxThreads, maxBlocks, smem = 2048, 32, 228<<10
	}
	warps := (threads + 31) / 32
	n := min(maxThreads/(warps*32), maxBlocks)
	if a.Registers > 0 {
		// registers are allocated per warp in units of 256, from four
		// sub-partitions of 16K registers each
		perWarp := (a.Registers*32 + 255) / 256 * 256
		n = min(n, 4*(16384/perWarp)/warps)
	}
	if s := a.SharedStatic + dyn; s > 0 {
		n = min(n, smem/(s+1024)) // 1 KiB reserved per block
	}
	return max(1, n)
}

// lnTypes resolves the module dtype and kernel suffix of a layernorm op: t
// is the working type (out, weight, bias, dout), r the row-input type,
// which may be t or F32. It records ErrUnsupported and reports false
// otherwise.
func (d *Device) lnTypes(op string, t, r tensor.DType) (string, bool) {
	if !t.Float() {
		d.unsupported(op, t, r)
		return "", false
	}
	switch {
	case r == t:
		return "", true
	case r == tensor.F32:
		return "_rf32", true
	}
	d.unsupported(op, t, r)
	return "", false
}

// LayerNorm normalises each row with fp32 statistics (eps 1e-5) and applies
// weight and bias; mean and rstd receive the statistics for backward.
// out (N,C) T, mean (N) F32, rstd (N) F32, inp (N,C) T or F32, weight (C) T, bias (C) T
func (d *Device) LayerNorm(out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	const op = "layernorm"
	if !d.check(&device.Ops.LayerNorm, []int{N, C}, out, mean, rstd, inp, weight, bias) {
		return
	}
	dt := out.DType
	sfx, ok := d.lnTypes(op, dt, inp.DType)
	if !ok || !d.checkDT(op, dt, weight, bias) || N == 0 {
		return
	}
	if d.fused {
		d.kLayerNormForward(sfx, dt, out, mean, rstd, inp, weight, bias, N, C)
		return
	}
	d.batch(func() {
		d.layerNormDecomposed(sfx, dt, out, mean, rstd, inp, weight, bias, N, C)
	})
}

// ResidualLayerNorm computes res = a + b (rounded to res's dtype) and
// out = LayerNorm(res).
// res (N,C) R, out (N,C) T, mean (N), rstd (N), a (N,C) R, b (N,C) T, weight (C) T, bias (C) T;
// R is T or F32
func (d *Device) ResidualLayerNorm(res, out, mean, rstd, a, b, weight, bias *tensor.Tensor, N, C int) {
	const op = "residual layernorm"
	if !d.check(&device.Ops.ResidualLayerNorm, []int{N, C}, res, out, mean, rstd, a, b, weight, bias) {
		return
	}
	dt := out.DType
	sfx, ok := d.lnTypes(op, dt, res.DType)
	if !ok || !d.checkDT(op, res.DType, a) || !d.checkDT(op, dt, b, weight, bias) || N == 0 {
		return
	}
	if d.fused {
		d.kResidualLayerNorm(sfx, dt, res, out, mean, rstd, a, b, weight, bias, N, C)
		return
	}
	d.batch(func() { device.ResidualLayerNormDecomposed(d, res, out, mean, rstd, a, b, weight, bias, N, C) })
}

// Add computes out = a + b elementwise over n elements (one pass in both
// forms). out (n) R, a (n) R, b (n) T; R is T or F32.
func (d *Device) Add(out, a, b *tensor.Tensor, n int) {
	const op = "add"
	if !d.check(&device.Ops.Add, []int{n}, out, a, b) {
		return
	}
	sfx, ok := d.lnTypes(op, b.DType, out.DType)
	if !ok || !d.checkDT(op, out.DType, a) || n == 0 {
		return
	}
	d.kAdd(sfx, b.DType, out, a, b, int64(n))
}

// layerNormDecomposed: mean, rstd, normalise into fp32 xhat, affine.
func (d *Device) layerNormDecomposed(sfx string, dt tensor.DType, out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	xhat := d.buf("layernorm.xhat", N*C*4)
	if xhat == 0 {
		return
	}
	rows := cuda.D1((N + lnRowBlock/32 - 1) / (lnRowBlock / 32))
	n := int64(N) * int64(C)
	d.run("layernorm_mean"+sfx, dt, rows, cuda.D1(lnRowBlock), 0, d.ptr(mean), d.ptr(inp), N, C)
	d.run("layernorm_rstd"+sfx, dt, rows, cuda.D1(lnRowBlock), 0, d.ptr(rstd), d.ptr(mean), d.ptr(inp), N, C)
	d.run("layernorm_normalise"+sfx, dt, d.ewGrid(n, 1), cuda.D1(lnEWBlock), 0, xhat, d.ptr(mean), d.ptr(rstd), d.ptr(inp), N, C)
	d.run("layernorm_affine", dt, d.ewGrid(n, 1), cuda.D1(lnEWBlock), 0, d.ptr(out), xhat, d.ptr(weight), d.ptr(bias), N, C)
}

// kLayerNormForward launches layernorm_forward(_rf32): a warp per row, a
// block per lnRowBlock/32 rows.
func (d *Device) kLayerNormForward(sfx string, dt tensor.DType, out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	vec := 0
	if C%4 == 0 {
		vec = vec4(d.ptr(out), dt.Size(), d.ptr(inp), inp.DType.Size(), d.ptr(weight), dt.Size(), d.ptr(bias), dt.Size())
	}
	grid := grid1((N + lnRowBlock/32 - 1) / (lnRowBlock / 32))
	if k := d.lnFixed("layernorm_forward_rf32", dt, inp.DType == tensor.F32, C, vec); k != "" {
		d.run(k, dt, grid, cuda.D1(lnRowBlock), 0, d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(inp), d.ptr(weight), d.ptr(bias), N)
		return
	}
	d.run("layernorm_forward"+sfx, dt, grid, cuda.D1(lnRowBlock), 0,
		d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(inp), d.ptr(weight), d.ptr(bias), N, C, vec)
}

// lnCWidths are the C of the fixed-width kernels (kernels/layernorm.cu,
// its "fixed-width forms": layernorm_forward_rf32_cC and
// residual_layernorm_forward_rf32_cC), and lnCBackMax the widest with a
// fixed-width backward (layernorm_backward_rf32_cC). TestLNWidths checks
// them against the source.
var lnCWidths = []int{128, 256, 512, 768, 1024}

const lnCBackMax = 768

// lnFixed returns base + "_c" + C, the fixed-width kernel for rows of C,
// where it applies: fp32 rows (rowsF32), aligned (vec), C one of
// lnCWidths, the kernel built (on sm_75 the backward's shared memory may
// not be granted), and not switched off (noFixed: the micro-benchmarks'
// generic forms and the tests that compare with them); else "".
func (d *Device) lnFixed(base string, dt tensor.DType, rowsF32 bool, C, vec int) string {
	if !rowsF32 || vec != 1 || d.noFixed || !slices.Contains(lnCWidths, C) {
		return ""
	}
	if strings.HasPrefix(base, "layernorm_backward") && C > lnCBackMax {
		return ""
	}
	k := base + "_c" + strconv.Itoa(C)
	if launchHook == nil && d.funcs[kernelKey{k, dt}] == nil {
		return ""
	}
	return k
}

// lnCBackSmem is the dynamic shared memory of layernorm_backward_rf32_cC:
// every warp's dweight and dbias sums, 2C floats.
func lnCBackSmem(C int) int { return lnCBackBlock / 32 * 2 * C * 4 }

func init() {
	// the fixed-width backward's sums can pass the 48 KB a block gets
	// without asking (build: SetMaxDynamicShared)
	for _, C := range lnCWidths {
		if C <= lnCBackMax {
			dynamicSmem["layernorm_backward_rf32_c"+strconv.Itoa(C)] = lnCBackSmem(C)
		}
	}
}

// kResidualLayerNorm launches residual_layernorm_forward(_rf32), a warp per
// row as kLayerNormForward.
func (d *Device) kResidualLayerNorm(sfx string, dt tensor.DType, res, out, mean, rstd, a, b, weight, bias *tensor.Tensor, N, C int) {
	vec := 0
	if C%4 == 0 {
		rs := res.DType.Size()
		vec = vec4(d.ptr(res), rs, d.ptr(out), dt.Size(), d.ptr(a), rs, d.ptr(b), dt.Size(),
			d.ptr(weight), dt.Size(), d.ptr(bias), dt.Size())
	}
	grid := grid1((N + lnRowBlock/32 - 1) / (lnRowBlock / 32))
	if k := d.lnFixed("residual_layernorm_forward_rf32", dt, res.DType == tensor.F32, C, vec); k != "" {
		d.run(k, dt, grid, cuda.D1(lnRowBlock), 0,
			d.ptr(res), d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(a), d.ptr(b), d.ptr(weight), d.ptr(bias), N)
		return
	}
	d.run("residual_layernorm_forward"+sfx, dt, grid, cuda.D1(lnRowBlock), 0,
		d.ptr(res), d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(a), d.ptr(b), d.ptr(weight), d.ptr(bias), N, C, vec)
}

// kAdd launches add(_rf32): out = a + b over n elements, 4 per thread.
func (d *Device) kAdd(sfx string, dt tensor.DType, out, a, b *tensor.Tensor, n int64) {
	rs := out.DType.Size()
	vec := vec4(d.ptr(out), rs, d.ptr(a), rs, d.ptr(b), dt.Size())
	d.run("add"+sfx, dt, d.ewGrid(n, 4), cuda.D1(lnEWBlock), 0, d.ptr(out), d.ptr(a), d.ptr(b), n, vec)
}

// LayerNormBackward accumulates the layernorm gradients into dinp, dweight
// and dbias.
// dinp (N,C) R, dweight (C) F32, dbias (C) F32, dout (N,C) T, inp (N,C) R,
// weight (C) T, mean (N) F32, rstd (N) F32; R is T or F32
func (d *Device) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	const op = "layernorm backward"
	if !d.check(&device.Ops.LayerNormBackward, []int{N, C}, dinp, dweight, dbias, dout, inp, weight, mean, rstd) {
		return
	}
	dt := dout.DType
	sfx, ok := d.lnTypes(op, dt, inp.DType)
	if !ok || !d.checkDT(op, inp.DType, dinp) || !d.checkDT(op, dt, weight) || !d.checkDT(op, tensor.F32, dweight, dbias) {
		return
	}
	if N == 0 {
		return
	}
	if d.fused {
		d.layerNormBackwardFused(sfx, dt, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
		return
	}
	d.batch(func() {
		d.layerNormBackwardDecomposed(sfx, dt, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
	})
}

// layerNormBackwardFused: layernorm_backward over a persistent grid, then
// layernorm_reduce of its partials.
func (d *Device) layerNormBackwardFused(sfx string, dt tensor.DType, dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	kernel := "layernorm_backward" + sfx
	vec := 0
	if C%4 == 0 && C <= lnFastMaxC {
		rs := inp.DType.Size()
		vec = vec4(d.ptr(dinp), rs, d.ptr(inp), rs, d.ptr(dout), dt.Size(), d.ptr(weight), dt.Size())
	}
	if k := d.lnFixed("layernorm_backward_rf32", dt, inp.DType == tensor.F32, C, vec); k != "" {
		// a persistent grid of lnCBackBlock-thread blocks
		smem := lnCBackSmem(C)
		nb := max(1, min(d.residentBlocks(k, dt, lnCBackBlock, smem)*d.sms(), (N+lnCBackBlock/32-1)/(lnCBackBlock/32)))
		part := d.buf("layernorm.part", nb*2*C*4)
		if part == 0 {
			return
		}
		d.batch(func() {
			if d.run(k, dt, grid1(nb), cuda.D1(lnCBackBlock), smem,
				d.ptr(dinp), part, d.ptr(dout), d.ptr(inp), d.ptr(weight), d.ptr(mean), d.ptr(rstd), N) {
				d.kReduce(dt, d.ptr(dweight), d.ptr(dbias), part, nb, C)
			}
		})
		return
	}
	if stages, smem := d.lnTMAStages(sfx, dt, C, vec); stages > 0 {
		// layernorm_backward_tma_rf32: one block an SM
		nb := min(d.sms(), blocks(N, lnTMARows))
		part := d.buf("layernorm.part", nb*2*C*4)
		if part == 0 {
			return
		}
		d.batch(func() {
			if d.run(kernLNBackTMA, dt, grid1(nb), cuda.D1(lnTMABlock), smem,
				d.ptr(dinp), part, d.ptr(dout), d.ptr(inp), d.ptr(weight), d.ptr(mean), d.ptr(rstd), N, C, stages) {
				d.kReduce(dt, d.ptr(dweight), d.ptr(dbias), part, nb, C)
			}
		})
		return
	}
	rowsPerBlock := 1 // the general path: a block per row
	if vec == 1 {
		rowsPerBlock = lnBackThreads / 32 // a warp per row
	}
	nb := max(1, min(d.residentBlocks(kernel, dt, lnBackThreads, 0)*d.sms(), (N+rowsPerBlock-1)/rowsPerBlock))
	part := d.buf("layernorm.part", nb*2*C*4)
	if part == 0 {
		return
	}
	d.batch(func() {
		if d.kLayerNormBackward(kernel, dt, nb, dinp, part, dout, inp, weight, mean, rstd, N, C, vec) {
			d.kReduce(dt, d.ptr(dweight), d.ptr(dbias), part, nb, C)
		}
	})
}

// lnTMAMaxStages is the most stages layernorm_backward_tma_rf32 takes
// (LN_TMA_MAX_STAGES: the kernel clamps to it).
const lnTMAMaxStages = 4

// kernLNBackTMA is the layernorm backward whose rows the bulk-copy engine
// brings into shared memory (sm_90, fp32 rows, the fast path's rows).
const kernLNBackTMA = "layernorm_backward_tma_rf32"

// lnTMAStages returns the shared-memory stages layernorm_backward_tma_rf32
// runs with for rows of C and the dynamic shared memory they take, or 0
// where it does not run: not built with its TMA code (tmaOK), not the
// fp32-row form (sfx), C not a multiple of 8 or past the fast path, rows
// not aligned (vec), fewer than two stages fit, or the bench's plain form.
func (d *Device) lnTMAStages(sfx string, dt tensor.DType, C, vec int) (stages, smem int) {
	if sfx != "_rf32" || vec != 1 || C%8 != 0 || C > lnFastMaxC || d.noTMA {
		return 0, 0
	}
	stage := lnTMARows * C * (8 + dt.Size())
	stages = min(lnTMAMaxStages, d.tmaSmem[kernelKey{kernLNBackTMA, dt}]/stage)
	if stages < 2 {
		return 0, 0
	}
	return stages, stages * stage
}

// kLayerNormBackward launches kernel (layernorm_backward(_rf32)) on nb blocks.
func (d *Device) kLayerNormBackward(kernel string, dt tensor.DType, nb int, dinp *tensor.Tensor, part cuda.DevicePtr, dout, inp, weight, mean, rstd *tensor.Tensor, N, C, vec int) bool {
	return d.run(kernel, dt, grid1(nb), cuda.D1(lnBackThreads), 0,
		d.ptr(dinp), part, d.ptr(dout), d.ptr(inp), d.ptr(weight), d.ptr(mean), d.ptr(rstd), N, C, vec)
}

// kReduce launches layernorm_reduce: d0 (C) += Σ_b part[b,0:C] and, when
// d1 != 0, d1 (C) += Σ_b part[b,C:2C], over nb partial rows.
func (d *Device) kReduce(dt tensor.DType, d0, d1, part cuda.DevicePtr, nb, C int) bool {
	width := C
	if d1 != 0 {
		width = 2 * C
	}
	return d.run("layernorm_reduce", dt, grid1((width+31)/32), cuda.D1(lnReduceBlock), 0, d0, d1, part, nb, C)
}

// colsumGrid is layernorm_colsum's grid: 128 columns a block in x, and in
// y one block row per slice of lnColsumRows rows up to CUDA's 65535 (the
// kernel loops over further slices: N past 4.19 M rows).
func colsumGrid(N, C int) cuda.Dim3 {
	slices := (N + lnColsumRows - 1) / lnColsumRows
	return cuda.Dim3{X: grid1((C + lnColsumBlock - 1) / lnColsumBlock).X, Y: uint32(max(1, min(slices, maxGridYZ))), Z: 1}
}

// layerNormBackwardDecomposed: the CPU reference's nine passes.
func (d *Device) layerNormBackwardDecomposed(sfx string, dt tensor.DType, dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	slices := (N + lnColsumRows - 1) / lnColsumRows
	part := d.buf("layernorm.part", slices*C*4)
	xhat := d.buf("layernorm.xhat", N*C*4)
	tmp := d.buf("layernorm.tmp", N*C*4)
	dnorm := d.buf("layernorm.dnorm", N*C*4)
	m1 := d.buf("layernorm.m1", N*4)
	m2 := d.buf("layernorm.m2", N*4)
	if part == 0 || xhat == 0 || tmp == 0 || dnorm == 0 || m1 == 0 || m2 == 0 {
		return
	}
	n := int64(N) * int64(C)
	eg, blk := d.ewGrid(n, 1), cuda.D1(lnEWBlock)
	rows := cuda.D1((N + lnRowBlock/32 - 1) / (lnRowBlock / 32))
	colsum := colsumGrid(N, C)
	// 1: dbias += Σ_rows dout
	d.run("layernorm_colsum", dt, colsum, cuda.D1(lnColsumBlock), 0, part, d.ptr(dout), N, C, lnColsumRows)
	d.kReduce(dt, d.ptr(dbias), 0, part, slices, C)
	// 2: xhat = (x - mean)·rstd
	d.run("layernorm_normalise"+sfx, dt, eg, blk, 0, xhat, d.ptr(mean), d.ptr(rstd), d.ptr(inp), N, C)
	// 3, 4: dweight += Σ_rows dout·xhat
	d.run("layernorm_mul_dout", dt, eg, blk, 0, tmp, d.ptr(dout), xhat, N, C)
	d.run("layernorm_colsum_f32", dt, colsum, cuda.D1(lnColsumBlock), 0, part, tmp, N, C, lnColsumRows)
	d.kReduce(dt, d.ptr(dweight), 0, part, slices, C)
	// 5: dnorm = dout·weight; 6: m1 = mean(dnorm)
	d.run("layernorm_dnorm", dt, eg, blk, 0, dnorm, d.ptr(dout), d.ptr(weight), N, C)
	d.run("layernorm_mean_rf32", dt, rows, cuda.D1(lnRowBlock), 0, m1, dnorm, N, C)
	// 7: tmp = dnorm·xhat; 8: m2 = mean(tmp)
	d.run("layernorm_mul", dt, eg, blk, 0, tmp, dnorm, xhat, N, C)
	d.run("layernorm_mean_rf32", dt, rows, cuda.D1(lnRowBlock), 0, m2, tmp, N, C)
	// 9: dinp += rstd·(dnorm - m1 - xhat·m2)
	d.run("layernorm_dinp"+sfx, dt, eg, blk, 0, d.ptr(dinp), dnorm, xhat, d.ptr(rstd), m1, m2, N, C)
}
