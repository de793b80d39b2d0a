package blas

import (
	"math"
	"runtime"
	"sync"

	"github.com/druto/druto/pkg/blas/internal/gemm"
)

// Mat is an operand of SgemmBF16: fp32 elements in F32, or, when F32 is
// nil, bf16 bit patterns (the high half of an fp32) in BF16.
type Mat struct {
	F32  []float32
	BF16 []uint16
}

// len returns the operand's number of elements.
func (x Mat) len() int {
	if x.F32 != nil {
		return len(x.F32)
	}
	return len(x.BF16)
}

// from returns the operand from element off on.
func (x Mat) from(off int) Mat {
	if x.F32 != nil {
		return Mat{F32: x.F32[off:]}
	}
	return Mat{BF16: x.BF16[off:]}
}

// FusedBF16 reports whether SgemmBF16 widens bf16 operands inside its
// packing (druto's assembly SGEMM, on CPUs with AVX2 + FMA) rather than
// into an fp32 copy for Sgemm.
func FusedBF16() bool {
	_, _, ok := gemm.Asm()
	return ok
}

// DotBF16 reports whether SgemmBF16 multiplies two bf16 operands with the
// AVX512_BF16 pair kernel (VDPBF16PS), and names its instruction set.
func DotBF16() (string, bool) {
	_, _, isa, ok := gemm.DotAsm()
	return isa, ok
}

// PreferFusedBF16 reports whether SgemmBF16's fused path is the better
// choice for bf16 operands even with a native library loaded: where druto's
// kernel is the AVX-512 one, which widens bf16 inside its packing faster
// than OpenBLAS's fp32 kernels make up for the copies; druto's AVX2 kernel
// is no faster than the copies (BenchmarkStepBF16Paths in pkg/device/cpu
// compares the two paths).
func PreferFusedBF16() bool {
	_, isa, ok := gemm.Asm()
	return ok && isa == gemm.ISAAVX512
}

// SgemmBF16 is Sgemm with operands that may be bf16 (Mat.BF16). With
// FusedBF16, a product with a bf16 operand runs druto's assembly SGEMM
// (even when a native library is loaded: Debian's OpenBLAS has no bf16
// product), which widens those operands exactly as it packs them, so no
// fp32 copy is made; it is spread over goroutines as Sgemm spreads a large
// product. Its micro-kernel is AVX-512F where the CPU has it (the default
// choice for bf16 operands there, see PreferFusedBF16), else AVX2 + FMA.
// Otherwise bf16 operands are widened into fp32 copies for Sgemm. Both
// operands fp32: Sgemm itself. The result is the fp32 product of the
// widened operands (bf16·bf16 products are exact in fp32).
//
// When both operands are bf16 and the CPU has AVX512_BF16 (DotBF16), the
// product runs a kernel that takes k two steps at a time (VDPBF16PS) on
// operands packed as bf16 pairs: the same exact products, summed in fp32 in
// a different order (a pair at a time, denormals flushed to zero), so
// within fp32 rounding of the widening kernel's result, not bit for bit.
// DRUTO_CPU_ISA=avx512 keeps such products on the widening AVX-512F kernel.
// An fp32 operand is never rounded to bf16: a product with one goes through
// the widening kernels.
func SgemmBF16(transA, transB bool, m, n, k int, alpha float32, a Mat, lda int, b Mat, ldb int, beta float32, c []float32, ldc int) error {
	if a.BF16 == nil && b.BF16 == nil || a.F32 != nil && b.F32 != nil {
		return Sgemm(transA, transB, m, n, k, alpha, a.F32, lda, b.F32, ldb, beta, c, ldc)
	}
	if err := checkLens(transA, transB, m, n, k, a.len(), lda, b.len(), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	kern, _, ok := gemm.Asm()
	if !ok {
		af, bf := a.F32, b.F32
		if af == nil {
			af = widenAll(a.BF16)
		}
		if bf == nil {
			bf = widenAll(b.BF16)
		}
		return Sgemm(transA, transB, m, n, k, alpha, af, lda, bf, ldb, beta, c, ldc)
	}
	p := int(threads.Load())
	if p == 0 {
		p = runtime.GOMAXPROCS(0)
	}
	dk, dw, _, dot := gemm.DotAsm()
	run := func(transA, transB bool, m, n, k int, a Mat, b Mat, c []float32) {
		if dot && a.BF16 != nil && b.BF16 != nil {
			gemm.SgemmDot(dk, dw, transA, transB, m, n, k, alpha, a.BF16, lda, b.BF16, ldb, beta, c, ldc)
			return
		}
		gemm.SgemmSrc(kern, transA, transB, m, n, k, alpha, gemm.Src{F32: a.F32, BF16: a.BF16}, lda, gemm.Src{F32: b.F32, BF16: b.BF16}, ldb, beta, c, ldc)
	}
	if p < 2 || float64(m)*float64(n)*float64(k) < splitMin {
		run(transA, transB, m, n, k, a, b, c)
		return nil
	}
	// As split: blocks of rows of C (and op(A)) when C has at least as
	// many rows as columns, else blocks of its columns (and op(B)).
	byRows := m >= n
	extent := n
	if byRows {
		extent = m
	}
	chunk := roundUp((extent+p-1)/p, splitAlign)
	part := func(lo, hi int) {
		if byRows {
			ao := lo * lda
			if transA {
				ao = lo
			}
			run(transA, transB, hi-lo, n, k, a.from(ao), b, c[lo*ldc:])
			return
		}
		bo := lo
		if transB {
			bo = lo * ldb
		}
		run(transA, transB, m, hi-lo, k, a, b.from(bo), c[lo:])
	}
	var wg sync.WaitGroup
	for lo := chunk; lo < extent; lo += chunk {
		wg.Go(func() { part(lo, min(lo+chunk, extent)) })
	}
	part(0, min(chunk, extent))
	wg.Wait()
	return nil
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// widenAll returns an fp32 copy of bf16 values (the path without the
// assembly SGEMM).
func widenAll(h []uint16) []float32 {
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = math.Float32frombits(uint32(v) << 16)
	}
	return f
}
