//go:build !purego

package gemm

import "golang.org/x/sys/cpu"

// kern6x16AVX2 is the AVX2 + FMA micro-kernel (kernel_amd64.s): see
// Kernel for its contract, with mr = 6 and nr = 16.
//
//go:noescape
func kern6x16AVX2(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)

// hasAVX2 reports whether the CPU and the OS support AVX2 and FMA (x/sys/cpu
// checks that the OS saves the YMM state).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// Asm returns the assembly micro-kernel of this CPU and its instruction set,
// or false when there is none.
func Asm() (Kernel, string, bool) {
	if !hasAVX2 {
		return nil, "", false
	}
	return kern6x16AVX2, "AVX2+FMA", true
}
