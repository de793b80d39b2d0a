package cpu

// decode.go: the ops of generation over a key/value cache (device.Decoder):
// the encoder at given positions, the cache append, one query row's
// attention against the cache, and the LM head fused with sampling.

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.Decoder = (*Device)(nil)

// DecodeReady returns nil: the CPU always has the decode ops.
func (d *Device) DecodeReady() error { return nil }

// EncoderAt: out[i,:] = wte[tokens[i],:] + wpe[pos[i],:].
// out (N,C), wte (V,C), wpe (maxT,C), tokens (N) I32, pos (N) I32
func (d *Device) EncoderAt(out, wte, wpe, tokens, pos *tensor.Tensor, N, C int) {
	if !d.check(&device.DecodeOps.EncoderAt, []int{N, C}, out, wte, wpe, tokens, pos) ||
		!d.tokensIn("EncoderAt", tokens, wte.Numel()/C) || !d.posIn("EncoderAt", pos, wpe.Numel()/C, 0) {
		return
	}
	toks, ps := tokens.I32(), pos.I32()
	eb, pb, ob := getScratch(C), getScratch(C), getScratch(C)
	defer func() { putScratch(eb); putScratch(pb); putScratch(ob) }()
	for i := range N {
		e := in32(wte, int(toks[i])*C, C, eb)
		p := in32(wpe, int(ps[i])*C, C, pb)
		o := out32(out, i*C, C, ob)
		for c := range C {
			o[c] = e[c] + p[c]
		}
		flush32(out, i*C, o)
	}
}

// posIn records an error unless every position plus extra is in [0,S).
func (d *Device) posIn(op string, pos *tensor.Tensor, S, extra int) bool {
	for i, p := range pos.I32() {
		if p < 0 || int(p)+extra >= S {
			d.fail(fmt.Errorf("cpu: %s: position %d (+%d) of row %d outside [0,%d)", op, p, extra, i, S))
			return false
		}
	}
	return true
}

// KVAppend copies the keys and values of qkv (B,T,3C) into the caches at
// positions pos[b]+t.
// kc (B,NH,S,hs), vc (B,NH,S,hs), qkv (B,T,3C), pos (B) I32
func (d *Device) KVAppend(kc, vc, qkv, pos *tensor.Tensor, B, T, C, NH, S int) {
	if !d.check(&device.DecodeOps.KVAppend, []int{B, T, C, NH, S}, kc, vc, qkv, pos) ||
		!d.posIn("KVAppend", pos, S, max(T-1, 0)) {
		return
	}
	appendKV(kc, vc, qkv, pos.I32(), B, T, C, NH, S)
}

// appendKV is KVAppend's copy, its arguments checked.
func appendKV(kc, vc, qkv *tensor.Tensor, ps []int32, B, T, C, NH, S int) {
	hs := C / NH
	buf := getScratch(hs)
	defer putScratch(buf)
	for b := range B {
		for t := range T {
			row := (b*T + t) * 3 * C
			at := int(ps[b]) + t
			for h := range NH {
				dst := ((b*NH+h)*S + at) * hs
				copyElems(kc, dst, qkv, row+C+h*hs, hs, buf)
				copyElems(vc, dst, qkv, row+2*C+h*hs, hs, buf)
			}
		}
	}
}

// copyElems copies n elements of src from so to dst at do, converting the
// dtype when they differ.
func copyElems(dst *tensor.Tensor, do int, src *tensor.Tensor, so, n int, buf []float32) {
	if dst.DType == src.DType {
		sz := dst.DType.Size()
		copy(dst.Raw()[do*sz:(do+n)*sz], src.Raw()[so*sz:(so+n)*sz])
		return
	}
	v := in32(src, so, n, buf)
	store(dst, do, v)
}

// AttentionDecode: row b's key and value appended to the caches at pos[b],
// then its q attends to the cached positions [0, pos[b]] of sequence b, all
// in fp32, out rounded once.
// out (B,C), qkv (B,3C), kc (B,NH,S,hs), vc (B,NH,S,hs), pos (B) I32
func (d *Device) AttentionDecode(out, qkv, kc, vc, pos *tensor.Tensor, B, C, NH, S int) {
	if !d.check(&device.DecodeOps.AttentionDecode, []int{B, C, NH, S}, out, qkv, kc, vc, pos) ||
		!d.posIn("AttentionDecode", pos, S, 0) {
		return
	}
	hs := C / NH
	ps := pos.I32()
	appendKV(kc, vc, qkv, ps, B, 1, C, NH, S)
	scale := float32(1 / math.Sqrt(float64(hs)))
	// Work is split over the (b,h) pairs, in chunks of about 64K multiply-
	// adds: a short cache of a small model runs on one goroutine, where a
	// hand-off would cost more than the work.
	longest := 0
	for _, p := range ps {
		longest = max(longest, int(p)+1)
	}
	d.parallel(B*NH, max(1, (1<<16)/(2*longest*hs)), func(lo, hi int) {
		att := getScratch(S)
		qb, kb, ob := getScratch(hs), getScratch(hs), getScratch(hs)
		defer func() { putScratch(att); putScratch(qb); putScratch(kb); putScratch(ob) }()
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			n := int(ps[b]) + 1
			q := in32(qkv, b*3*C+h*hs, hs, qb)
			base := bh * S * hs
			mx := float32(math.Inf(-1))
			f32 := kc.DType == tensor.F32 && vc.DType == tensor.F32
			if f32 && useAVX2 && hs%8 == 0 {
				// An fp32 cache: the scores are a gemv of the cached keys
				// (rows) against q, four keys a call, and the value rows
				// are summed in registers (wsumF32AVX2): no copies.
				kf := kc.F32()[base : base+n*hs]
				quads := n / 4
				if quads > 0 {
					gemvRowsF32AVX2(&kf[0], hs, &q[0], &att[0], quads)
				}
				for j := 4 * quads; j < n; j++ {
					att[j] = dotF32(q, kf[j*hs:(j+1)*hs])
				}
				for j := range n {
					att[j] *= scale
					mx = max(mx, att[j])
				}
			} else {
				for j := range n {
					s := dotF32(q, in32(kc, base+j*hs, hs, kb)) * scale
					att[j] = s
					mx = max(mx, s)
				}
			}
			sum := expSubSum(att[:n], mx)
			o := ob[:hs]
			clear(o)
			if f32 && useAVX2 && hs%32 == 0 {
				// the same fused multiply-adds in the same order as the
				// loop below, the sums held in registers
				wsumF32AVX2(&o[0], &vc.F32()[base], hs, &att[0], n, hs)
			} else {
				for j := range n {
					axpyFMA(o, in32(vc, base+j*hs, hs, kb), att[j])
				}
			}
			inv := 1 / sum
			for c := range hs {
				o[c] *= inv
			}
			store(out, b*C+h*hs, o)
		}
	})
}

// SampleHead: logits = x·wteᵀ in fp32, then one token a row by
// device.SampleRow, the row's state advanced.
// ids (B) I32, logits (B,V) F32, x (B,C), wte (V,C), table (NS,V) I32, rows (B,RowLen) I32
func (d *Device) SampleHead(ids, logits, x, wte, table, rows *tensor.Tensor, B, C, V, NS int, o device.Sampling) {
	if !d.check(&device.DecodeOps.SampleHead, []int{B, C, V, NS}, ids, logits, x, wte, table, rows) {
		return
	}
	rs := rows.I32()
	for b := range B {
		if st := rs[b*device.RowLen+device.RowState]; st < 0 || int(st) >= NS {
			d.fail(fmt.Errorf("cpu: SampleHead: row %d is in state %d outside the table's %d", b, st, NS))
			return
		}
	}
	y := outF32(logits)
	defer releaseF32(logits, y)
	if d.gemvOK(B, wte) {
		xb := scratch32(x, B*C)
		d.gemv(y, in32(x, 0, B*C, xb), wte, B, C, V)
		putScratch(xb)
		if logits.DType != tensor.F32 { // sample from the stored (rounded) logits
			store(logits, 0, y)
			load(y, logits, 0)
		}
	} else {
		d.Matmul(logits, nil, x, wte, nil, B, C, V, device.None)
		load(y, logits, 0)
	}
	for len(d.sampleScratch) < B {
		d.sampleScratch = append(d.sampleScratch, &device.SampleScratch{})
	}
	tab, out := table.I32(), ids.I32()
	d.parallel(B, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			r := rs[b*device.RowLen : (b+1)*device.RowLen]
			seed := uint64(uint32(r[device.RowSeedLo])) | uint64(uint32(r[device.RowSeedHi]))<<32
			u := device.Uniform(seed, uint32(r[device.RowStep]))
			st := tab[int(r[device.RowState])*V : (int(r[device.RowState])+1)*V]
			id, e := device.SampleRow(y[b*V:(b+1)*V], st, int(r[device.RowLeft]), o, u, d.sampleScratch[b])
			out[b] = int32(id)
			if id >= 0 {
				r[device.RowState] = e & device.TableNext
			}
			r[device.RowLeft]--
			r[device.RowStep]++
		}
	})
}

// dotF32 returns Σ a[i]·b[i] over len(a) in fp32 (fused multiply-adds in
// 8 lanes where the CPU has them).
func dotF32(a, b []float32) float32 {
	b = b[:len(a)]
	k := 0
	var s float32
	if useAVX2 && len(a) >= 8 {
		k = len(a) &^ 7
		s = dotFMAAVX2(&a[0], &b[0], k)
	}
	for i := k; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

// axpyFMA sets y[i] += a·x[i] over len(y) (fused multiply-adds where the
// CPU has them).
func axpyFMA(y, x []float32, a float32) {
	x = x[:len(y)]
	k := 0
	if useAVX2 && len(y) >= 8 {
		k = len(y) &^ 7
		axpyAVX2(&y[0], &x[0], a, k)
	}
	for i := k; i < len(y); i++ {
		y[i] += a * x[i]
	}
}
