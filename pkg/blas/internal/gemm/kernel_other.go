//go:build !amd64 || purego

package gemm

// Asm reports that this architecture (or a purego build) has no assembly
// micro-kernel.
func Asm() (Kernel, string, bool) { return nil, "", false }

// AsmAll returns no kernels here.
func AsmAll() map[string]Kernel { return map[string]Kernel{} }

// wideOf returns nil: no two-tile kernel here.
func wideOf(kern Kernel) Kernel { return nil }

// packBT16Asm packs nothing here: packBT16 does it in Go.
func packBT16Asm(b []float32, ldb, base, kb int, d []float32) int { return 0 }

// packBN16Asm packs nothing here: packB does it in Go.
func packBN16Asm(b []float32, ldb, base, kb int, d []float32) bool { return false }

// widenBN16Asm packs nothing here: packB16 does it in Go.
func widenBN16Asm(b []uint16, ldb, base, kb int, d []float32) bool { return false }

// widenAsm widens nothing here: widen does it in Go.
func widenAsm(d []float32, s []uint16) int { return 0 }

// DotAsm reports that there are no pair kernels here.
func DotAsm() (kern, wide DotKernel, isa string, ok bool) { return nil, nil, "", false }

// DotAsmAll returns no pair kernels here.
func DotAsmAll() (kern, wide DotKernel, ok bool) { return nil, nil, false }

// packBNDotAsm packs nothing here: packBDot does it in Go.
func packBNDotAsm(b []uint16, ldb, base, np int, d []uint32) bool { return false }

// packATDotAsm packs nothing here: packADot does it in Go.
func packATDotAsm(a []uint16, lda, base, np, nq int, d []uint32, pstride int) int { return 0 }
