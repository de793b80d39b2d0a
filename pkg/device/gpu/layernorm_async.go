package gpu

// layernorm_async.go: the launchers of kernels/layernorm_async.cu, the
// fused layernorm forward, residual forward and backward with the rows
// staged through shared memory by cp.async (sm_80+), chosen by
// DRUTO_LAYERNORM=async (Device.lnAsync) where they are built and the rows
// fit their fast path (C % 4 == 0, C <= lnFastMaxC, aligned rows); the
// kernels of layernorm.cu run otherwise. Each launch is a persistent grid
// (as many blocks as are resident at once, at most one warp per row) of
// lnAsyncBlock threads with lnAsyncSmem bytes of dynamic shared memory.

import (
	"fmt"
	"os"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// LayerNormEnv names the environment variable that picks the fused
// layernorm kernels: "sync", layernorm.cu's; "async", layernorm_async.cu's
// where built (sm_80+); unset, lnAsyncDefault.
const LayerNormEnv = "DRUTO_LAYERNORM"

// lnAsyncDefault is the choice without LayerNormEnv: layernorm.cu's kernels
// until an H200 run of `druto bench --kernels` shows the fused-async rows
// faster (the one line to change then).
const lnAsyncDefault = false

// layerNormEnv reads LayerNormEnv: whether the async kernels are chosen.
func layerNormEnv() (bool, error) {
	switch v := os.Getenv(LayerNormEnv); v {
	case "":
		return lnAsyncDefault, nil
	case "sync":
		return false, nil
	case "async":
		return true, nil
	default:
		return false, fmt.Errorf("gpu: %s=%q: want sync or async (the fused layernorm kernels) or unset", LayerNormEnv, v)
	}
}

var lnAsyncBlock = kernels.MustBlock("layernorm_async.cu", "LN_ASYNC_BLOCK")

// lnAsyncMaxSmem is the dynamic shared memory every async kernel is granted
// (sm_86 and sm_89 allow 99 KB a block, sm_80 163 KB, sm_90 227 KB); a launch
// takes fewer stages when its rows need more, and layernorm.cu's kernel
// when not even 2 fit (only the all-fp32 backward past C 980).
const lnAsyncMaxSmem = 96 << 10

// The async kernels' kinds: their slots hold x; a and b; x, dinp, dout and
// the row's statistics.
const (
	lnaForward = iota
	lnaResidual
	lnaBackward
)

// lnAsyncStages are the default stages (rows a warp holds: one computed,
// the others in flight) of each kind.
var lnAsyncStages = [3]int{4, 3, 3}

var lnAsyncKernels = []string{
	"layernorm_forward_async", "layernorm_forward_async_rf32",
	"residual_layernorm_forward_async", "residual_layernorm_forward_async_rf32",
	"layernorm_backward_async", "layernorm_backward_async_rf32",
}

func init() {
	for _, k := range lnAsyncKernels {
		dynamicSmem[k] = lnAsyncMaxSmem
	}
}

// lnAsyncSmem is the dynamic shared memory of a kind's launch, as the
// kernel lays it out: the weight (and bias) in fp32, then per warp `stages`
// slots of 16-byte-rounded rows. rs, ts: the row input's and T's sizes.
func lnAsyncSmem(kind, C, rs, ts, stages int) int {
	r16 := func(n int) int { return (n + 15) &^ 15 }
	warps := lnAsyncBlock / 32
	switch kind {
	case lnaForward:
		return 2*C*4 + warps*stages*r16(C*rs)
	case lnaResidual:
		return 2*C*4 + warps*stages*r16(C*rs+C*ts)
	}
	return C*4 + warps*stages*r16(2*C*rs+C*ts+8)
}

// lnAsyncPlan returns the launch of kernel (of kind) for rows of C: its
// stages, dynamic shared memory and grid, and false where the async kernels
// are not chosen, not built for dt, or no stage count of at least 2 fits.
func (d *Device) lnAsyncPlan(kernel string, kind int, dt tensor.DType, N, C, rs int) (stages, smem, nb int, ok bool) {
	if !d.lnAsync || C%4 != 0 || C > lnFastMaxC || !d.built2(dt, kernel) {
		return 0, 0, 0, false
	}
	stages = lnAsyncStages[kind]
	if d.lnStages > 0 {
		stages = d.lnStages
	}
	stages = min(stages, 4)
	for ; stages >= 2; stages-- {
		if smem = lnAsyncSmem(kind, C, rs, dt.Size(), stages); smem <= lnAsyncMaxSmem {
			break
		}
	}
	if stages < 2 {
		return 0, 0, 0, false
	}
	nb = lnAsyncGrid(N, d.residentBlocks(kernel, dt, lnAsyncBlock, smem)*d.sms())
	return stages, smem, nb, true
}

// lnAsyncGrid is the persistent grid for N rows with at most resident
// blocks: the fewest rows per warp that the resident warps allow, and then
// the fewest blocks that give every warp that many rows (GPT-2's 16384 rows
// on an H200 at 4 blocks of 4 warps per SM: 512 blocks of exactly 8 rows a
// warp, not 528 blocks of 7 or 8, whose last round would run with three
// quarters of the warps).
func lnAsyncGrid(N, resident int) int {
	warps := lnAsyncBlock / 32
	resident = max(1, resident)
	perWarp := max(1, (N+resident*warps-1)/(resident*warps))
	return max(1, (N+warps*perWarp-1)/(warps*perWarp))
}

// kLayerNormForwardAsync launches layernorm_forward_async(_rf32) when
// lnAsyncPlan allows (vec: the rows are aligned); it reports whether it did.
func (d *Device) kLayerNormForwardAsync(sfx string, dt tensor.DType, out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C, vec int) bool {
	kernel := "layernorm_forward_async" + sfx
	stages, smem, nb, ok := d.lnAsyncPlan(kernel, lnaForward, dt, N, C, inp.DType.Size())
	if !ok || vec != 1 {
		return false
	}
	d.run(kernel, dt, grid1(nb), cuda.D1(lnAsyncBlock), smem,
		d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(inp), d.ptr(weight), d.ptr(bias), N, C, stages)
	return true
}

// kResidualLayerNormAsync launches residual_layernorm_forward_async(_rf32)
// when lnAsyncPlan allows; it reports whether it did.
func (d *Device) kResidualLayerNormAsync(sfx string, dt tensor.DType, res, out, mean, rstd, a, b, weight, bias *tensor.Tensor, N, C, vec int) bool {
	kernel := "residual_layernorm_forward_async" + sfx
	stages, smem, nb, ok := d.lnAsyncPlan(kernel, lnaResidual, dt, N, C, res.DType.Size())
	if !ok || vec != 1 {
		return false
	}
	d.run(kernel, dt, grid1(nb), cuda.D1(lnAsyncBlock), smem,
		d.ptr(res), d.ptr(out), d.ptr(mean), d.ptr(rstd), d.ptr(a), d.ptr(b), d.ptr(weight), d.ptr(bias), N, C, stages)
	return true
}

// layerNormBackwardAsync runs layernorm_backward_async(_rf32) and
// layernorm_reduce of its per-block partials when lnAsyncPlan allows; it
// reports whether it did.
func (d *Device) layerNormBackwardAsync(sfx string, dt tensor.DType, dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C, vec int) bool {
	kernel := "layernorm_backward_async" + sfx
	stages, smem, nb, ok := d.lnAsyncPlan(kernel, lnaBackward, dt, N, C, inp.DType.Size())
	if !ok || vec != 1 {
		return false
	}
	part := d.buf("layernorm.part", nb*2*C*4)
	if part == 0 {
		return true // the error is recorded
	}
	d.batch(func() {
		if d.run(kernel, dt, grid1(nb), cuda.D1(lnAsyncBlock), smem,
			d.ptr(dinp), part, d.ptr(dout), d.ptr(inp), d.ptr(weight), d.ptr(mean), d.ptr(rstd), N, C, stages) {
			d.kReduce(dt, d.ptr(dweight), d.ptr(dbias), part, nb, C)
		}
	})
	return true
}
