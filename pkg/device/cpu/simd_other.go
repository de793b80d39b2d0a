//go:build !amd64

package cpu

// Without amd64 assembly every kernel runs its pure-Go loop.
const haveAVX2, haveAVX512 = false, false

func geluForwardAVX2(out, x *float32, n int) { panic("cpu: no AVX2 kernels on this architecture") }
func tanhAVX2(out, x *float32, n int)        { panic("cpu: no AVX2 kernels on this architecture") }
func geluBackwardAVX2(dinp, x, dout *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func expSubSumAVX2(x *float32, n int, m float32) float32 {
	panic("cpu: no AVX2 kernels on this architecture")
}
func scaleAVX2(x *float32, n int, s float32) { panic("cpu: no AVX2 kernels on this architecture") }
func bf16ToF32AVX2(dst *float32, src *uint16, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
func f32ToBF16AVX2(dst *uint16, src *float32, n int) {
	panic("cpu: no AVX2 kernels on this architecture")
}
