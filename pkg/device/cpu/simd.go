package cpu

// simd.go: the vectorised forms of the elementwise hot loops, chosen at run
// time. On amd64 with AVX2 and FMA (checked once through x/sys/cpu) the
// kernels of simd_amd64.s run over the multiple-of-8 (or 16) prefix of a
// slice and the pure-Go loop, which stays the reference the tests compare
// against, finishes the tail; elsewhere, or with DRUTO_CPU_ISA=generic, the
// pure-Go loops run alone.
//
// Why hand-written Go assembly and not Go's SIMD package: simd/archsimd
// exists in Go 1.26 only under GOEXPERIMENT=simd, which a user's `go
// install` does not set, so a library cannot depend on it. AVX2 (8 lanes),
// not AVX-512: the target is the common 2-core AVX2+FMA cloud or lab
// machine; on AMD Zen 4, which has AVX-512, it runs 512-bit ops as two
// 256-bit halves.
//
// The GELU, tanh and exp kernels run the scalar code's float32 operations
// in its order (no FMA contraction), so their results are bit-identical to
// the pure-Go loops; the bf16 conversions are exact too. The sums of
// expSubSum, sum64 and sumSqDev64 keep the scalar code's four partial sums
// in their order, dot32 and lnBwdSums their eight (their Go references
// sum the same way). The cross-entropy's float64 sum, which no vector form
// keeps in order, stays scalar. So a training step gives the same bits
// with the kernels as without (checked by TestSIMDStepBits).

import (
	"fmt"
	"os"
	"runtime"

	"github.com/druto/druto/pkg/tensor"
)

// EnvISA names the environment variable that forces the pure-Go kernels
// ("generic"); any other value, or none, picks the best the CPU runs.
const EnvISA = "DRUTO_CPU_ISA"

// useAVX2 selects the AVX2 kernels; tests switch it to compare both paths.
var useAVX2 = haveAVX2 && os.Getenv(EnvISA) != "generic"

// ISA describes the elementwise kernels' instruction set as used now, e.g.
// "avx2+fma" or "generic (pure Go; DRUTO_CPU_ISA=generic)".
func ISA() string {
	switch {
	case useAVX2 && haveAVX512:
		return "avx2+fma (avx512f: in the fallback GEMM only)"
	case useAVX2:
		return "avx2+fma"
	case haveAVX2:
		return fmt.Sprintf("generic (pure Go; %s=generic)", EnvISA)
	}
	return "generic (pure Go; no avx2+fma on this " + runtime.GOARCH + " cpu)"
}

// geluForward computes out = gelu(inp) over len(inp) elements (out may be
// inp). It runs on the calling goroutine; callers parallelise.
func geluForward(out, inp []float32) {
	out = out[:len(inp)]
	n := 0
	if useAVX2 {
		if n = len(inp) &^ 7; n > 0 {
			geluForwardAVX2(&out[0], &inp[0], n)
		}
	}
	geluForwardGo(out[n:], inp[n:])
}

// tanhSlice sets out[i] = tanh32(x[i]) (out may be x).
func tanhSlice(out, x []float32) {
	out = out[:len(x)]
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			tanhAVX2(&out[0], &x[0], n)
		}
	}
	for i := n; i < len(x); i++ {
		out[i] = tanh32(x[i])
	}
}

// geluBackwardSlice sets o = gelu'(x)·g elementwise (o may alias x or g).
func geluBackwardSlice(o, x, g []float32) {
	o, g = o[:len(x)], g[:len(x)]
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			geluBackwardAVX2(&o[0], &x[0], &g[0], n)
		}
	}
	geluBackwardGo(o[n:], x[n:], g[n:])
}

// expSubSum sets x[i] = expNeg32(x[i] - m) and returns Σ x[i] summed as
// the scalar softmax sums: four partial sums over i%4, the tail into the
// first, then (s0+s1)+(s2+s3). The kernel keeps exactly those sums.
func expSubSum(x []float32, m float32) float32 {
	var s [4]float32
	i := 0
	if useAVX2 {
		if i = len(x) &^ 7; i > 0 {
			expSubSumAVX2(&x[0], i, m, &s)
		}
	}
	for ; i+4 <= len(x); i += 4 {
		for k := range 4 {
			e := expNeg32(x[i+k] - m)
			x[i+k] = e
			s[k] += e
		}
	}
	for ; i < len(x); i++ {
		e := expNeg32(x[i] - m)
		x[i] = e
		s[0] += e
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// scale32 sets x[i] *= s.
func scale32(x []float32, s float32) {
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			scaleAVX2(&x[0], n, s)
		}
	}
	for i := n; i < len(x); i++ {
		x[i] *= s
	}
}

// bf16ToF32s widens src into dst (len(dst) elements), exactly.
func bf16ToF32s(dst []float32, src []uint16) {
	src = src[:len(dst)]
	n := 0
	if useAVX2 {
		if n = len(dst) &^ 7; n > 0 {
			bf16ToF32AVX2(&dst[0], &src[0], n)
		}
	}
	for i := n; i < len(dst); i++ {
		dst[i] = tensor.BF16ToF32(src[i])
	}
}

// f32ToBF16s rounds src into dst (len(src) elements) as tensor.BF16FromF32.
func f32ToBF16s(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		if n = len(src) &^ 15; n > 0 {
			f32ToBF16AVX2(&dst[0], &src[0], n)
		}
	}
	for i := n; i < len(src); i++ {
		dst[i] = tensor.BF16FromF32(src[i])
	}
}

// sum64 returns Σ x in float64 with sum64Go's four partial sums, the
// kernel adding the same values in the same order (the same bits).
func sum64(x []float32) float64 {
	if useAVX2 && len(x) >= 8 {
		var s [4]float64
		n := len(x) &^ 7
		sum64AVX2(&x[0], n, &s)
		return sum4Tail(s, x[n:], 0, false)
	}
	return sum64Go(x)
}

// sumSqDev64 returns Σ (x-m)² in float64, accumulated like sum64.
func sumSqDev64(x []float32, m float64) float64 {
	if useAVX2 && len(x) >= 8 {
		var s [4]float64
		n := len(x) &^ 7
		sumSqDev64AVX2(&x[0], n, m, &s)
		return sum4Tail(s, x[n:], m, true)
	}
	return sumSqDev64Go(x, m)
}

// sum4Tail continues the four partial sums s of sum64Go (sq: of
// sumSqDev64Go about m) over the rest x, fewer than 8 elements, and
// combines them as they do.
func sum4Tail(s [4]float64, x []float32, m float64, sq bool) float64 {
	term := func(v float32) float64 {
		if !sq {
			return float64(v)
		}
		d := float64(v) - m
		return d * d
	}
	i := 0
	for ; i+4 <= len(x); i += 4 {
		for k := range 4 {
			s[k] += term(x[i+k])
		}
	}
	for ; i < len(x); i++ {
		s[0] += term(x[i])
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// lnNorm sets o[j] = (s·(x[j]-m))·w[j] + b[j], layernorm's normalise and
// affine step.
func lnNorm(o, x, w, b []float32, m, s float32) {
	o, w, b = o[:len(x)], w[:len(x)], b[:len(x)]
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			lnNormAVX2(&o[0], &x[0], &w[0], &b[0], n, m, s)
		}
	}
	for j := n; j < len(x); j++ {
		nn := s * (x[j] - m)
		o[j] = nn*w[j] + b[j]
	}
}

// lnBwdSums returns layernorm backward's row sums Σ dn and Σ dn·nn in
// float64, with dn = w·g and nn = s·(x-m) in float32, as lnBwdSumsGo sums
// them; the kernel keeps exactly its partial sums.
func lnBwdSums(x, w, g []float32, m, s float32) (dm, dnm float64) {
	w, g = w[:len(x)], g[:len(x)]
	var p [16]float64
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			lnBwdSumsAVX2(&x[0], &w[0], &g[0], n, m, s, &p)
		}
	}
	return lnBwdSumsTail(x, w, g, m, s, n, &p)
}

// lnBwdSumsGo is lnBwdSums' pure-Go reference: for the multiple-of-8
// prefix, eight partial sums of each over j%8, combined as
// ((p0+p4)+(p1+p5)) + ((p2+p6)+(p3+p7)); then the tail in order of j.
func lnBwdSumsGo(x, w, g []float32, m, s float32) (dm, dnm float64) {
	var p [16]float64
	return lnBwdSumsTail(x, w[:len(x)], g[:len(x)], m, s, 0, &p)
}

// lnBwdSumsTail adds j in [n, len(x)&^7) into the partial sums p (Σ dn in
// p[0:8], Σ dn·nn in p[8:16], holding the prefix before n), combines them
// and adds the tail.
func lnBwdSumsTail(x, w, g []float32, m, s float32, n int, p *[16]float64) (dm, dnm float64) {
	e := len(x) &^ 7
	for j0 := n; j0 < e; j0 += 8 {
		for k := range 8 {
			j := j0 + k
			nn := float32(s * float32(x[j]-m)) // rounded: no FMA
			dn := float32(w[j] * g[j])
			p[k] += float64(dn)
			p[8+k] += float64(float32(dn * nn))
		}
	}
	dm = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]))
	dnm = ((p[8] + p[12]) + (p[9] + p[13])) + ((p[10] + p[14]) + (p[11] + p[15]))
	for j := e; j < len(x); j++ {
		nn := float32(s * float32(x[j]-m))
		dn := float32(w[j] * g[j])
		dm += float64(dn)
		dnm += float64(float32(dn * nn))
	}
	return dm, dnm
}

// lnBwdRow accumulates one row's layernorm gradients: db += g,
// dw += nn·g, di += s·(dn - dmf - nn·dnmf).
func lnBwdRow(di, dw, db, x, w, g []float32, m, s, dmf, dnmf float32) {
	di, dw, db, w, g = di[:len(x)], dw[:len(x)], db[:len(x)], w[:len(x)], g[:len(x)]
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			lnBwdRowAVX2(&di[0], &dw[0], &db[0], &x[0], &w[0], &g[0], n, m, s, dmf, dnmf)
		}
	}
	for j := n; j < len(x); j++ {
		nn := s * (x[j] - m)
		dn := w[j] * g[j]
		db[j] += g[j]
		dw[j] += nn * g[j]
		di[j] += s * (dn - dmf - nn*dnmf)
	}
}

// adamKernelConsts is adamWAVX2's view of one update's scalars (layout
// fixed by the assembly: nine 4-byte fields).
type adamKernelConsts struct {
	GS, Decay, W, B2, W2, BC2, Eps, Step float32
	BaseM                                uint32 // all ones: m + W·(g-m) (Small); 0: g + W·(g-m)
}

// adamWMaster runs the AdamW update of p, m, v from g (adamWChunk's
// arithmetic on the master weights; the caller writes the work copy).
func adamWMaster(p, g, m, v []float32, decay bool, c adamConsts) {
	n := 0
	if useAVX2 {
		if n = len(p) &^ 7; n > 0 {
			k := adamKernelConsts{GS: 1, Decay: 1, W: c.W1 - 1, B2: c.B2, W2: c.W2, BC2: c.BC2, Eps: c.Eps, Step: c.Step}
			if c.Scaled {
				k.GS = c.GS
			}
			if decay {
				k.Decay = c.Decay
			}
			if c.Small {
				k.W, k.BaseM = c.W1, ^uint32(0)
			}
			g, m, v = g[:n], m[:n], v[:n]
			adamWAVX2(&p[0], &g[0], &m[0], &v[0], n, &k)
		}
	}
	adamWMasterGo(p[n:], g[n:], m[n:], v[n:], decay, c)
}

// add32 sets dst[i] += src[i] over len(src).
func add32(dst, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if useAVX2 {
		if n = len(src) &^ 7; n > 0 {
			addAVX2(&dst[0], &src[0], n)
		}
	}
	for i := n; i < len(src); i++ {
		dst[i] += src[i]
	}
}

// max32 returns the largest element of x (len(x) >= 1), NaNs skipped
// unless first, as the scalar loop m = x[0]; if v > m { m = v }. The kernel
// starts eight lane maxima from x[0..8), so a NaN among them is kept
// where the scalar loop would skip it: either way the softmax of such a
// row is NaN.
func max32(x []float32) float32 {
	n := 0
	m := x[0]
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			m = maxAVX2(&x[0], n)
		}
	}
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	return m
}

// dot32 returns Σ a[i]·b[i] over len(a) in float32 as dot32Go sums it;
// the kernel keeps exactly its eight partial sums.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	n := 0
	if useAVX2 {
		if n = len(a) &^ 7; n > 0 {
			dot8AVX2(&a[0], &b[0], n, &s)
		}
	}
	return dot32Tail(a, b, n, &s)
}

// dot32Go is dot32's pure-Go reference: eight partial sums over i%8 (each
// product rounded before its add) for the multiple-of-8 prefix, combined
// as ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then the tail in order of i.
func dot32Go(a, b []float32) float32 {
	b = b[:len(a)]
	var s [8]float32
	return dot32Tail(a, b, 0, &s)
}

// dot32Tail adds a[i]·b[i] for i in [n, len(a)&^7) into the partial sums
// s (which hold the prefix before n), combines them and adds the tail.
func dot32Tail(a, b []float32, n int, s *[8]float32) float32 {
	m := len(a) &^ 7
	for i := n; i < m; i += 8 {
		for k := range 8 {
			s[k] += float32(a[i+k] * b[i+k]) // rounded product: no FMA
		}
	}
	t := ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
	for i := m; i < len(a); i++ {
		t += float32(a[i] * b[i])
	}
	return t
}

// ceGrad sets x[i] = float32(float64(x[i])·inv)·dscale, the cross-entropy
// gradient's scaling of the exponentials.
func ceGrad(x []float32, inv float64, dscale float32) {
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			ceGradAVX2(&x[0], n, inv, dscale)
		}
	}
	for j := n; j < len(x); j++ {
		x[j] = float32(float64(x[j])*inv) * dscale
	}
}

// addInto sets t[off+i] += v[i], rounding to t's dtype: one pass of the
// kernel for BF16 (widen, add, round), add32 for F32, and for F16 a widened
// block added and rounded back.
func addInto(t *tensor.Tensor, off int, v []float32) {
	switch t.DType {
	case tensor.F32:
		add32(t.F32()[off:off+len(v)], v)
		return
	case tensor.BF16:
		dst := t.U16()[off : off+len(v)]
		n := 0
		if useAVX2 {
			if n = len(v) &^ 15; n > 0 {
				addToBF16AVX2(&dst[0], &v[0], n)
			}
		}
		for i := n; i < len(v); i++ {
			dst[i] = tensor.BF16FromF32(tensor.BF16ToF32(dst[i]) + v[i])
		}
		return
	}
	const blk = 1 << 10
	var buf [blk]float32
	for lo := 0; lo < len(v); lo += blk {
		hi := min(lo+blk, len(v))
		cur := buf[:hi-lo]
		load(cur, t, off+lo)
		add32(cur, v[lo:hi])
		store(t, off+lo, cur)
	}
}

// biasRoundBF16 sets dst[i] = bf16(y[i] + b[i]) over len(y): add32 then
// f32ToBF16s in one pass, the same bits.
func biasRoundBF16(dst []uint16, y, b []float32) {
	dst, b = dst[:len(y)], b[:len(y)]
	n := 0
	if useAVX2 {
		if n = len(y) &^ 7; n > 0 {
			biasRoundBF16AVX2(&dst[0], &y[0], &b[0], n)
		}
	}
	for i := n; i < len(y); i++ {
		dst[i] = tensor.BF16FromF32(y[i] + b[i])
	}
}

// biasGeluBF16 sets, with v = y[i] + b[i], pre[i] = bf16(v) and out[i] =
// bf16(gelu(v)) over len(y): add32, the rounding store of pre and
// geluForward rounded into out in one pass, the same bits.
func biasGeluBF16(pre, out []uint16, y, b []float32) {
	pre, out, b = pre[:len(y)], out[:len(y)], b[:len(y)]
	n := 0
	if useAVX2 {
		if n = len(y) &^ 7; n > 0 {
			biasGeluBF16AVX2(&pre[0], &out[0], &y[0], &b[0], n)
		}
	}
	biasGeluBF16Go(pre[n:], out[n:], y[n:], b[n:])
}

// biasGeluBF16Go is biasGeluBF16's pure-Go reference.
func biasGeluBF16Go(pre, out []uint16, y, b []float32) {
	var buf [64]float32
	for lo := 0; lo < len(y); lo += len(buf) {
		v := buf[:min(len(buf), len(y)-lo)]
		for i := range v {
			v[i] = y[lo+i] + b[lo+i]
			pre[lo+i] = tensor.BF16FromF32(v[i])
		}
		geluForwardGo(v, v)
		for i, g := range v {
			out[lo+i] = tensor.BF16FromF32(g)
		}
	}
}

// geluBackwardMix sets y[i] = gelu'(x[i])·y[i], x widened from bf16, and
// dst[i] = bf16(y[i]) over len(y): widening, geluBackwardSlice and the
// rounding store in one pass, the same bits.
func geluBackwardMix(dst []uint16, y []float32, x []uint16) {
	dst, x = dst[:len(y)], x[:len(y)]
	n := 0
	if useAVX2 {
		if n = len(y) &^ 7; n > 0 {
			geluBackwardMixAVX2(&dst[0], &y[0], &x[0], n)
		}
	}
	geluBackwardMixGo(dst[n:], y[n:], x[n:])
}

// geluBackwardMixGo is geluBackwardMix's pure-Go reference.
func geluBackwardMixGo(dst []uint16, y []float32, x []uint16) {
	var buf [64]float32
	for lo := 0; lo < len(y); lo += len(buf) {
		hi := min(lo+len(buf), len(y))
		xw := buf[:hi-lo]
		for i := range xw {
			xw[i] = tensor.BF16ToF32(x[lo+i])
		}
		geluBackwardGo(y[lo:hi], xw, y[lo:hi])
		for i, v := range y[lo:hi] {
			dst[lo+i] = tensor.BF16FromF32(v)
		}
	}
}

// roundKeepBF16 sets dst[i] = bf16(x[i]) and x[i] to that value widened,
// over len(x): f32ToBF16s then bf16ToF32s back, in one pass.
func roundKeepBF16(dst []uint16, x []float32) {
	dst = dst[:len(x)]
	n := 0
	if useAVX2 {
		if n = len(x) &^ 7; n > 0 {
			roundKeepBF16AVX2(&dst[0], &x[0], n)
		}
	}
	for i := n; i < len(x); i++ {
		dst[i] = tensor.BF16FromF32(x[i])
		x[i] = tensor.BF16ToF32(dst[i])
	}
}
