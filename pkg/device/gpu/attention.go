package gpu

// attention.go: causal multi-head self-attention, Attention and
// AttentionBackward, on one of two paths:
//
//   - flash (fused, hs 32, 64 or 128; bf16 on sm_80 or newer, f16 on sm_75
//     or newer): FlashAttention-2 on mma.sync. Where they are built (sm_80
//     and newer) the kernels of variant 2, kernels/flash_attention2.cu:
//     forward flash_fwd2_hsN (128-row tiles, cp.async double-buffered K/V,
//     so that the next tile's loads overlap this tile's MMAs: more than
//     twice variant 1's throughput on an H200), backward
//     flash_bwd2kv_hsN (dk, dv: 128-key CTAs of 8 warps, cp.async
//     double-buffered query tiles, > 48 KB of dynamic shared memory) and
//     flash_bwd2q_hsN (dq in a pass of its own: no atomics, deterministic);
//     flashBackward2. Otherwise variant 1, kernels/flash_attention.cu: f16
//     on sm_75 (the T4), and the backward at hs 128 where the GPU cannot
//     give flash_bwd2kv_hs128 its shared memory (sm_86/89);
//     the saved state is each query row's log-sum-exp, (B,NH,T) F32
//     (device.LSEState), and no T×T matrix exists. The forward and the
//     store-form backward may instead run cuDNN's fused attention
//     (cudnn.go, DRUTO_ATTENTION), with the same state;
//   - cuBLAS (everything else: the decomposed twin, fp32, other head sizes,
//     bf16 on sm_75, Config.NoFlash): described below; the saved state is the
//     probabilities, (B,NH,T,T) (device.ProbState).
//
// AttentionState says which one runs for a dtype and shape; Attention and
// AttentionBackward follow it and reject a state of the other shape.
//
// cuBLAS path: strided-batched GEMMs for the products and the softmax
// kernels of kernels/attention.cu over an fp32 score matrix.
//
// qkv (B,T,3C) packs q | k | v; head h of q is the T×hs matrix at column
// h·hs with row stride 3C, so the GEMMs read the heads in place: one
// strided-batched call per batch row b covers its NH heads (stride hs
// between heads; T·T between their score blocks). In cuBLAS's column-major
// terms (a row-major (r,c) matrix with ld x is the column-major (c,r) one):
//
//	scoresᵀ = k·qᵀ:   TransA, M=T, N=T, K=hs, A=k (ld 3C), B=q (ld 3C), C=scores (ld T, fp32)
//	outᵀ = (att·v)ᵀ:  M=hs, N=T, K=T, A=v (ld 3C), B=att (ld T), C=out (ld C)
//	dattᵀ = (dout·vᵀ)ᵀ: TransA, M=T, N=T, K=hs, A=v, B=dout (ld C), C=datt (fp32)
//	dv += attᵀ·dout:  TransB, M=hs, N=T, K=T, A=dout, B=att, C=dv (ld 3C), beta 1
//	dq += dpre·k:     M=hs, N=T, K=T, A=k, B=dpre (ld T), C=dq, beta 1
//	dk += dpreᵀ·q:    TransB, M=hs, N=T, K=T, A=q, B=dpre, C=dk, beta 1
//
// The scores and their gradient are fp32 scratch, as in the CPU reference,
// so the softmax sees unrounded scores; att (the saved probabilities) and
// dpre (the score gradient, an operand of the dq and dk GEMMs) are in the
// GEMMs' dtype. Batches are processed in chunks whose fp32 score matrices
// fit attnScratchBytes.
//
// Fused: the score GEMM applies the 1/√hs scale (alpha) and one
// attn_softmax_forward kernel does mask + max + exp + sum + normalise per
// row; backward one attn_softmax_backward per row. Decomposed: an unscaled
// GEMM, then attn_scale, attn_mask, attn_rowmax, attn_expsub, attn_rowsum,
// attn_divide; backward attn_bwd_rowsum, attn_bwd_sub, attn_bwd_mask,
// attn_bwd_scale. The seam for a flash-attention kernel is attnChunk and
// attnBackwardChunk: one call per chunk of batch rows with everything it
// needs; a fused flash kernel replaces their bodies (and the scratch).

import (
	"fmt"
	"math"
	"strings"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// attnScratchBytes bounds the fp32 score scratch of one chunk of batches
// (a variable so that a test can force chunks of one batch row).
var attnScratchBytes = 1 << 30

// attnRowWarps is the rows (warps) per block of the per-row kernels.
var attnRowWarps = attnRowBlock / 32

// attnShape is one attention call's geometry.
type attnShape struct {
	B, T, C, NH, hs int
	dt              tensor.DType
	ct              cuda.DataType
	es              uint64  // element size of dt
	scale           float32 // 1/√hs
	chunk           int     // batch rows per chunk
	flash           bool    // the flash kernels run (att is the log-sum-exp)
}

// flashHeadSizes are the head sizes the flash kernels are built for.
var flashHeadSizes = map[int]string{32: "hs32", 64: "hs64", 128: "hs128"}

// FlashSupports reports whether the flash-attention kernels take dtype dt
// and head size hs (16-bit, hs 32, 64 or 128); they also need a fused
// device and a GPU they were built for: sm_80+ for bf16, sm_75+ for f16
// (see Device.AttentionState).
func FlashSupports(dt tensor.DType, hs int) bool {
	_, ok := flashHeadSizes[hs]
	return ok && (dt == tensor.BF16 || dt == tensor.F16)
}

// flash reports whether attention at dtype dt and head size hs runs the
// flash kernels on this device: fused, not switched off, supported shape,
// and every flash kernel built for dt (bf16: sm_80+, f16: sm_75+).
func (d *Device) flash(dt tensor.DType, hs int) bool {
	if !d.fused || d.noFlash || !FlashSupports(dt, hs) {
		return false
	}
	suf := flashHeadSizes[hs]
	for _, k := range []string{"flash_fwd_" + suf, "flash_bwd_" + suf, "flash_bwd_dot", "flash_bwd_dq"} {
		if d.funcs[kernelKey{k, dt}] == nil && launchHook == nil {
			return false
		}
	}
	return true
}

// flashFwd returns the flash forward kernel for dt and head size hs, the
// query rows per CTA (grid.x = ceil(T/rows)) and its threads per CTA:
// variant 2's where d.flashV2 is set and it is built for dt, variant 1's
// otherwise.
func (d *Device) flashFwd(dt tensor.DType, hs int) (name string, rows, threads int) {
	if k := "flash_fwd2_" + flashHeadSizes[hs]; d.flashV2 && (d.funcs[kernelKey{k, dt}] != nil || launchHook != nil) {
		return k, flash2Rows, flash2Block
	}
	return "flash_fwd_" + flashHeadSizes[hs], flashTile, flashBlock
}

// flash2Rows is the query tile of flash_fwd2_hsN.
const flash2Rows = 128

// flashGridY is the most (b,h) pairs one flash launch covers (gridDim.y);
// beyond it attention takes the cuBLAS path.
const flashGridY = 65535

// flashFor reports whether an attention call of this shape runs the flash
// kernels: flash for its dtype and head size, and B·NH within the grid.
func (d *Device) flashFor(dt tensor.DType, B, C, NH int) bool {
	return NH > 0 && C%NH == 0 && B*NH <= flashGridY && d.flash(dt, C/NH)
}

// AttentionState returns the log-sum-exp state (B,NH,T) F32 where the flash
// kernels run (see flashFor) and the probabilities (B,NH,T,T) in dt otherwise.
func (d *Device) AttentionState(dt tensor.DType, B, T, C, NH int) device.AttnState {
	if d.flashFor(dt, B, C, NH) {
		return device.LSEState(B, T, NH)
	}
	return device.ProbState(dt, B, T, NH)
}

// AttentionPath says, in a line for detect's report, which attention path
// the device runs under the 16-bit policies at GPT-2's head size (64): the
// flash kernels and their backend (the own kernels or cuDNN, with the
// cuDNN backend's notes), or the cuBLAS score GEMMs.
func (d *Device) AttentionPath() string {
	p := d.attentionKernels()
	if strings.HasPrefix(p, "flash kernels") {
		p += "; flash backend: " + d.AttentionBackend()
	}
	for _, n := range d.AttentionNotes() {
		p += "; " + n
	}
	return p
}

// attentionKernels is AttentionPath's first part: which kernels run
// attention for bf16 and f16 at head size 64 (AttentionState's choice).
func (d *Device) attentionKernels() string {
	if !d.Fused() {
		return "cuBLAS score GEMMs + softmax kernels (the decomposed form)"
	}
	var on []string
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		if d.flashFor(dt, 1, 64, 1) {
			on = append(on, dt.String())
		}
	}
	switch len(on) {
	case 2:
		return "flash kernels for fused bf16 and f16 at head sizes 32, 64, 128 (log-sum-exp saved); cuBLAS score GEMMs otherwise"
	case 1:
		return "flash kernels for fused " + on[0] + " at head sizes 32, 64, 128 (the other 16-bit type needs a newer GPU); cuBLAS score GEMMs otherwise"
	}
	return "cuBLAS score GEMMs + softmax kernels (the flash kernels were not built: see kernels)"
}

// attnArgs validates an attention call; with flash set the state att is
// the log-sum-exp (B,NH,T) F32, else the probabilities (B,NH,T,T) in qkv's
// dtype.
func (d *Device) attnArgs(op string, act, att, qkv *tensor.Tensor, B, T, C, NH int) (attnShape, bool) {
	var s attnShape
	dt := qkv.DType
	hs := C / NH
	s.flash = d.flashFor(dt, B, C, NH)
	state := device.ProbState(dt, B, T, NH)
	if s.flash {
		state = device.LSEState(B, T, NH)
	}
	if att.Numel() != state.Numel() || att.DType != state.DType {
		d.fail(fmt.Errorf("gpu: %s: the saved state att is %v, want %v %v (Device.AttentionState for %s, B=%d T=%d C=%d NH=%d): %w",
			op, desc(att), state.DType, state.Shape, dt, B, T, C, NH, tensor.ErrShape))
		return s, false
	}
	ct, ok := dataType(dt)
	if !ok || act.DType != dt {
		d.unsupported(op+" (out/dout and qkv must share a float dtype)", act.DType, qkv.DType)
		return s, false
	}
	if s.flash {
		for i, t := range []*tensor.Tensor{act, qkv} {
			if p := d.ptr(t); p%16 != 0 {
				d.fail(fmt.Errorf("gpu: %s (flash): argument %d (%v) at %#x is not 16-byte aligned (B=%d T=%d C=%d NH=%d): %w", op, i, desc(t), uint64(p), B, T, C, NH, tensor.ErrShape))
				return s, false
			}
		}
	}
	s = attnShape{B: B, T: T, C: C, NH: NH, hs: hs, dt: dt, ct: ct, es: uint64(dt.Size()),
		scale: float32(1 / math.Sqrt(float64(hs))), flash: s.flash}
	if per := NH * T * T * 4; per > 0 {
		s.chunk = max(1, min(B, attnScratchBytes/per))
	}
	return s, true
}

// Attention computes causal self-attention; att receives the state
// AttentionState names (the log-sum-exp or the probabilities).
// out (B,T,C), att (AttentionState), qkv (B,T,3C), out and qkv one dtype
func (d *Device) Attention(out, att, qkv *tensor.Tensor, B, T, C, NH int) {
	if !d.check(&device.Ops.Attention, []int{B, T, C, NH}, out, att, qkv) {
		return
	}
	s, ok := d.attnArgs("attention", out, att, qkv, B, T, C, NH)
	if !ok || B*T == 0 {
		return
	}
	if p := d.dnnPlan(s, false); p != nil && d.ptr(att)%16 == 0 &&
		d.dnnRun(s, false, p, cuda.SDPAArgs{QKV: d.ptr(qkv), Out: d.ptr(out), Stats: d.ptr(att)}) {
		return
	}
	if s.flash {
		k, rows, threads := d.flashFwd(s.dt, s.hs)
		grid := cuda.Dim3{X: uint32(blocks(T, rows)), Y: uint32(B * NH), Z: 1}
		if rows == flash2Rows { // flash_fwd2_hsN: the heads on x, the query tiles on y
			grid.X, grid.Y = grid.Y, grid.X
		}
		d.launch(k, s.dt, grid, cuda.D1(threads), 0, d.ptr(out), d.ptr(att), d.ptr(qkv), T, C, NH, s.scale)
		return
	}
	scores := d.scratch("attn.scores", s.chunk*NH*T*T*4)
	if scores == 0 {
		return
	}
	o, a, x := d.ptr(out), d.ptr(att), d.ptr(qkv)
	d.do(func() error {
		for b0 := 0; b0 < B && !d.failed(); b0 += s.chunk {
			d.attnChunk(s, b0, min(B, b0+s.chunk), o, a, x, scores)
		}
		return nil
	})
}

// attnChunk runs forward for batch rows [b0,b1).
func (d *Device) attnChunk(s attnShape, b0, b1 int, out, att, qkv, scores cuda.DevicePtr) {
	T, C, NH, hs, es := s.T, s.C, s.NH, s.hs, s.es
	TT := uint64(T * T)
	alpha := s.scale
	if !d.fused {
		alpha = 1
	}
	for b := b0; b < b1; b++ {
		q := qkv.Add(uint64(b*T*3*C) * es)
		g := cuda.Gemm{
			TransA: true, M: T, N: T, K: hs, Alpha: alpha,
			A: q.Add(uint64(C) * es), B: q, C: scores.Add(uint64(b-b0) * uint64(NH) * TT * 4),
			AType: s.ct, BType: s.ct, CType: cuda.R32F, LDA: 3 * C, LDB: 3 * C, LDC: T, Compute: cuda.Compute32F,
			StrideA: int64(hs), StrideB: int64(hs), StrideC: int64(TT), Batch: NH,
		}
		if err := d.gemmBatched(g); err != nil {
			d.fail(fmt.Errorf("gpu: attention: scores (cuBLAS): %w", err))
			return
		}
	}
	rows := (b1 - b0) * NH * T
	n := int64(rows) * int64(T)
	attB := att.Add(uint64(b0*NH) * TT * es)
	rowGrid, rowBlock := cuda.D1(blocks(rows, attnRowWarps)), cuda.D1(attnRowBlock)
	if d.fused {
		d.launch("attn_softmax_forward", s.dt, rowGrid, rowBlock, 0, attB, scores, rows, T)
	} else {
		mx := d.scratch("attn.rowA", rows*4)
		sum := d.scratch("attn.rowB", rows*4)
		if mx == 0 || sum == 0 {
			return
		}
		eg := elemBlocks(int(min(n, math.MaxInt32)))
		d.launch("attn_scale", tensor.F32, eg, cuda.D1(attnEWBlock), 0, scores, n, s.scale)
		d.launch("attn_mask", tensor.F32, eg, cuda.D1(attnEWBlock), 0, scores, rows, T)
		d.launch("attn_rowmax", tensor.F32, rowGrid, rowBlock, 0, mx, scores, rows, T)
		d.launch("attn_expsub", tensor.F32, eg, cuda.D1(attnEWBlock), 0, scores, mx, rows, T)
		d.launch("attn_rowsum", tensor.F32, rowGrid, rowBlock, 0, sum, scores, rows, T)
		d.launch("attn_divide", s.dt, eg, cuda.D1(attnEWBlock), 0, attB, scores, sum, rows, T)
	}
	for b := b0; b < b1; b++ {
		q := qkv.Add(uint64(b*T*3*C) * es)
		g := cuda.Gemm{
			M: hs, N: T, K: T, Alpha: 1,
			A: q.Add(uint64(2*C) * es), B: att.Add(uint64(b*NH) * TT * es), C: out.Add(uint64(b*T*C) * es),
			AType: s.ct, BType: s.ct, CType: s.ct, LDA: 3 * C, LDB: T, LDC: C, Compute: cuda.Compute32F,
			StrideA: int64(hs), StrideB: int64(TT), StrideC: int64(hs), Batch: NH,
		}
		if err := d.gemmBatched(g); err != nil {
			d.fail(fmt.Errorf("gpu: attention: att·v (cuBLAS): %w", err))
			return
		}
	}
}

// AttentionBackward accumulates the gradient of Attention into dqkv (dq,
// dk and dv are all added). out is Attention's output (flash path only).
// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), out (B,T,C), att (AttentionState)
func (d *Device) AttentionBackward(dqkv, dout, qkv, out, att *tensor.Tensor, B, T, C, NH int) {
	d.attentionBackward(&device.Ops.AttentionBackward, false, dqkv, dout, qkv, out, att, B, T, C, NH)
}

// AttentionBackwardStore is AttentionBackward with dqkv stored, not
// accumulated (device.GradStorer): variant 2's flash backward kernels
// write dq, dk and dv without reading dqkv (their store flag: one read of
// dqkv and the model's zeroing of it less, 2 × 75 MB a layer at GPT-2
// 124M's B16 T1024); the other paths (variant 1, the cuBLAS path) zero
// dqkv first and accumulate.
// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), out (B,T,C), att (AttentionState)
func (d *Device) AttentionBackwardStore(dqkv, dout, qkv, out, att *tensor.Tensor, B, T, C, NH int) {
	d.attentionBackward(&device.Ops.AttentionBackwardStore, true, dqkv, dout, qkv, out, att, B, T, C, NH)
}

// attentionBackward is AttentionBackward (store false) or
// AttentionBackwardStore under contract c.
func (d *Device) attentionBackward(c *device.Contract, store bool, dqkv, dout, qkv, out, att *tensor.Tensor, B, T, C, NH int) {
	const op = "attention backward"
	if !d.check(c, []int{B, T, C, NH}, dqkv, dout, qkv, out, att) {
		return
	}
	s, ok := d.attnArgs(op, dout, att, qkv, B, T, C, NH)
	if !ok || !d.checkDT(op, s.dt, dqkv) || B*T == 0 {
		return
	}
	if s.flash && store {
		if p := d.dnnPlan(s, true); p != nil && d.cudnnBackwardArgs(s, dqkv, dout, out, att) &&
			d.dnnRun(s, true, p, cuda.SDPAArgs{QKV: d.ptr(qkv), Out: d.ptr(out), Stats: d.ptr(att), DOut: d.ptr(dout), DQKV: d.ptr(dqkv)}) {
			return
		}
	}
	if s.flash && store && d.flashBwd2Built(s.dt, s.hs) {
		d.flashBackward(s, dqkv, dout, qkv, out, att, 1)
		return
	}
	if store { // no store form on this path: zero, then accumulate
		if err := d.memset(d.ptr(dqkv), dqkv.Bytes()); err != nil {
			d.fail(fmt.Errorf("gpu: %s: zero dqkv: %w", op, err))
			return
		}
	}
	if s.flash {
		d.flashBackward(s, dqkv, dout, qkv, out, att, 0)
		return
	}
	datt := d.scratch("attn.scores", s.chunk*NH*T*T*4)
	dpre := d.scratch("attn.dpre", s.chunk*NH*T*T*int(s.es))
	if datt == 0 || dpre == 0 {
		return
	}
	dx, g, x, a := d.ptr(dqkv), d.ptr(dout), d.ptr(qkv), d.ptr(att)
	d.do(func() error {
		for b0 := 0; b0 < B && !d.failed(); b0 += s.chunk {
			d.attnBackwardChunk(s, b0, min(B, b0+s.chunk), dx, g, x, a, datt, dpre)
		}
		return nil
	})
}

// flashTile is the query (forward) and key (backward) tile of the flash
// kernels: grid.x = ceil(T/flashTile).
const flashTile = 64

// flashBackward runs the flash backward: variant 2's kernels
// (flashBackward2) where d.flashV2 is set and they are built for the dtype
// and head size, with store 1 (AttentionBackwardStore) writing dqkv without
// reading it; else variant 1's: dd = rowsum(dout∘out), the main kernel
// (dk, dv added to dqkv; dq into an fp32 scratch by atomics), then dqkv's q
// part += that scratch. Variant 1 has no store form: store must be 0 (the
// caller zeroed dqkv).
func (d *Device) flashBackward(s attnShape, dqkv, dout, qkv, out, att *tensor.Tensor, store int) {
	const op = "attention backward"
	B, T, C, NH := s.B, s.T, s.C, s.NH
	if out == nil || !d.checkDT(op+" (out)", s.dt, out) {
		if out == nil {
			d.fail(fmt.Errorf("gpu: %s (flash): out (Attention's output, B,T,C) is nil: %w", op, tensor.ErrShape))
		}
		return
	}
	for i, t := range []*tensor.Tensor{dqkv, out} {
		if p := d.ptr(t); p%16 != 0 {
			d.fail(fmt.Errorf("gpu: %s (flash): argument %d (%v) at %#x is not 16-byte aligned (B=%d T=%d C=%d NH=%d): %w", op, i, desc(t), uint64(p), B, T, C, NH, tensor.ErrShape))
			return
		}
	}
	rows := B * NH * T
	if d.flashBwd2Built(s.dt, s.hs) {
		d.flashBackward2(s, dqkv, dout, qkv, out, att, store)
		return
	}
	dd := d.scratch("attn.dd", rows*4)
	dqacc := d.scratch("attn.dqacc", B*T*C*4)
	if dd == 0 || dqacc == 0 {
		return
	}
	dx, g, x, o, lse := d.ptr(dqkv), d.ptr(dout), d.ptr(qkv), d.ptr(out), d.ptr(att)
	n := int64(B) * int64(T) * int64(C)
	d.do(func() error {
		if err := d.memset(dqacc, int(n)*4); err != nil {
			return fmt.Errorf("gpu: %s: zero dq scratch: %w", op, err)
		}
		d.launch("flash_bwd_dot", s.dt, cuda.D1(blocks(rows, flashRowBlock/32)), cuda.D1(flashRowBlock), 0, dd, g, o, rows, T, C, NH, s.hs)
		d.launch("flash_bwd_"+flashHeadSizes[s.hs], s.dt, cuda.Dim3{X: uint32(blocks(T, flashTile)), Y: uint32(B * NH), Z: 1}, cuda.D1(flashBlock), 0,
			dx, dqacc, x, g, lse, dd, T, C, NH, s.scale)
		d.launch("flash_bwd_dq", s.dt, elemBlocks(int(min(n, math.MaxInt32))), cuda.D1(flashEWBlock), 0, dx, dqacc, n, C)
		return nil
	})
}

// attnBackwardChunk runs backward for batch rows [b0,b1).
func (d *Device) attnBackwardChunk(s attnShape, b0, b1 int, dqkv, dout, qkv, att, datt, dpre cuda.DevicePtr) {
	T, C, NH, hs, es := s.T, s.C, s.NH, s.hs, s.es
	TT := uint64(T * T)
	gemm := func(what string, g cuda.Gemm) bool {
		g.AType, g.BType, g.Compute, g.Batch = s.ct, s.ct, cuda.Compute32F, NH
		if err := d.gemmBatched(g); err != nil {
			d.fail(fmt.Errorf("gpu: attention backward: %s (cuBLAS): %w", what, err))
			return false
		}
		return true
	}
	for b := b0; b < b1; b++ {
		q := qkv.Add(uint64(b*T*3*C) * es)
		dq := dqkv.Add(uint64(b*T*3*C) * es)
		gb := dout.Add(uint64(b*T*C) * es)
		ab := att.Add(uint64(b*NH) * TT * es)
		// datt = dout·vᵀ (fp32)
		if !gemm("datt", cuda.Gemm{
			TransA: true, M: T, N: T, K: hs, Alpha: 1,
			A: q.Add(uint64(2*C) * es), B: gb, C: datt.Add(uint64(b-b0) * uint64(NH) * TT * 4), CType: cuda.R32F,
			LDA: 3 * C, LDB: C, LDC: T, StrideA: int64(hs), StrideB: int64(hs), StrideC: int64(TT),
		}) {
			return
		}
		// dv += attᵀ·dout
		if !gemm("dv", cuda.Gemm{
			TransB: true, M: hs, N: T, K: T, Alpha: 1, Beta: 1,
			A: gb, B: ab, C: dq.Add(uint64(2*C) * es), CType: s.ct,
			LDA: C, LDB: T, LDC: 3 * C, StrideA: int64(hs), StrideB: int64(TT), StrideC: int64(hs),
		}) {
			return
		}
	}
	rows := (b1 - b0) * NH * T
	n := int64(rows) * int64(T)
	attB := att.Add(uint64(b0*NH) * TT * es)
	rowGrid, rowBlock := cuda.D1(blocks(rows, attnRowWarps)), cuda.D1(attnRowBlock)
	if d.fused {
		d.launch("attn_softmax_backward", s.dt, rowGrid, rowBlock, 0, dpre, attB, datt, rows, T, s.scale)
	} else {
		rs := d.scratch("attn.rowA", rows*4)
		if rs == 0 {
			return
		}
		eg := elemBlocks(int(min(n, math.MaxInt32)))
		d.launch("attn_bwd_rowsum", s.dt, rowGrid, rowBlock, 0, rs, attB, datt, rows, T)
		d.launch("attn_bwd_sub", s.dt, eg, cuda.D1(attnEWBlock), 0, datt, attB, rs, rows, T)
		d.launch("attn_bwd_mask", tensor.F32, eg, cuda.D1(attnEWBlock), 0, datt, rows, T)
		d.launch("attn_bwd_scale", s.dt, eg, cuda.D1(attnEWBlock), 0, dpre, datt, n, s.scale)
	}
	for b := b0; b < b1; b++ {
		q := qkv.Add(uint64(b*T*3*C) * es)
		dq := dqkv.Add(uint64(b*T*3*C) * es)
		db := dpre.Add(uint64(b-b0) * uint64(NH) * TT * es)
		// dq += dpre·k
		if !gemm("dq", cuda.Gemm{
			M: hs, N: T, K: T, Alpha: 1, Beta: 1,
			A: q.Add(uint64(C) * es), B: db, C: dq, CType: s.ct,
			LDA: 3 * C, LDB: T, LDC: 3 * C, StrideA: int64(hs), StrideB: int64(TT), StrideC: int64(hs),
		}) {
			return
		}
		// dk += dpreᵀ·q
		if !gemm("dk", cuda.Gemm{
			TransB: true, M: hs, N: T, K: T, Alpha: 1, Beta: 1,
			A: q, B: db, C: dq.Add(uint64(C) * es), CType: s.ct,
			LDA: 3 * C, LDB: T, LDC: 3 * C, StrideA: int64(hs), StrideB: int64(TT), StrideC: int64(hs),
		}) {
			return
		}
	}
}

// flash2Keys is the key tile of flash_bwd2kv_hsN (FA2_BN): grid.y = ceil(T/flash2Keys).
const flash2Keys = 128

// flashBwd2Rows is flash_bwd2kv_hsN's query tile (BM): 64 rows, 32 at hs 128
// (registers: dk and dv of 16 keys × 128 columns per warp).
func flashBwd2Rows(hs int) int {
	if hs == 128 {
		return 32
	}
	return 64
}

// flashBwd2Smem is flash_bwd2kv_hsN's dynamic shared memory in bytes,
// Fa2Bwd<HS,BM>::BYTES of kernels/flash_attention2.cu: k and v tiles
// (128 × (hs+8) 16-bit each), q and dout double-buffered (2 × BM × (hs+8)
// each), lse and dd double-buffered (2 × BM floats each). hs 32: 41984,
// hs 64: 74752, hs 128: 104960 (the last two above the 48 KB that needs no
// opt-in).
func flashBwd2Smem(hs int) int {
	bm := flashBwd2Rows(hs)
	ld := hs + 8
	return 2*flash2Keys*ld*2 + 2*2*bm*ld*2 + 2*2*bm*4
}

// dynamicSmem names the kernels that take more than 48 KB of dynamic shared
// memory and how much: New raises each one's limit once at load
// (cuFuncSetAttribute, MAX_DYNAMIC_SHARED_SIZE_BYTES); where the GPU cannot
// give it (e.g. 99 KB on sm_86/89 against hs 128's 102.5 KB), the kernel
// is unavailable and its caller takes its fallback.
var dynamicSmem = map[string]int{
	"flash_bwd2kv_hs32":  flashBwd2Smem(32),
	"flash_bwd2kv_hs64":  flashBwd2Smem(64),
	"flash_bwd2kv_hs128": flashBwd2Smem(128),
}

// flashBwd2Built reports whether the backward of variant 2 runs for dt and
// hs: d.flashV2 set and flash_bwd2_dot, flash_bwd2kv_hsN and
// flash_bwd2q_hsN built (sm_80+, the shared memory granted).
func (d *Device) flashBwd2Built(dt tensor.DType, hs int) bool {
	return d.flashV2 && d.built2(dt, "flash_bwd2_dot", "flash_bwd2kv_"+flashHeadSizes[hs], "flash_bwd2q_"+flashHeadSizes[hs])
}

// built2 reports whether every kernel named is built for dt (or launches
// are hooked).
func (d *Device) built2(dt tensor.DType, names ...string) bool {
	for _, k := range names {
		if d.funcs[kernelKey{k, dt}] == nil && launchHook == nil {
			return false
		}
	}
	return true
}

// flashBackward2 runs variant 2's backward (kernels/flash_attention2.cu):
// flash_bwd2_dot writes dd = rowsum(dout∘out), flash_bwd2kv_hsN adds dk
// and dv to dqkv, flash_bwd2q_hsN adds dq; store 1: each of them writes its
// part of dqkv without reading it (0 + the gradient: the bits of a zeroed
// dqkv accumulated into). The caller has checked the arguments
// (flashBackward).
func (d *Device) flashBackward2(s attnShape, dqkv, dout, qkv, out, att *tensor.Tensor, store int) {
	B, T, C, NH := s.B, s.T, s.C, s.NH
	dd := d.scratch("attn.dd", B*NH*T*4)
	if dd == 0 {
		return
	}
	dx, g, x, o, lse := d.ptr(dqkv), d.ptr(dout), d.ptr(qkv), d.ptr(out), d.ptr(att)
	n8 := int64(B) * int64(T) * int64(C) / 8 // C = NH·hs is a multiple of 8
	suf := flashHeadSizes[s.hs]
	d.do(func() error {
		d.launch("flash_bwd2_dot", s.dt, elemBlocks(int(min(n8, math.MaxInt32))), cuda.D1(flash2BwdBlock), 0, dd, g, o, n8, T, NH, s.hs)
		d.launch("flash_bwd2kv_"+suf, s.dt, cuda.Dim3{X: uint32(B * NH), Y: uint32(blocks(T, flash2Keys)), Z: 1}, cuda.D1(flash2BwdBlock),
			flashBwd2Smem(s.hs), dx, x, g, lse, dd, T, C, NH, s.scale, store)
		d.launch("flash_bwd2q_"+suf, s.dt, cuda.Dim3{X: uint32(B * NH), Y: uint32(blocks(T, flash2Rows)), Z: 1}, cuda.D1(flash2BwdBlock), 0,
			dx, x, g, lse, dd, T, C, NH, s.scale, store)
		return nil
	})
}

// cudnnBackwardArgs checks what cuDNN's backward reads beyond attnArgs:
// out (Attention's output) present in the dtype, every operand 16-byte
// aligned; false (nothing recorded) leaves the call to the own kernels,
// which report what is wrong.
func (d *Device) cudnnBackwardArgs(s attnShape, dqkv, dout, out, att *tensor.Tensor) bool {
	if out == nil || out.DType != s.dt || out.Numel() != s.B*s.T*s.C {
		return false
	}
	return d.ptr(dqkv)%16 == 0 && d.ptr(out)%16 == 0 && d.ptr(dout)%16 == 0 && d.ptr(att)%16 == 0
}
