package gpu

// fp8scale.go: FP8ScaleUpdate, the launcher of kernels/fp8scale.cu: the
// scales of every FP8 tensor of a training step updated on the device from
// the amaxes their producers added, in one launch inside the step's graph
// (issue 38). amp.FP8Scales documents the layout; amp.UpdateFP8Scales is
// the reference.

import (
	"fmt"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

var fp8sBlock = kernels.MustBlock("fp8scale.cu", "FP8S_BLOCK") // fp8_scale_update

// FP8ScaleUpdate queues one kernel that updates the scaling state of K FP8
// tensors with amax histories of H steps (0: current scaling) and the
// given margin, as amp.UpdateFP8Scales does on the host:
//
//	st (K·(4+H)) f32: amax[K][2], scale[K], inv[K], hist[K·H]; meta (K·amp.FP8MetaLen) i32
//
// Each amax and underflow count is consumed (set to 0). The kernel needs no FP8 instruction and
// runs on any GPU. Arguments that do not fit return an error wrapping
// ErrFP8Args, also recorded for Sync, as a launch failure is.
//
// With recs (I32, on the device) only the records it lists are updated, a
// block each; each must be listed once (two blocks on one record would
// race), which the kernel cannot check: its entries outside [0, K) are
// skipped.
func (d *Device) FP8ScaleUpdate(st, meta, recs *tensor.Tensor, K, H, margin int) {
	d.record(d.fp8ScaleUpdate(st, meta, recs, K, H, margin))
}

func (d *Device) fp8ScaleUpdate(st, meta, recs *tensor.Tensor, K, H, margin int) error {
	switch {
	case K < 0 || H < 0 || margin < 0 || margin > 64:
		return fmt.Errorf("%w: K %d, H %d, margin %d (want K, H ≥ 0, margin in [0, 64])", ErrFP8Args, K, H, margin)
	case K > maxGridX:
		return fmt.Errorf("%w: %d tensors, at most %d", ErrFP8Args, K, maxGridX)
	case st == nil || st.DType != tensor.F32 || st.Numel() != amp.FP8StLen(K, H):
		return fmt.Errorf("%w: st %s, want %d f32 (K·(4+H)): %w", ErrFP8Args, desc(st), amp.FP8StLen(K, H), tensor.ErrShape)
	case meta == nil || meta.DType != tensor.I32 || meta.Numel() != K*amp.FP8MetaLen:
		return fmt.Errorf("%w: meta %s, want %d i32 (K·%d): %w", ErrFP8Args, desc(meta), K*amp.FP8MetaLen, amp.FP8MetaLen, tensor.ErrShape)
	}
	blocks, ts := K, []*tensor.Tensor{st, meta}
	if recs != nil {
		if recs.DType != tensor.I32 || recs.Numel() > K {
			return fmt.Errorf("%w: recs %s, want at most K = %d i32: %w", ErrFP8Args, desc(recs), K, tensor.ErrShape)
		}
		blocks, ts = recs.Numel(), append(ts, recs)
	}
	if blocks == 0 {
		return nil
	}
	for _, t := range ts {
		if t.Dev == 0 {
			return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(t))
		}
	}
	var rp cuda.DevicePtr
	if recs != nil {
		rp = d.ptr(recs)
	}
	if !d.run("fp8_scale_update", tensor.F32, cuda.D1(blocks), cuda.D1(fp8sBlock), 0, d.ptr(st), d.ptr(meta), rp, K, H, margin) {
		return fmt.Errorf("gpu: FP8ScaleUpdate: fp8_scale_update did not launch (see Sync)")
	}
	return nil
}
