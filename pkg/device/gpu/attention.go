package gpu

// attention.go: causal multi-head self-attention, Attention and
// AttentionBackward: cuBLAS strided-batched GEMMs for the products and the
// softmax kernels of kernels/attention.cu over an fp32 score matrix.
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

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// attnScratchBytes bounds the fp32 score scratch of one chunk of batches
// (a variable so that a test can force chunks of one batch row).
var attnScratchBytes = 1 << 30

// attnRowWarps is the rows (warps) per block of the per-row kernels.
const attnRowWarps = 8

// attnShape is one attention call's geometry.
type attnShape struct {
	B, T, C, NH, hs int
	dt              tensor.DType
	ct              cuda.DataType
	es              uint64  // element size of dt
	scale           float32 // 1/√hs
	chunk           int     // batch rows per chunk
}

func (d *Device) attnArgs(op string, act, att, qkv *tensor.Tensor, B, T, C, NH int) (attnShape, bool) {
	var s attnShape
	if B < 0 || T < 0 || C <= 0 || NH <= 0 || C%NH != 0 || act == nil || att == nil || qkv == nil {
		d.fail(fmt.Errorf("gpu: %s: B=%d T=%d C=%d NH=%d (C a positive multiple of NH) or a nil tensor: %w", op, B, T, C, NH, tensor.ErrShape))
		return s, false
	}
	if !d.checkN(op, B*T*C, act) || !d.checkN(op, B*NH*T*T, att) || !d.checkN(op, B*T*3*C, qkv) {
		return s, false
	}
	dt := qkv.DType
	ct, ok := dataType(dt)
	if !ok || act.DType != dt || att.DType != dt {
		d.unsupported(op+" (out/dout, att, qkv must share a float dtype)", act.DType, att.DType, qkv.DType)
		return s, false
	}
	hs := C / NH
	s = attnShape{B: B, T: T, C: C, NH: NH, hs: hs, dt: dt, ct: ct, es: uint64(dt.Size()),
		scale: float32(1 / math.Sqrt(float64(hs)))}
	if per := NH * T * T * 4; per > 0 {
		s.chunk = max(1, min(B, attnScratchBytes/per))
	}
	return s, true
}

// Attention computes causal self-attention; att receives the probabilities.
// out (B,T,C), att (B,NH,T,T), qkv (B,T,3C), all one dtype
func (d *Device) Attention(out, att, qkv *tensor.Tensor, B, T, C, NH int) {
	s, ok := d.attnArgs("attention", out, att, qkv, B, T, C, NH)
	if !ok || B*T == 0 {
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
	rowGrid, rowBlock := cuda.D1(blocks(rows, attnRowWarps)), cuda.D1(32*attnRowWarps)
	if d.fused {
		d.launch("attn_softmax_forward", s.dt, rowGrid, rowBlock, 0, attB, scores, rows, T)
	} else {
		mx := d.scratch("attn.rowA", rows*4)
		sum := d.scratch("attn.rowB", rows*4)
		if mx == 0 || sum == 0 {
			return
		}
		eg := elemBlocks(int(min(n, math.MaxInt32)))
		d.launch("attn_scale", tensor.F32, eg, cuda.D1(256), 0, scores, n, s.scale)
		d.launch("attn_mask", tensor.F32, eg, cuda.D1(256), 0, scores, rows, T)
		d.launch("attn_rowmax", tensor.F32, rowGrid, rowBlock, 0, mx, scores, rows, T)
		d.launch("attn_expsub", tensor.F32, eg, cuda.D1(256), 0, scores, mx, rows, T)
		d.launch("attn_rowsum", tensor.F32, rowGrid, rowBlock, 0, sum, scores, rows, T)
		d.launch("attn_divide", s.dt, eg, cuda.D1(256), 0, attB, scores, sum, rows, T)
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

// AttentionBackward accumulates the gradient of Attention into dqkv.
// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T), all one dtype
func (d *Device) AttentionBackward(dqkv, dout, qkv, att *tensor.Tensor, B, T, C, NH int) {
	const op = "attention backward"
	s, ok := d.attnArgs(op, dout, att, qkv, B, T, C, NH)
	if !ok || !d.checkN(op, B*T*3*C, dqkv) || !d.checkDT(op, s.dt, dqkv) || B*T == 0 {
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
	rowGrid, rowBlock := cuda.D1(blocks(rows, attnRowWarps)), cuda.D1(32*attnRowWarps)
	if d.fused {
		d.launch("attn_softmax_backward", s.dt, rowGrid, rowBlock, 0, dpre, attB, datt, rows, T, s.scale)
	} else {
		rs := d.scratch("attn.rowA", rows*4)
		if rs == 0 {
			return
		}
		eg := elemBlocks(int(min(n, math.MaxInt32)))
		d.launch("attn_bwd_rowsum", s.dt, rowGrid, rowBlock, 0, rs, attB, datt, rows, T)
		d.launch("attn_bwd_sub", s.dt, eg, cuda.D1(256), 0, datt, attB, rs, rows, T)
		d.launch("attn_bwd_mask", tensor.F32, eg, cuda.D1(256), 0, datt, rows, T)
		d.launch("attn_bwd_scale", s.dt, eg, cuda.D1(256), 0, dpre, datt, n, s.scale)
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
