package cpu

// encoder.go: the token + position embedding and its backward.
//
// Forward, fused: one pass over the output rows, out[b,t,:] = wte[tok,:] +
// wpe[t,:]. Decomposed (as PyTorch's wte(idx) + wpe(pos) runs): gather the
// token rows into an fp32 buffer, gather the position rows into another, then
// an add pass with the position broadcast over the batch.
//
// Backward, fused: dwpe parallel over positions (each sums its B rows in b
// order); dwte parallel over the vocabulary rows that occur, each summing its
// occurrences in (b,t) order after a counting sort of the tokens (llm.c's
// bucket approach, without atomics). Decomposed: dwpe through a materialised
// (T,C) batch sum then an accumulate pass; dwte through a dense fp32 (V,C)
// gradient filled by a scatter-add parallel over channel ranges (each walks
// every (b,t) in order) and then accumulated, as autograd adds a fresh
// embedding gradient into .grad. Both are deterministic: every element is
// summed in a fixed order whatever the thread count.

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Encoder computes out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
// out (B,T,C), wte (V,C), wpe (maxT,C), tokens (B,T) I32
func (d *Device) Encoder(out, wte, wpe, tokens *tensor.Tensor, B, T, C int) {
	if !d.check(&device.Ops.Encoder, []int{B, T, C}, out, wte, wpe, tokens) || !d.tokensIn("Encoder", tokens, wte.Numel()/C) {
		return
	}
	if d.fused {
		d.encoderFused(out, wte, wpe, tokens, B, T, C)
	} else {
		d.encoderDecomposed(out, wte, wpe, tokens, B, T, C)
	}
}

// EncoderBackward accumulates dout into the rows of dwte and dwpe that
// Encoder read, deterministically.
// dwte (V,C), dwpe (maxT,C), dout (B,T,C), tokens (B,T) I32
func (d *Device) EncoderBackward(dwte, dwpe, dout, tokens *tensor.Tensor, B, T, C int) {
	if !d.check(&device.Ops.EncoderBackward, []int{B, T, C}, dwte, dwpe, dout, tokens) || !d.tokensIn("EncoderBackward", tokens, dwte.Numel()/C) {
		return
	}
	if d.fused {
		d.encoderBackwardFused(dwte, dwpe, dout, tokens, B, T, C)
	} else {
		d.encoderBackwardDecomposed(dwte, dwpe, dout, tokens, B, T, C)
	}
}

// tokensIn records an error unless every token is in [0,V), the rows of
// the table (the contract checked the shapes).
func (d *Device) tokensIn(op string, tokens *tensor.Tensor, V int) bool {
	for i, tok := range tokens.I32() {
		if tok < 0 || int(tok) >= V {
			d.fail(fmt.Errorf("cpu: %s: token %d at %d outside the vocabulary [0,%d)", op, tok, i, V))
			return false
		}
	}
	return true
}

// encoderFused: one pass over the (B·T) output rows.
func (d *Device) encoderFused(out, wte, wpe, tokens *tensor.Tensor, B, T, C int) {
	toks := tokens.I32()
	d.parallel(B*T, rowGrain(C), func(lo, hi int) {
		eb, pb, ob := make([]float32, C), make([]float32, C), make([]float32, C)
		for bt := lo; bt < hi; bt++ {
			e := in32(wte, int(toks[bt])*C, C, eb) // wte[tok,:]
			p := in32(wpe, (bt%T)*C, C, pb)        // wpe[t,:]
			o := out32(out, bt*C, C, ob)
			for i := range o {
				o[i] = e[i] + p[i]
			}
			flush32(out, bt*C, o)
		}
	})
}

// encoderDecomposed: gather, gather, broadcast add, each a full pass.
func (d *Device) encoderDecomposed(out, wte, wpe, tokens *tensor.Tensor, B, T, C int) {
	toks := tokens.I32()
	// pass 1: tok (B·T,C) = wte[tokens]
	tok := make([]float32, B*T*C)
	d.parallel(B*T, rowGrain(C), func(lo, hi int) {
		for bt := lo; bt < hi; bt++ {
			load(tok[bt*C:(bt+1)*C], wte, int(toks[bt])*C)
		}
	})
	// pass 2: pos (T,C) = wpe[0:T]
	pos := make([]float32, T*C)
	d.parallel(T, rowGrain(C), func(lo, hi int) {
		load(pos[lo*C:hi*C], wpe, lo*C)
	})
	// pass 3: out (B,T,C) = tok + pos broadcast over b
	d.parallel(B*T, rowGrain(C), func(lo, hi int) {
		for bt := lo; bt < hi; bt++ {
			r, p := tok[bt*C:(bt+1)*C], pos[(bt%T)*C:(bt%T+1)*C]
			for i := range r {
				r[i] += p[i]
			}
		}
		store(out, lo*C, tok[lo*C:hi*C])
	})
}

// encoderBackwardFused: dwpe over positions, dwte over the occurring vocab
// rows; each element's contributions are added in (b,t) order.
func (d *Device) encoderBackwardFused(dwte, dwpe, dout, tokens *tensor.Tensor, B, T, C int) {
	if B*T == 0 || C == 0 {
		return
	}
	// dwpe[t,:] += Σ_b dout[b,t,:], parallel over t.
	d.parallel(T, max(1, rowGrain(C)/max(B, 1)), func(lo, hi int) {
		ab, gb := scratch32(dwpe, C), scratch32(dout, C)
		defer func() { putScratch(ab); putScratch(gb) }()
		for t := lo; t < hi; t++ {
			acc := in32(dwpe, t*C, C, ab)
			for b := range B {
				g := in32(dout, (b*T+t)*C, C, gb)
				for i := range acc {
					acc[i] += g[i]
				}
			}
			flush32(dwpe, t*C, acc)
		}
	})
	// Bucket the (b,t) positions by token with a counting sort, which keeps
	// each bucket in increasing bt order: rows are the occurring tokens,
	// start[k]..start[k+1] their positions in order.
	V := dwte.Numel() / C
	toks := tokens.I32()
	count := make([]int32, V+1)
	for _, tok := range toks {
		count[tok+1]++
	}
	var rows []int32
	for v := range V {
		if count[v+1] > 0 {
			rows = append(rows, int32(v))
		}
		count[v+1] += count[v]
	}
	order := make([]int32, len(toks))
	next := append([]int32(nil), count[:V]...)
	for bt, tok := range toks {
		order[next[tok]] = int32(bt)
		next[tok]++
	}
	// dwte[v,:] += Σ_{tokens[bt]=v} dout[bt,:], parallel over occurring rows v.
	d.parallel(len(rows), 1, func(lo, hi int) {
		ab, gb := scratch32(dwte, C), scratch32(dout, C)
		defer func() { putScratch(ab); putScratch(gb) }()
		for _, v := range rows[lo:hi] {
			acc := in32(dwte, int(v)*C, C, ab)
			for _, bt := range order[count[v]:count[v+1]] {
				g := in32(dout, int(bt)*C, C, gb)
				for i := range acc {
					acc[i] += g[i]
				}
			}
			flush32(dwte, int(v)*C, acc)
		}
	})
}

// encoderBackwardDecomposed: batch sum then accumulate for dwpe; dense
// scatter-add then accumulate for dwte.
func (d *Device) encoderBackwardDecomposed(dwte, dwpe, dout, tokens *tensor.Tensor, B, T, C int) {
	if B*T == 0 || C == 0 {
		return
	}
	g := f32(dout) // (B,T,C) fp32
	toks := tokens.I32()
	// pass 1: gpos (T,C) = Σ_b dout[b,:,:], parallel over channel ranges
	gpos := make([]float32, T*C)
	d.parallel(T*C, 1<<12, func(lo, hi int) {
		for b := range B {
			src := g[b*T*C+lo : b*T*C+hi]
			for i, x := range src {
				gpos[lo+i] += x
			}
		}
	})
	// pass 2: dwpe[0:T] += gpos
	d.accumulateAt(dwpe, 0, gpos)
	// pass 3: gtok (V,C) = scatter-add of dout rows by token, parallel over
	// channel ranges, every (b,t) in order
	V := dwte.Numel() / C
	gtok := make([]float32, V*C)
	d.parallel(C, 64, func(lo, hi int) {
		for bt, tok := range toks {
			dst := gtok[int(tok)*C+lo : int(tok)*C+hi]
			src := g[bt*C+lo : bt*C+hi]
			for i, x := range src {
				dst[i] += x
			}
		}
	})
	// pass 4: dwte += gtok
	d.accumulateAt(dwte, 0, gtok)
}

// accumulateAt adds v into t's elements starting at off (t += v), in
// parallel chunks, rounding to t's dtype.
func (d *Device) accumulateAt(t *tensor.Tensor, off int, v []float32) {
	d.parallel(len(v), 1<<14, func(lo, hi int) {
		accumulateRange(t, off+lo, v[lo:hi])
	})
}
