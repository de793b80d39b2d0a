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
