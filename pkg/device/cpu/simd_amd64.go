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
func expSubSumAVX2(x *float32, n int, m float32) float32

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)
