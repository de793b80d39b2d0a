package gpu

// crossentropy_fp8.go: CrossEntropyFP8, the launcher of
// kernels/crossentropy_fp8.cu: the fused classifier whose gradient is also
// cast to E5M2 for the LM head's FP8 dx product (amp.FP8Recipe.Head,
// issue 38). The kernel is chosen as CrossEntropy chooses its own
// (crossentropy.go): the bulk-copy (TMA) form where it runs and two rows
// fit a block's shared memory, else the l3 form; each computes its bf16
// twin's losses and gradient, and both skip the gradient's store over
// the logits when it is not wanted (storeGrad false: the kernels' store
// 0). The head's FP8 weight gradient reads q transposed, which
// TransposeFP8 (fp8transpose.go) makes after the classifier.

import (
	"fmt"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// The FP8 classifier's kernels.
const (
	kernCEF8    = "crossentropy_fp8_l3"
	kernCEF8TMA = "crossentropy_fp8_tma"
)

var (
	cef8Block    = kernels.MustBlock("crossentropy_fp8.cu", "CEF8_THREADS")
	cef8TMABlock = kernels.MustBlock("crossentropy_fp8.cu", "CEF8_TMA_THREADS")
)

func init() { tmaKernels[kernCEF8TMA] = true }

// CrossEntropyFP8 queues one kernel that computes CrossEntropy's losses
// and, with dscale != 0 (times state[SlotScale] read on the device when
// state is not nil, as CrossEntropyScaled), its gradient g over the
// logits (with storeGrad; without it the logits are left as they were)
// and q (N,V) = e5m2(g·scale[0]) of g in fp32, adding max |g| and the
// underflows into amax as the FP8 casts do (device.FP8). The losses, q
// and amax do not depend on storeGrad. pkg/device/cpu's CrossEntropyFP8
// is the reference: the losses and gradient are CrossEntropy's on this
// device; q from the same fp32 g (the kernel's exp is ex2.approx: a code
// may differ from the reference's by one E5M2 step where g lies at a
// rounding boundary).
//
//	losses (N) f32, logits (N,V) f32/bf16/f16, q (N,V) F8E5M2, amax (2) f32,
//	targets (N) i32, scale (1) f32, state (StateLen) f32 or nil
//
// The rows must be 16-byte vectors: V a multiple of 16 (q's rows are the
// dx GEMM's K-major operand), logits and q 16-byte aligned. It needs
// sm_90 (ErrArch below) and the fused device; argument errors wrap
// ErrFP8Args; all are recorded for Sync.
func (d *Device) CrossEntropyFP8(losses, logits, q, amax, targets, scale, state *tensor.Tensor, N, V int, dscale float32, storeGrad bool) {
	d.record(d.crossEntropyFP8(losses, logits, q, amax, targets, scale, state, N, V, dscale, storeGrad))
}

func (d *Device) crossEntropyFP8(losses, logits, q, amax, targets, scale, state *tensor.Tensor, N, V int, dscale float32, storeGrad bool) error {
	const op = "CrossEntropyFP8"
	if err := d.fp8Arch(op); err != nil {
		return err
	}
	want := func(t *tensor.Tensor, name string, dt tensor.DType, n int) error {
		if t == nil || t.DType != dt || t.Numel() != n || (n > 0 && t.Dev == 0) {
			return fmt.Errorf("%w: %s: %s %s, want %d elements of %s on the device: %w", ErrFP8Args, op, name, desc(t), n, dt, tensor.ErrShape)
		}
		return nil
	}
	switch {
	case N < 0 || V <= 0:
		return fmt.Errorf("%w: %s: N %d, V %d", ErrFP8Args, op, N, V)
	case V%16 != 0:
		return fmt.Errorf("%w: %s: V %d is not a multiple of 16 (q's rows are an FP8 GEMM operand)", ErrFP8Args, op, V)
	case logits == nil || !logits.DType.Float():
		return fmt.Errorf("%w: %s: logits %s, want f32, bf16 or f16", ErrFP8Args, op, desc(logits))
	case !d.fused:
		return fmt.Errorf("gpu: %s: the decomposed device has no fused classifier: %w", op, device.ErrUnsupported)
	}
	for _, err := range []error{want(losses, "losses", tensor.F32, N), want(logits, "logits", logits.DType, N*V),
		want(q, "q", tensor.F8E5M2, N*V), want(targets, "targets", tensor.I32, N)} {
		if err != nil {
			return err
		}
	}
	if err := d.fp8Outputs(op, d.ptr(q), d.ptr(q), amax, scale, N*V); err != nil {
		return err
	}
	mul := cuda.DevicePtr(0)
	if state != nil {
		if err := want(state, "state", tensor.F32, device.StateLen); err != nil {
			return err
		}
		mul = d.ptr(state).Add(4 * device.SlotScale)
	}
	if N == 0 {
		return nil
	}
	dt := logits.DType
	x, qp := d.ptr(logits), d.ptr(q)
	if uint64(x)%16 != 0 || uint64(qp)%16 != 0 {
		return fmt.Errorf("%w: %s: logits at %#x, q at %#x: the rows are 16-byte vectors", ErrFP8Args, op, x, qp)
	}
	args := []any{d.ptr(losses), x, qp, d.ptr(amax), d.ptr(targets), d.ptr(scale), N, V, dscale, mul, b2i(storeGrad)}
	if smem := 2 * V * dt.Size(); !d.noTMA && smem <= d.tmaSmem[kernelKey{kernCEF8TMA, dt}] {
		if !d.launch(kernCEF8TMA, dt, grid1(min(N, d.sms())), cuda.D1(cef8TMABlock), smem, args...) {
			return fmt.Errorf("gpu: %s: %s/%s did not launch (see Sync)", op, kernCEF8TMA, dt)
		}
		return nil
	}
	if !d.launch(kernCEF8, dt, grid1(min(N, d.sms())), cuda.D1(cef8Block), 0, args...) {
		return fmt.Errorf("gpu: %s: %s/%s did not launch (see Sync)", op, kernCEF8, dt)
	}
	return nil
}
