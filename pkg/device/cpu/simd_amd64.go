package cpu

import "golang.org/x/sys/cpu"

// haveAVX2 reports whether this CPU runs the AVX2 kernels of simd_amd64.s
// (AVX2 and FMA, with the OS saving the YMM registers, which x/sys/cpu
// checks through OSXSAVE/XGETBV).
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// haveAVX512 reports AVX-512F (used by nothing yet; said by ISA).
var haveAVX512 = cpu.X86.HasAVX512F

//go:noescape
func geluForwardAVX2(out, x *float32, n int)

//go:noescape
func tanhAVX2(out, x *float32, n int)

//go:noescape
func geluBackwardAVX2(dinp, x, dout *float32, n int)

//go:noescape
func expSubSumAVX2(x *float32, n int, m float32, sums *[4]float32)

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func sum64AVX2(x *float32, n int, sums *[4]float64)

//go:noescape
func sumSqDev64AVX2(x *float32, n int, m float64, sums *[4]float64)

//go:noescape
func lnNormAVX2(o, x, w, b *float32, n int, m, s float32)

//go:noescape
func lnBwdRowAVX2(di, dw, db, x, w, gr *float32, n int, m, s, dmf, dnmf float32)

//go:noescape
func adamWAVX2(p, gr, m, v *float32, n int, c *adamKernelConsts)

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func softmaxBwdAVX2(a, da *float32, n int, s, scale float32)

//go:noescape
func ceGradAVX2(x *float32, n int, inv float64, dscale float32)

//go:noescape
func addToBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func geluBackwardBF16AVX2(dinp, x, dout *uint16, n int)

//go:noescape
func geluForwardBF16AVX2(out *uint16, x *float32, n int)

//go:noescape
func dot8AVX2(a, b *float32, n int, sums *[8]float32)

//go:noescape
func lnBwdSumsAVX2(x, w, gr *float32, n int, m, s float32, sums *[16]float64)

//go:noescape
func biasRoundBF16AVX2(dst *uint16, y, b *float32, n int)

//go:noescape
func biasGeluBF16AVX2(pre, out *uint16, y, b *float32, n int)

//go:noescape
func geluBackwardMixAVX2(dst *uint16, y *float32, x *uint16, n int)

//go:noescape
func roundKeepBF16AVX2(dst *uint16, x *float32, n int)

//go:noescape
func gemv4F32AVX2(w *float32, ldw int, x *float32, n int, acc *[32]float32)

//go:noescape
func gemv4BF16AVX2(w *uint16, ldw int, x *float32, n int, acc *[32]float32)

//go:noescape
func dotFMAAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(y, x *float32, a float32, n int)

//go:noescape
func wsumF32AVX2(o *float32, v *float32, ldv int, a *float32, n int, cols int)

//go:noescape
func gemvRowsF32AVX2(w *float32, C int, x *float32, out *float32, quads int)

//go:noescape
func gemvRowsBF16AVX2(w *uint16, C int, x *float32, out *float32, quads int)

//go:noescape
func gemvPairs4F32AVX2(w *float32, C int, xs *[4]*float32, outs *[4]*float32, pairs int)

//go:noescape
func gemvPairs4BF16AVX2(w *uint16, C int, xs *[4]*float32, outs *[4]*float32, pairs int)
