package gpu

// gradnorm.go: GradNorm, the launchers of kernels/gradnorm.cu: one pass
// over the gradient buffer into float64 partials (gradnorm_partial2: one
// per chunk of gnChunk elements, a warp each, over a persistent grid), one
// block adding them in a fixed order, and a download of the two results (the one host synchronisation). The
// same buffer gives the same bits every time. There is a single form: the
// norm is one reduction either way.

import (
	"fmt"
	"math"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// gnChunk is gradnorm_partial2's chunk of elements (GN_CHUNK).
var gnChunk = kernels.MustDefine("gradnorm.cu", "GN_CHUNK")

// GradNorm returns sqrt(Σ (g·scale)²) over every element of grads in fp32
// and whether every element was finite (when not, norm is Inf or NaN), in
// one pass. It waits for the queued work. On invalid arguments or a device
// error it records the error and returns NaN, false.
// grads F32
func (d *Device) GradNorm(grads *tensor.Tensor, scale float32) (norm float32, finite bool) {
	const op = "gradnorm"
	bad := float32(math.NaN())
	if !d.check(&device.Ops.GradNorm, []int{device.Numel(grads)}, grads) {
		return bad, false
	}
	if grads.DType != tensor.F32 {
		d.unsupported(op, grads.DType)
		return bad, false
	}
	n := grads.Numel()
	if n == 0 {
		return 0, true
	}
	part, np := d.gnPartials(n)
	out := d.buf("gradnorm.out", 8)
	if part == 0 || out == 0 {
		return bad, false
	}
	ok := false
	d.batch(func() {
		ok = d.kGradNormPartial(part, np, grads, n) &&
			d.run("gradnorm_final", tensor.F32, cuda.D1(1), cuda.D1(gnBlock), 0, out, part, np, scale)
	})
	if !ok || launchHook != nil {
		return bad, false
	}
	res := make([]float32, 2)
	if err := cuda.Download(d.stream, res, out); err != nil {
		d.fail(fmt.Errorf("gpu: %s: %w", op, err))
		return bad, false
	}
	return res[0], res[1] == 1
}

// gnPartials returns the scratch "gradnorm.part" for the float64 partial
// sums of n gradients and how many there are: one per gnChunk elements
// (gradnorm_partial2). gradnorm_final and step_update add them in order.
func (d *Device) gnPartials(n int) (cuda.DevicePtr, int) {
	np := (n + gnChunk - 1) / gnChunk
	return d.buf("gradnorm.part", np*8), np
}

// kGradNormPartial launches the partial sums of g² over grads (n elements)
// into part (np of them, from gnPartials): gradnorm_partial2 on a
// persistent grid.
func (d *Device) kGradNormPartial(part cuda.DevicePtr, np int, grads *tensor.Tensor, n int) bool {
	vec := vec4(d.ptr(grads), 4)
	warps := gnBlock / 32
	nb := max(1, min(d.residentBlocks("gradnorm_partial2", tensor.F32, gnBlock, 0)*d.sms(), (np+warps-1)/warps))
	return d.run("gradnorm_partial2", tensor.F32, cuda.D1(nb), cuda.D1(gnBlock), 0, part, d.ptr(grads), int64(n), vec)
}
