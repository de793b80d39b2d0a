package cpu

// attention.go: causal multi-head self-attention, Attention and
// AttentionBackward, in the nanoGPT / llm.c layout.
//
// qkv (B,T,3C) packs q | k | v; head h of q is columns [h·hs, (h+1)·hs) of
// the first C, so one head of q, k or v is a T×hs matrix with row stride 3C
// that the GEMMs read in place. out (B,T,C) concatenates the heads; att
// (B,NH,T,T) keeps the softmax probabilities (0 above the diagonal) for
// backward. The scale is 1/√hs. Work is spread over the B·NH (b,h) pairs;
// each goroutine allocates its scratch once per call.
//
// Fused form, per (b,h): for blocks of attnBlock rows, a GEMM of the scaled
// scores restricted to the causal columns (up to the block's last row), one
// softmax pass per row (max, exp and sum, normalise, zero the masked tail),
// and a GEMM of those probabilities with v over the same columns; backward
// likewise skips the blocks above the diagonal and does the softmax backward
// of a row in one pass. Below T = attnGemmMin the rows are plain loops
// (llm.c's attention_forward / attention_backward).
//
// Decomposed form, per (b,h), what eager PyTorch runs: the full T×T score
// matrix by one GEMM, then separate passes (scale, mask fill -inf, row max,
// exp of the difference, row sum, divide), then a full GEMM att·v; backward
// is the full GEMMs of autograd with the softmax, mask and scale backward
// as separate passes. Below T = attnGemmMin its GEMMs are plain loops.
//
// With 16-bit att the probabilities are rounded to att's dtype before att·v,
// so forward and backward use the same values; sums stay fp32.

import (
	"fmt"
	"math"
	"sync"

	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

const (
	// attnGemmMin is the sequence length from which attention's products go
	// through blas; below it the per-row loops are faster.
	attnGemmMin = 64
	// attnBlock is the row block of the fused form's causal GEMMs.
	attnBlock = 32
)

// attnHead locates one (b,h) pair's operands in the flat fp32 buffers.
type attnHead struct {
	T, C, hs   int
	ld         int     // row stride of q, k, v (and their gradients): 3C
	q, k, v    int     // offsets of the head's q, k, v in qkv (B,T,3C)
	o          int     // offset of the head in out / dout (B,T,C), row stride C
	a          int     // offset of the head's (T,T) block in att (B,NH,T,T)
	scale      float32 // 1/√hs
	gemmByBlas bool    // T >= attnGemmMin
	sgemm      sgemmFunc
}

// sgemmFunc is blas.Sgemm or blas.SgemmSerial.
type sgemmFunc = func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error

// newAttnHead returns the layout of pair bh = b·NH + h, whose products
// run through gemm.
func newAttnHead(bh, T, C, NH int, gemm sgemmFunc) attnHead {
	b, h := bh/NH, bh%NH
	hs := C / NH
	q := b*T*3*C + h*hs
	return attnHead{
		T: T, C: C, hs: hs, ld: 3 * C,
		q: q, k: q + C, v: q + 2*C,
		o:          b*T*C + h*hs,
		a:          bh * T * T,
		scale:      float32(1 / math.Sqrt(float64(hs))),
		gemmByBlas: T >= attnGemmMin,
		sgemm:      gemm,
	}
}

// attState records an error unless att is the probabilities (B,NH,T,T).
func (d *Device) attState(op string, att *tensor.Tensor, B, T, NH int) bool {
	if att.Numel() != B*NH*T*T {
		d.fail(fmt.Errorf("cpu: %s: the saved state att is %s%v, want (%d,%d,%d,%d): %w", op, att.DType, att.Shape, B, NH, T, T, tensor.ErrShape))
		return false
	}
	return true
}

// forHeads runs fn on every (b,h) pair with scratch from newScratch, made
// once per goroutine. With a pair for every thread (or no blas products, T
// below attnGemmMin) the pairs run in parallel, each product on its own
// goroutine (blas.SgemmSerial); otherwise in turn, each product spread over
// the threads (blas.Sgemm). The first error is recorded.
func (d *Device) forHeads(BH, T int, newScratch func() *attnScratch, fn func(bh int, s *attnScratch, gemm sgemmFunc) error) {
	var mu sync.Mutex
	var first error
	gemm := blas.SgemmSerial
	run := func(lo, hi int) {
		s := newScratch()
		defer s.release()
		for bh := lo; bh < hi; bh++ {
			if err := fn(bh, s, gemm); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
		}
	}
	blas.SetThreads(d.threads)
	if BH >= d.threads || T < attnGemmMin {
		d.parallel(BH, 1, run)
	} else {
		gemm = blas.Sgemm
		run(0, BH)
	}
	if first != nil {
		d.fail(fmt.Errorf("cpu: attention: %w", first))
	}
}

// attnScratch is one goroutine's scratch, from the pool, contents undefined.
type attnScratch struct {
	p, dp []float32 // (T,T): probabilities (16-bit att), their gradient
	rowA  []float32 // (T): row max, or row sums of att⊙datt
	rowB  []float32 // (T): row sums
}

// newAttnScratch returns the allocator of attnScratch: p when the
// probabilities need an fp32 copy, dp for backward.
func newAttnScratch(T int, probs, grads bool) func() *attnScratch {
	return func() *attnScratch {
		s := &attnScratch{rowA: getScratch(T), rowB: getScratch(T)}
		if probs {
			s.p = getScratch(T * T)
		}
		if grads {
			s.dp = getScratch(T * T)
		}
		return s
	}
}

// release gives the buffers back to the pool.
func (s *attnScratch) release() {
	for _, b := range [][]float32{s.p, s.dp, s.rowA, s.rowB} {
		putScratch(b)
	}
}

// Attention computes causal self-attention; att receives the probabilities.
// out (B,T,C), att (B,NH,T,T), qkv (B,T,3C)
func (d *Device) Attention(out, att, qkv *tensor.Tensor, B, T, C, NH int) {
	const op = "Attention"
	if !d.check(&device.Ops.Attention, []int{B, T, C, NH}, out, att, qkv) || !d.attState(op, att, B, T, NH) {
		return
	}
	x := d.gemmF32(qkv) // (B,T,3C)
	defer releaseF32(qkv, x)
	o := outF32(out) // (B,T,C): out's memory when F32, else scratch
	defer releaseF32(out, o)
	var p32 []float32 // att's memory when F32
	if att.DType == tensor.F32 {
		p32 = att.F32()
	}
	d.forHeads(B*NH, T, newAttnScratch(T, p32 == nil, false), func(bh int, s *attnScratch, gemm sgemmFunc) error {
		hd := newAttnHead(bh, T, C, NH, gemm)
		p := s.p // (T,T) probabilities of this head
		if p32 != nil {
			p = p32[hd.a : hd.a+T*T]
		}
		if d.fused {
			return attnForwardFused(hd, o, p, x, att, s)
		}
		return attnForwardDecomposed(hd, o, p, x, att, s)
	})
	if out.DType != tensor.F32 {
		d.parallel(len(o), 1<<14, func(lo, hi int) { store(out, lo, o[lo:hi]) })
	}
}

// roundProbs rounds p (rows [r0,r1) of the head's (T,T) block) into a
// 16-bit att and keeps the rounded values in p; for F32 att p is att.
func roundProbs(hd attnHead, att *tensor.Tensor, p []float32, r0, r1 int) {
	if att.DType == tensor.F32 {
		return
	}
	blk := p[r0*hd.T : r1*hd.T]
	if att.DType == tensor.BF16 { // one pass
		roundKeepBF16(att.U16()[hd.a+r0*hd.T:], blk)
		return
	}
	store(att, hd.a+r0*hd.T, blk)
	load(blk, att, hd.a+r0*hd.T)
}

// softmaxCausalRow turns the scaled scores row[0..t] into probabilities in
// place and zeroes row[t+1:]: one sweep for the max, one for exp and sum
// (four partial sums), one to normalise, the row staying in L1.
func softmaxCausalRow(row []float32, t int) {
	live := row[:t+1]
	m := max32(live)
	scale32(live, 1/expSubSum(live, m))
	clear(row[t+1:])
}

// softmaxCausalRowGo is softmaxCausalRow's pure-Go reference (four partial
// sums instead of the kernels' eight lanes).
func softmaxCausalRowGo(row []float32, t int) {
	live := row[:t+1]
	m := live[0]
	for _, v := range live[1:] {
		if v > m {
			m = v
		}
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(live); i += 4 {
		e0, e1, e2, e3 := expNeg32(live[i]-m), expNeg32(live[i+1]-m), expNeg32(live[i+2]-m), expNeg32(live[i+3]-m)
		live[i], live[i+1], live[i+2], live[i+3] = e0, e1, e2, e3
		s0, s1, s2, s3 = s0+e0, s1+e1, s2+e2, s3+e3
	}
	for ; i < len(live); i++ {
		e := expNeg32(live[i] - m)
		live[i] = e
		s0 += e
	}
	inv := 1 / ((s0 + s1) + (s2 + s3))
	for i := range live {
		live[i] *= inv
	}
	clear(row[t+1:])
}

// attnForwardFused computes one head: p (T,T) the probabilities, o's head
// columns the weighted sum of v.
func attnForwardFused(hd attnHead, o, p, x []float32, att *tensor.Tensor, s *attnScratch) error {
	T, hs, ld := hd.T, hd.hs, hd.ld
	if !hd.gemmByBlas {
		for t := range T {
			qt := x[hd.q+t*ld : hd.q+t*ld+hs]
			row := p[t*T : (t+1)*T]
			for t2 := 0; t2 <= t; t2++ { // scaled scores of the unmasked columns
				row[t2] = dot32(qt, x[hd.k+t2*ld:hd.k+t2*ld+hs]) * hd.scale
			}
			softmaxCausalRow(row, t)
			roundProbs(hd, att, p, t, t+1)
			ot := o[hd.o+t*hd.C : hd.o+t*hd.C+hs]
			clear(ot)
			for t2 := 0; t2 <= t; t2++ {
				axpy32(row[t2], x[hd.v+t2*ld:hd.v+t2*ld+hs], ot)
			}
		}
		return nil
	}
	for r0 := 0; r0 < T; r0 += attnBlock {
		r1 := min(r0+attnBlock, T)
		// p[r0:r1, 0:r1] = scale · q[r0:r1] · k[0:r1]ᵀ
		if err := hd.sgemm(false, true, r1-r0, r1, hs, hd.scale, x[hd.q+r0*ld:], ld, x[hd.k:], ld, 0, p[r0*T:], T); err != nil {
			return err
		}
		for t := r0; t < r1; t++ {
			softmaxCausalRow(p[t*T:(t+1)*T], t)
		}
		roundProbs(hd, att, p, r0, r1)
		// o[r0:r1] = p[r0:r1, 0:r1] · v[0:r1]
		if err := hd.sgemm(false, false, r1-r0, hs, r1, 1, p[r0*T:], T, x[hd.v:], ld, 0, o[hd.o+r0*hd.C:], hd.C); err != nil {
			return err
		}
	}
	return nil
}

// attnForwardDecomposed computes one head as eager PyTorch does: full score
// GEMM, then one pass per elementwise step, then the full GEMM with v.
func attnForwardDecomposed(hd attnHead, o, p, x []float32, att *tensor.Tensor, s *attnScratch) error {
	T, hs, ld := hd.T, hd.hs, hd.ld
	// p = q · kᵀ (T,T)
	if err := hd.gemm(false, true, T, T, hs, 1, x[hd.q:], ld, x[hd.k:], ld, 0, p, T); err != nil {
		return err
	}
	for i := range p { // p *= scale
		p[i] *= hd.scale
	}
	ninf := float32(math.Inf(-1))
	for t := range T { // masked_fill(mask == 0, -inf)
		row := p[t*T : (t+1)*T]
		for t2 := t + 1; t2 < T; t2++ {
			row[t2] = ninf
		}
	}
	m, sum := s.rowA, s.rowB
	for t := range T { // row max
		mx := ninf
		for _, v := range p[t*T : (t+1)*T] {
			mx = max(mx, v)
		}
		m[t] = mx
	}
	for t := range T { // exp(p - max)
		row := p[t*T : (t+1)*T]
		for i, v := range row {
			row[i] = expNeg32(v - m[t])
		}
	}
	for t := range T { // row sum
		var acc float32
		for _, v := range p[t*T : (t+1)*T] {
			acc += v
		}
		sum[t] = acc
	}
	for t := range T { // p /= sum
		row := p[t*T : (t+1)*T]
		for i := range row {
			row[i] /= sum[t]
		}
	}
	roundProbs(hd, att, p, 0, T)
	// o = p · v (T,hs)
	return hd.gemm(false, false, T, hs, T, 1, p, T, x[hd.v:], ld, 0, o[hd.o:], hd.C)
}

// AttentionState is ProbState: the CPU saves the probabilities.
func (d *Device) AttentionState(dt tensor.DType, B, T, C, NH int) device.AttnState {
	return device.ProbState(dt, B, T, NH)
}

// AttentionBackward accumulates the gradient of Attention into dqkv; out
// (Attention's output) is not needed here (the probabilities are saved).
// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), out (B,T,C) unused, att (B,NH,T,T)
func (d *Device) AttentionBackward(dqkv, dout, qkv, _, att *tensor.Tensor, B, T, C, NH int) {
	d.attentionBackward(&device.Ops.AttentionBackward, false, dqkv, dout, qkv, att, B, T, C, NH)
}

// AttentionBackwardStore is AttentionBackward with dqkv stored, not
// accumulated (device.GradStorer): its old contents are never read. The
// values are Zero + AttentionBackward's.
func (d *Device) AttentionBackwardStore(dqkv, dout, qkv, _, att *tensor.Tensor, B, T, C, NH int) {
	d.attentionBackward(&device.Ops.AttentionBackwardStore, true, dqkv, dout, qkv, att, B, T, C, NH)
}

// attentionBackward is AttentionBackward (store false) or
// AttentionBackwardStore under contract c: the heads accumulate into an
// fp32 dx (dqkv's memory when F32, zeroed first for store; else a zeroed
// scratch added into dqkv, or stored into it).
func (d *Device) attentionBackward(c *device.Contract, store bool, dqkv, dout, qkv, att *tensor.Tensor, B, T, C, NH int) {
	op := c.Op
	if !d.check(c, []int{B, T, C, NH}, dqkv, dout, qkv, nil, att) || !d.attState(op, att, B, T, NH) {
		return
	}
	x, g := d.gemmF32(qkv), d.gemmF32(dout) // (B,T,3C), (B,T,C)
	defer releaseF32(qkv, x)
	defer releaseF32(dout, g)
	dx := outF32(dqkv) // (B,T,3C): dqkv's memory when F32, else a zeroed scratch
	defer releaseF32(dqkv, dx)
	if dqkv.DType != tensor.F32 || store {
		d.parallel(len(dx), 1<<14, func(lo, hi int) { clear(dx[lo:hi]) })
	}
	var p32 []float32
	if att.DType == tensor.F32 {
		p32 = att.F32()
	}
	d.forHeads(B*NH, T, newAttnScratch(T, p32 == nil, true), func(bh int, s *attnScratch, gemm sgemmFunc) error {
		hd := newAttnHead(bh, T, C, NH, gemm)
		p := s.p
		if p32 != nil {
			p = p32[hd.a : hd.a+T*T]
		} else {
			load(p, att, hd.a)
		}
		if d.fused {
			return attnBackwardFused(hd, dx, g, x, p, s)
		}
		return attnBackwardDecomposed(hd, dx, g, x, p, s)
	})
	switch {
	case dqkv.DType == tensor.F32:
	case store:
		d.storeF32(dqkv, dx)
	default:
		d.accumulateF32(dqkv, dx)
	}
}

// attnBackwardFused accumulates one head's dq, dk, dv into dx.
//
//	datt = dout·vᵀ, dv += attᵀ·dout,
//	dpre = att ⊙ (datt - rowsum(att ⊙ datt)) · scale,
//	dq += dpre·k, dk += dpreᵀ·q
func attnBackwardFused(hd attnHead, dx, g, x, p []float32, s *attnScratch) error {
	T, hs, ld, C := hd.T, hd.hs, hd.ld, hd.C
	dp := s.dp
	if !hd.gemmByBlas {
		for t := range T {
			row, drow := p[t*T:(t+1)*T], dp[t*T:(t+1)*T]
			gt := g[hd.o+t*C : hd.o+t*C+hs]
			for t2 := 0; t2 <= t; t2++ {
				drow[t2] = dot32(gt, x[hd.v+t2*ld:hd.v+t2*ld+hs])
				axpy32(row[t2], gt, dx[hd.v+t2*ld:hd.v+t2*ld+hs])
			}
			softmaxBackwardRow(row, drow, t, hd.scale)
			qt, dqt := x[hd.q+t*ld:hd.q+t*ld+hs], dx[hd.q+t*ld:hd.q+t*ld+hs]
			for t2 := 0; t2 <= t; t2++ {
				axpy32(drow[t2], x[hd.k+t2*ld:hd.k+t2*ld+hs], dqt)
				axpy32(drow[t2], qt, dx[hd.k+t2*ld:hd.k+t2*ld+hs])
			}
		}
		return nil
	}
	for r0 := 0; r0 < T; r0 += attnBlock {
		r1 := min(r0+attnBlock, T)
		m := r1 - r0
		// dp[r0:r1, 0:r1] = dout[r0:r1] · v[0:r1]ᵀ
		if err := hd.sgemm(false, true, m, r1, hs, 1, g[hd.o+r0*C:], C, x[hd.v:], ld, 0, dp[r0*T:], T); err != nil {
			return err
		}
		// dv[0:r1] += p[r0:r1, 0:r1]ᵀ · dout[r0:r1]
		if err := hd.sgemm(true, false, r1, hs, m, 1, p[r0*T:], T, g[hd.o+r0*C:], C, 1, dx[hd.v:], ld); err != nil {
			return err
		}
		for t := r0; t < r1; t++ {
			softmaxBackwardRow(p[t*T:(t+1)*T], dp[t*T:(t+1)*T], t, hd.scale)
			clear(dp[t*T+t+1 : t*T+r1])
		}
		// dq[r0:r1] += dpre[r0:r1, 0:r1] · k[0:r1]
		if err := hd.sgemm(false, false, m, hs, r1, 1, dp[r0*T:], T, x[hd.k:], ld, 1, dx[hd.q+r0*ld:], ld); err != nil {
			return err
		}
		// dk[0:r1] += dpre[r0:r1, 0:r1]ᵀ · q[r0:r1]
		if err := hd.sgemm(true, false, r1, hs, m, 1, dp[r0*T:], T, x[hd.q+r0*ld:], ld, 1, dx[hd.k:], ld); err != nil {
			return err
		}
	}
	return nil
}

// softmaxBackwardRow turns datt[0..t] into the gradient of the scaled
// scores: att ⊙ (datt - Σ att⊙datt) · scale, in one pass after the sum.
func softmaxBackwardRow(att, datt []float32, t int, scale float32) {
	a, da := att[:t+1], datt[:t+1]
	s := dot32(a, da)
	n := 0
	if useAVX2 {
		if n = len(a) &^ 7; n > 0 {
			softmaxBwdAVX2(&a[0], &da[0], n, s, scale)
		}
	}
	for i := n; i < len(a); i++ {
		da[i] = a[i] * (da[i] - s) * scale
	}
}

// softmaxBackwardRowGo is softmaxBackwardRow's pure-Go reference.
func softmaxBackwardRowGo(att, datt []float32, t int, scale float32) {
	a, da := att[:t+1], datt[:t+1]
	var s float32
	for i, v := range a {
		s += v * da[i]
	}
	for i, v := range a {
		da[i] = v * (da[i] - s) * scale
	}
}

// attnBackwardDecomposed accumulates one head's gradients as autograd of
// the eager forward runs them: full GEMMs and one pass per step.
func attnBackwardDecomposed(hd attnHead, dx, g, x, p []float32, s *attnScratch) error {
	T, hs, ld, C := hd.T, hd.hs, hd.ld, hd.C
	dp := s.dp
	// datt = dout · vᵀ (T,T)
	if err := hd.gemm(false, true, T, T, hs, 1, g[hd.o:], C, x[hd.v:], ld, 0, dp, T); err != nil {
		return err
	}
	// dv += attᵀ · dout (T,hs)
	if err := hd.gemm(true, false, T, hs, T, 1, p, T, g[hd.o:], C, 1, dx[hd.v:], ld); err != nil {
		return err
	}
	rs := s.rowA
	for t := range T { // softmax backward: row sums of att ⊙ datt
		var acc float32
		row, drow := p[t*T:(t+1)*T], dp[t*T:(t+1)*T]
		for i, v := range row {
			acc += v * drow[i]
		}
		rs[t] = acc
	}
	for t := range T { // dpre = att ⊙ (datt - rowsum)
		row, drow := p[t*T:(t+1)*T], dp[t*T:(t+1)*T]
		for i, v := range row {
			drow[i] = v * (drow[i] - rs[t])
		}
	}
	for t := range T { // masked_fill backward: no gradient above the diagonal
		clear(dp[t*T+t+1 : (t+1)*T])
	}
	for i := range dp { // scale backward
		dp[i] *= hd.scale
	}
	// dq += dpre · k, dk += dpreᵀ · q (T,hs)
	if err := hd.gemm(false, false, T, hs, T, 1, dp, T, x[hd.k:], ld, 1, dx[hd.q:], ld); err != nil {
		return err
	}
	return hd.gemm(true, false, T, hs, T, 1, dp, T, x[hd.q:], ld, 1, dx[hd.k:], ld)
}

// gemm is the head's blas product when T >= attnGemmMin, else a plain loop.
func (hd attnHead) gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if hd.gemmByBlas {
		return hd.sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
	for i := range m {
		for j := range n {
			var acc float32
			for l := range k {
				ia, ib := i*lda+l, l*ldb+j
				if transA {
					ia = l*lda + i
				}
				if transB {
					ib = j*ldb + l
				}
				acc += a[ia] * b[ib]
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * acc
			} else {
				c[i*ldc+j] = alpha*acc + beta*c[i*ldc+j]
			}
		}
	}
	return nil
}

// axpy32 computes y += alpha·x over len(x).
func axpy32(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += alpha * v
	}
}
