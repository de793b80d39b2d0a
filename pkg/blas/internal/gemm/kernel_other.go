//go:build !amd64 || purego

package gemm

// Asm reports that this architecture (or a purego build) has no assembly
// micro-kernel.
func Asm() (Kernel, string, bool) { return nil, "", false }
