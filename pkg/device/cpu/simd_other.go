//go:build !amd64

package cpu

// Without amd64 assembly every kernel runs its pure-Go loop.
const haveAVX2, haveAVX512 = false, false

func geluForwardAVX2(out, x *float32, n int) { panic("cpu: no AVX2 kernels on this architecture") }
func tanhAVX2(out, x *float32, n int)        { panic("cpu: no AVX2 kernels on this architecture") }
func geluBackwardAVX2(dinp, x, dout *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func expSubSumAVX2(x *float32, n int, m float32, sums *[4]float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func scaleAVX2(x *float32, n int, s float32) { panic("cpu: no AVX2 kernels on this architecture") }
func bf16ToF32AVX2(dst *float32, src *uint16, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func f32ToBF16AVX2(dst *uint16, src *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func sum64AVX2(x *float32, n int, sums *[4]float64) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func sumSqDev64AVX2(x *float32, n int, m float64, sums *[4]float64) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func lnNormAVX2(o, x, w, b *float32, n int, m, s float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func lnBwdRowAVX2(di, dw, db, x, w, gr *float32, n int, m, s, dmf, dnmf float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func adamWAVX2(p, gr, m, v *float32, n int, c *adamKernelConsts) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func addAVX2(dst, src *float32, n int)  { panic("cpu: no AVX2 kernels on this architecture") }
func maxAVX2(x *float32, n int) float32 { panic("cpu: no AVX2 kernels on this architecture") }
func softmaxBwdAVX2(a, da *float32, n int, s, scale float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func ceGradAVX2(x *float32, n int, inv float64, dscale float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func addToBF16AVX2(dst *uint16, src *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func geluBackwardBF16AVX2(dinp, x, dout *uint16, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func geluForwardBF16AVX2(out *uint16, x *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func dot8AVX2(a, b *float32, n int, sums *[8]float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func lnBwdSumsAVX2(x, w, gr *float32, n int, m, s float32, sums *[16]float64) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func biasRoundBF16AVX2(dst *uint16, y, b *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func biasGeluBF16AVX2(pre, out *uint16, y, b *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func geluBackwardMixAVX2(dst *uint16, y *float32, x *uint16, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func roundKeepBF16AVX2(dst *uint16, x *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func gemv4F32AVX2(w *float32, ldw int, x *float32, n int, acc *[32]float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func gemv4BF16AVX2(w *uint16, ldw int, x *float32, n int, acc *[32]float32) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func dotFMAAVX2(a, b *float32, n int) float32  { panic("cpu: no AVX2 kernels on this architecture") }
func axpyAVX2(y, x *float32, a float32, n int) { panic("cpu: no AVX2 kernels on this architecture") }

func wsumF32AVX2(o *float32, v *float32, ldv int, a *float32, n int, cols int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func gemvRowsF32AVX2(w *float32, C int, x *float32, out *float32, quads int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func gemvRowsBF16AVX2(w *uint16, C int, x *float32, out *float32, quads int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func gemvPairs4F32AVX2(w *float32, C int, xs *[4]*float32, outs *[4]*float32, pairs int) {
	panic("cpu: no AVX2 kernels on this architecture")
}

func gemvPairs4BF16AVX2(w *uint16, C int, xs *[4]*float32, outs *[4]*float32, pairs int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
