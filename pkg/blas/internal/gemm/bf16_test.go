package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmSrcBF16 checks that bf16 operands widened as they are packed
// give the same bits as Sgemm on fp32 copies of them: for every
// transposition, with A, B or both in bf16, on shapes that cover partial
// tiles, several KC blocks, in-place and packed A, and padded strides, on
// the portable kernel and every assembly one this CPU runs. C holds
// NaN outside the product and (beta 0) inside it, which must not leak.
func TestSgemmSrcBF16(t *testing.T) {
	kerns := AsmAll()
	kerns["go"] = KernGo
	r := rand.New(rand.NewPCG(3, 4))
	bf := func(n int) ([]uint16, []float32) {
		h, f := make([]uint16, n), make([]float32, n)
		for i := range h {
			h[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			f[i] = widen1(h[i])
		}
		return h, f
	}
	shapes := [][3]int{{1, 1, 1}, {6, 16, 8}, {7, 17, 9}, {32, 128, 32}, {13, 300, 270}, {150, 40, 520}, {64, 256, 33}}
	for name, kern := range kerns {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, which := range []string{"A", "B", "AB"} {
						lda, ldb, ldc, ar, br := paddedLayout(m, n, k, ta, tb)
						ah, af := bf(ar * lda)
						bh, bfv := bf(br * ldb)
						want := make([]float32, m*ldc)
						got := make([]float32, m*ldc)
						for i := range want {
							want[i] = float32(math.NaN())
							got[i] = want[i]
						}
						Sgemm(kern, ta, tb, m, n, k, 0.5, af, lda, bfv, ldb, 0, want, ldc)
						as, bs := Src{F32: af}, Src{F32: bfv}
						if which != "B" {
							as = Src{BF16: ah}
						}
						if which != "A" {
							bs = Src{BF16: bh}
						}
						SgemmSrc(kern, ta, tb, m, n, k, 0.5, as, lda, bs, ldb, 0, got, ldc)
						tag := fmt.Sprintf("%s m%d n%d k%d ta=%v tb=%v bf16 %s", name, m, n, k, ta, tb, which)
						for i := range m {
							for j := range ldc {
								g, w := got[i*ldc+j], want[i*ldc+j]
								if j >= n {
									if !math.IsNaN(float64(g)) {
										t.Fatalf("%s: C[%d][%d] outside the product written: %v", tag, i, j, g)
									}
									continue
								}
								if math.Float32bits(g) != math.Float32bits(w) || math.IsNaN(float64(g)) {
									t.Fatalf("%s: C[%d][%d] = %v, want %v (the fp32 product)", tag, i, j, g, w)
								}
							}
						}
					}
				}
			}
		}
	}
}
