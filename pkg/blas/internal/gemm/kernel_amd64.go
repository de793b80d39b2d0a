//go:build !purego

package gemm

import (
	"os"
	"reflect"

	"golang.org/x/sys/cpu"
)

// kern6x16AVX2 is the AVX2 + FMA micro-kernel (kernel_amd64.s): see
// Kernel for its contract, with mr = 6 and nr = 16.
//
//go:noescape
func kern6x16AVX2(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)

// packBT16AVX2 packs 8·n8 steps of 16 rows of B (row stride ldb) into a
// k-major panel: d[p·16 + j] = b[j·ldb + p] (8×8 transposes in registers).
//
//go:noescape
func packBT16AVX2(b *float32, ldb int, n8 int, d *float32)

// packBN16AVX2 copies kb steps of 16 floats (step stride ldb) into a
// k-major panel: d[p·16 + j] = b[p·ldb + j].
//
//go:noescape
func packBN16AVX2(b *float32, ldb int, kb int, d *float32)

// kern6x16AVX512 is the AVX-512F micro-kernel (kernel_avx512_amd64.s):
// kern6x16AVX2's tile, arithmetic and results, with each row of the tile in
// one zmm register.
//
//go:noescape
func kern6x16AVX512(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)

// kern6x32AVX512 computes two adjacent 6x16 tiles of C from two adjacent
// packed B panels (the second at b + 16·k), each element with the 6x16
// kernels' FMAs in their order (kernel_avx512_amd64.s).
//
//go:noescape
func kern6x32AVX512(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)

// kern6x16AVX512PC identifies kern6x16AVX512 among Kernel values (Go func
// values cannot be compared; their code pointers can).
var kern6x16AVX512PC = reflect.ValueOf(kern6x16AVX512).Pointer()

// wideOf returns the kernel that computes two adjacent tiles at once for
// kern (kern6x32AVX512 for kern6x16AVX512), or nil.
func wideOf(kern Kernel) Kernel {
	if hasAVX512 && reflect.ValueOf(kern).Pointer() == kern6x16AVX512PC {
		return kern6x32AVX512
	}
	return nil
}

// hasAVX2 reports whether the CPU and the OS support AVX2 and FMA (x/sys/cpu
// checks that the OS saves the YMM state).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasAVX

// EnvISA names the environment variable (shared with pkg/device/cpu) whose
// values "avx2" and "generic" keep Asm on the AVX2 kernel where the CPU has
// AVX-512 too (the tests run both paths).
const EnvISA = "DRUTO_CPU_ISA"

// hasAVX512 reports whether the CPU and the OS support AVX-512F (x/sys/cpu
// checks that the OS saves the ZMM and opmask state).
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F

// useAVX512 selects the AVX-512 micro-kernel in Asm.
var useAVX512 = hasAVX512 && os.Getenv(EnvISA) != "avx2" && os.Getenv(EnvISA) != "generic"

// Asm returns the assembly micro-kernel of this CPU and its instruction set,
// or false when there is none: AVX-512F where the CPU has it (unless
// DRUTO_CPU_ISA is "avx2" or "generic"), else AVX2 + FMA. Both give the
// same bits (same FMAs in the same order).
func Asm() (Kernel, string, bool) {
	switch {
	case useAVX512:
		return kern6x16AVX512, ISAAVX512, true
	case hasAVX2:
		return kern6x16AVX2, "AVX2+FMA", true
	}
	return nil, "", false
}

// AsmAll returns every assembly micro-kernel this CPU runs, by instruction
// set (for tests and benchmarks; empty without any).
func AsmAll() map[string]Kernel {
	ks := map[string]Kernel{}
	if hasAVX2 {
		ks["AVX2+FMA"] = kern6x16AVX2
	}
	if hasAVX512 {
		ks[ISAAVX512] = kern6x16AVX512
	}
	return ks
}

// packBT16Asm packs steps [0, 8·(kb/8)) of packBT16's panel with AVX2 and
// returns how many it packed (0 without AVX2).
func packBT16Asm(b []float32, ldb, base, kb int, d []float32) int {
	n8 := kb / 8
	if !hasAVX2 || n8 == 0 {
		return 0
	}
	_ = b[base+15*ldb+8*n8-1] // every row's last element read
	_ = d[8*n8*nr-1]
	packBT16AVX2(&b[base], ldb, n8, &d[0])
	return 8 * n8
}

// packBN16Asm packs a full panel of a row-major B (kb steps of 16 floats
// from b[base], step stride ldb) into d with AVX2 and reports whether it
// did (false without AVX2).
func packBN16Asm(b []float32, ldb, base, kb int, d []float32) bool {
	if !hasAVX2 {
		return false
	}
	_ = b[base+(kb-1)*ldb+nr-1] // the last step's last element
	_ = d[kb*nr-1]
	packBN16AVX2(&b[base], ldb, kb, &d[0])
	return true
}

// widenBN16AVX2 packs kb steps of 16 bf16 values of a row-major B (step
// stride ldb) into a k-major fp32 panel, widening them:
// d[p·16 + j] = bf16(b[p·ldb + j]).
//
//go:noescape
func widenBN16AVX2(b *uint16, ldb int, kb int, d *float32)

// widenAVX2 widens 8·n8 bf16 values: d[i] = bf16(s[i]).
//
//go:noescape
func widenAVX2(d *float32, s *uint16, n8 int)

// widenBN16Asm packs a full panel of a row-major bf16 B (kb steps of 16
// values from b[base], step stride ldb) into d with AVX2 and reports
// whether it did (false without AVX2).
func widenBN16Asm(b []uint16, ldb, base, kb int, d []float32) bool {
	if !hasAVX2 {
		return false
	}
	_ = b[base+(kb-1)*ldb+nr-1] // the last step's last element
	_ = d[kb*nr-1]
	widenBN16AVX2(&b[base], ldb, kb, &d[0])
	return true
}

// widenAsm widens the multiple-of-8 prefix of s into d with AVX2 and
// returns its length (0 without AVX2).
func widenAsm(d []float32, s []uint16) int {
	n8 := len(s) / 8
	if !hasAVX2 || n8 == 0 {
		return 0
	}
	_ = d[8*n8-1]
	widenAVX2(&d[0], &s[0], n8)
	return 8 * n8
}

// kernDot6x16 is the AVX512_BF16 pair kernel (kernel_dot_amd64.s): see
// DotKernel, with mr = 6 and nr = 16.
//
//go:noescape
func kernDot6x16(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32)

// kernDot6x32 computes two adjacent 6x16 tiles from two adjacent packed
// pair panels (the second at b + 16·kp), with kernDot6x16's arithmetic.
//
//go:noescape
func kernDot6x32(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32)

// packBNDotAVX2 interleaves np pairs of rows of 16 bf16 columns (row
// stride ldb) into a pair panel: d[q·16 + j] = b[2q·ldb + j] | b[(2q+1)·ldb + j]<<16.
//
//go:noescape
func packBNDotAVX2(b *uint16, ldb int, np int, d *uint32)

// ISADot names the AVX512_BF16 pair kernels (DotAsm).
const ISADot = "AVX512_BF16"

// hasAVX512BF16 reports whether the CPU has VDPBF16PS (CPUID leaf 7
// subleaf 1, EAX bit 5) with the AVX-512 state saved by the OS.
var hasAVX512BF16 = hasAVX512 && cpu.X86.HasAVX512BF16

// useDot selects the pair kernels in DotAsm: DRUTO_CPU_ISA "avx512" keeps
// the bf16 products on the AVX-512F widening kernel, "avx2" and "generic"
// on the AVX2 one (useAVX512 is false then).
var useDot = hasAVX512BF16 && useAVX512 && os.Getenv(EnvISA) != "avx512"

// DotAsm returns the pair kernels of this CPU (one tile, two tiles) and
// their instruction set, or false when there are none or DRUTO_CPU_ISA
// asks for an older kernel.
func DotAsm() (kern, wide DotKernel, isa string, ok bool) {
	if !useDot {
		return nil, nil, "", false
	}
	return kernDot6x16, kernDot6x32, ISADot, true
}

// DotAsmAll returns the pair kernels this CPU runs, whatever DRUTO_CPU_ISA
// says (for tests and benchmarks).
func DotAsmAll() (kern, wide DotKernel, ok bool) {
	if !hasAVX512BF16 {
		return nil, nil, false
	}
	return kernDot6x16, kernDot6x32, true
}

// packBNDotAsm packs np pair steps of a full panel of a row-major bf16 B
// (from b[base], row stride ldb) into d with AVX2 and reports whether it
// did (false without AVX2).
func packBNDotAsm(b []uint16, ldb, base, np int, d []uint32) bool {
	if !hasAVX2 {
		return false
	}
	_ = b[base+(2*np-1)*ldb+nr-1] // the last odd row's last element
	_ = d[np*nr-1]
	packBNDotAVX2(&b[base], ldb, np, &d[0])
	return true
}

// packATDotAVX2 packs nq pair steps of np full panels of a transposed bf16
// A into pair panels (kernel_dot_amd64.s): see packATDotAsm.
//
//go:noescape
func packATDotAVX2(a *uint16, lda int, np int, nq int, d *uint32, pstride int)

// packATDotAsm packs pair steps [0, nq) of the first np full 6-row panels
// of a transposed bf16 A (stored k×m, row stride lda; panel p's row i of
// step q from a[base + 2q·lda + 6p + i] and the next row) into d (panel
// stride pstride dwords) with AVX2, and returns how many panels it packed:
// fewer than np where the last one's reads (two values past the panel)
// would leave a, 0 without AVX2.
func packATDotAsm(a []uint16, lda, base, np, nq int, d []uint32, pstride int) int {
	if !hasAVX2 || np == 0 || nq == 0 {
		return 0
	}
	if base+(2*nq-1)*lda+mr*np+1 >= len(a) {
		np-- // the last panel's over-read would leave a
	}
	if np == 0 {
		return 0
	}
	_ = a[base+(2*nq-1)*lda+mr*np+1]
	_ = d[(np-1)*pstride+nq*mr-1]
	packATDotAVX2(&a[base], lda, np, nq, &d[0], pstride)
	return np
}
