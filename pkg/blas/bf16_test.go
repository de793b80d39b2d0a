package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/pkg/blas/internal/gemm"
)

// TestSgemmBF16 checks SgemmBF16 with bf16 operands (A, B or both) against
// Sgemm on fp32 copies of them: bit for bit on the packed backend (the same
// kernel and blocking, whatever the library in use), within the products'
// rounding otherwise and with both in bf16 on the AVX512_BF16 pair kernel; products large enough to be split over goroutines by
// rows and by columns, beta 0 on NaN-poisoned C and beta 1, every
// transposition and padded strides. C outside the product stays NaN.
func TestSgemmBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	bf := func(n int) ([]uint16, []float32) {
		h, f := make([]uint16, n), make([]float32, n)
		for i := range h {
			h[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			f[i] = math.Float32frombits(uint32(h[i]) << 16)
		}
		return h, f
	}
	exact := FusedBF16() // SgemmBF16 runs the packed backend on bf16 operands
	// Two bf16 operands on the pair kernel: the same products summed in
	// another order, so within rounding, not bit for bit.
	_, dot := DotBF16()
	defer SetThreads(0)
	for _, p := range []int{1, 2, 3} {
		SetThreads(p)
		for _, s := range [][3]int{{7, 9, 5}, {1024, 128, 128}, {128, 512, 1024}, {300, 260, 70}, {33, 700, 40}} {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, which := range []string{"A", "B", "AB"} {
						for _, beta := range []float32{0, 1} {
							lda, ldb, ldc := k+1, n+3, n+2
							ar, br := m, k
							if ta {
								lda, ar = m+1, k
							}
							if tb {
								ldb, br = k+3, n
							}
							ah, af := bf(ar * lda)
							bh, bfv := bf(br * ldb)
							_, c0 := bf(m * ldc)
							want, got := make([]float32, m*ldc), make([]float32, m*ldc)
							for i := range want {
								if beta == 0 || i%ldc >= n {
									want[i], got[i] = float32(math.NaN()), float32(math.NaN())
								} else {
									want[i], got[i] = c0[i], c0[i]
								}
							}
							if kern, _, ok := gemm.Asm(); ok && exact {
								// One unsplit call: each element of C is one
								// kernel's sum over all of k, however split.
								packedBackend{kern: kern}.sgemm(ta, tb, m, n, k, 0.75, af, lda, bfv, ldb, beta, want, ldc)
							} else if err := Sgemm(ta, tb, m, n, k, 0.75, af, lda, bfv, ldb, beta, want, ldc); err != nil {
								t.Fatal(err)
							}
							a, b := Mat{F32: af}, Mat{F32: bfv}
							if which != "B" {
								a = Mat{BF16: ah}
							}
							if which != "A" {
								b = Mat{BF16: bh}
							}
							if err := SgemmBF16(ta, tb, m, n, k, 0.75, a, lda, b, ldb, beta, got, ldc); err != nil {
								t.Fatal(err)
							}
							tag := fmt.Sprintf("threads %d m%d n%d k%d ta=%v tb=%v bf16 %s beta %v", p, m, n, k, ta, tb, which, beta)
							for i := range m {
								for j := range ldc {
									g, w := got[i*ldc+j], want[i*ldc+j]
									if j >= n {
										if !math.IsNaN(float64(g)) {
											t.Fatalf("%s: C[%d][%d] outside the product written: %v", tag, i, j, g)
										}
										continue
									}
									ok := math.Float32bits(g) == math.Float32bits(w)
									if !exact || which == "AB" && dot {
										ok = math.Abs(float64(g-w)) <= 1e-4*math.Sqrt(float64(k))*(1+math.Abs(float64(w)))
									}
									if !ok || math.IsNaN(float64(g)) {
										t.Fatalf("%s: C[%d][%d] = %v, want %v", tag, i, j, g, w)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestSgemmBF16Args checks that SgemmBF16 refuses operands too short for
// their shapes, bf16 ones included, with ErrArg.
func TestSgemmBF16Args(t *testing.T) {
	c := make([]float32, 4*4)
	a := Mat{BF16: make([]uint16, 4*4-1)}
	b := Mat{F32: make([]float32, 4*4)}
	if err := SgemmBF16(false, false, 4, 4, 4, 1, a, 4, b, 4, 0, c, 4); !errors.Is(err, ErrArg) {
		t.Errorf("short bf16 A: err = %v, want ErrArg", err)
	}
	if err := SgemmBF16(false, false, 4, 4, 4, 1, b, 4, Mat{BF16: make([]uint16, 3)}, 4, 0, c, 4); !errors.Is(err, ErrArg) {
		t.Errorf("short bf16 B: err = %v, want ErrArg", err)
	}
}
