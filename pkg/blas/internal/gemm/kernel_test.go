package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestKernelsAgree runs every assembly micro-kernel of this CPU on one tile
// for every k up to 40 (the unrolled loop and its tail), A packed (rsa 1,
// csa mr) and in place (row-major and transposed, padded strides), C with a
// padded row stride, and alpha/beta including beta 0 on a NaN-poisoned C
// and beta -0. The assembly kernels run the same FMAs in the same order, so
// they must agree bit for bit; each must match the portable Go kernel
// (whose products and sums round separately) within a few ulps of the
// magnitudes summed. Nothing outside the tile may be written.
func TestKernelsAgree(t *testing.T) {
	ks := AsmAll()
	if len(ks) == 0 {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no assembly micro-kernel on this CPU/architecture")
	}
	r := rand.New(rand.NewPCG(7, 8))
	const ldc = nr + 5
	for k := 1; k <= 40; k++ {
		for _, lay := range []struct {
			name     string
			rsa, csa int
		}{{"packed", 1, mr}, {"rows", k + 3, 1}, {"trans", 1, mr + 7}} {
			size := (mr-1)*lay.rsa + (k-1)*lay.csa + 1
			a := make([]float32, size+1)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			b := make([]float32, k*nr)
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			c0 := make([]float32, mr*ldc)
			for i := range c0 {
				c0[i] = float32(r.NormFloat64())
			}
			for _, sc := range [][2]float32{{1, 0}, {0.5, 1}, {-1.25, -0.5}, {2, float32(math.Copysign(0, -1))}} {
				alpha, beta := sc[0], sc[1]
				prep := func() []float32 {
					c := append([]float32(nil), c0...)
					for i := range mr {
						for j := nr; j < ldc; j++ {
							c[i*ldc+j] = float32(math.NaN())
						}
						if beta == 0 {
							for j := range nr {
								c[i*ldc+j] = float32(math.NaN())
							}
						}
					}
					return c
				}
				ref := prep()
				KernGo(k, &a[0], lay.rsa, lay.csa, &b[0], &ref[0], ldc, alpha, beta)
				var first []float32
				var firstName string
				for name, kern := range ks {
					tag := fmt.Sprintf("%s k=%d %s alpha=%v beta=%v", name, k, lay.name, alpha, beta)
					c := prep()
					kern(k, &a[0], lay.rsa, lay.csa, &b[0], &c[0], ldc, alpha, beta)
					for i := range mr {
						for j := range ldc {
							g := c[i*ldc+j]
							if j >= nr {
								if !math.IsNaN(float64(g)) {
									t.Fatalf("%s: C[%d][%d] outside the tile written: %v", tag, i, j, g)
								}
								continue
							}
							var mag float64
							for p := range k {
								mag += math.Abs(float64(a[i*lay.rsa+p*lay.csa]) * float64(b[p*nr+j]))
							}
							mag = mag*math.Abs(float64(alpha)) + math.Abs(float64(beta)*float64(c0[i*ldc+j]))
							w := ref[i*ldc+j]
							if math.IsNaN(float64(g)) || math.Abs(float64(g-w)) > 1e-6*float64(k+2)*mag+1e-30 {
								t.Fatalf("%s: C[%d][%d] = %v, Go kernel %v", tag, i, j, g, w)
							}
							if first != nil && math.Float32bits(g) != math.Float32bits(first[i*ldc+j]) {
								t.Fatalf("%s: C[%d][%d] = %v, %s gives %v (must be bit-identical)", tag, i, j, g, firstName, first[i*ldc+j])
							}
						}
					}
					if first == nil {
						first, firstName = c, name
					}
				}
			}
		}
	}
}

// TestWideKernel checks the two-tile kernel (where the CPU has one) against
// two calls of the 6x16 kernel it pairs with, bit for bit, on two adjacent
// packed panels: every k up to 40, A packed and in place, beta 0 on a
// NaN-poisoned C and beta != 0, nothing written outside the 6x32 tile.
func TestWideKernel(t *testing.T) {
	kern, isa, ok := Asm()
	wide := wideOf(kern)
	if !ok || wide == nil {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no two-tile kernel for %q on this CPU", isa)
	}
	r := rand.New(rand.NewPCG(9, 10))
	const ldc = 2*nr + 3
	for k := 1; k <= 40; k++ {
		for _, st := range [][2]int{{1, mr}, {k + 2, 1}, {1, mr + 5}} {
			a := make([]float32, (mr-1)*st[0]+(k-1)*st[1]+1)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			b := make([]float32, 2*k*nr)
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			for _, beta := range []float32{0, 0.75} {
				want := make([]float32, mr*ldc)
				for i := range want {
					want[i] = float32(r.NormFloat64())
					if beta == 0 || i%ldc >= 2*nr {
						want[i] = float32(math.NaN())
					}
				}
				got := append([]float32(nil), want...)
				kern(k, &a[0], st[0], st[1], &b[0], &want[0], ldc, 1.5, beta)
				kern(k, &a[0], st[0], st[1], &b[k*nr], &want[nr], ldc, 1.5, beta)
				wide(k, &a[0], st[0], st[1], &b[0], &got[0], ldc, 1.5, beta)
				for i, g := range got {
					w := want[i]
					if i%ldc >= 2*nr {
						if !math.IsNaN(float64(g)) {
							t.Fatalf("k=%d strides %v beta %v: C[%d][%d] outside the tile written", k, st, beta, i/ldc, i%ldc)
						}
						continue
					}
					if math.IsNaN(float64(g)) || math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("k=%d strides %v beta %v: C[%d][%d] = %v, two 6x16 calls give %v", k, st, beta, i/ldc, i%ldc, g, w)
					}
				}
			}
		}
	}
}

// TestAsmDriversAgree runs the blocked driver on every assembly kernel of
// this CPU (AVX-512 pairs full panels through its two-tile kernel, AVX2
// does not) and requires the same bits, on shapes with row and column
// tails, odd panel counts, several KC and NC blocks, in-place and packed A,
// every transposition, padded strides, and beta 0 (NaN-poisoned C) or not.
func TestAsmDriversAgree(t *testing.T) {
	ks := AsmAll()
	if len(ks) < 2 {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "only %d assembly kernel(s) on this CPU: nothing to compare", len(ks))
	}
	r := rand.New(rand.NewPCG(11, 12))
	shapes := [][3]int{{1, 1, 1}, {6, 32, 1}, {7, 33, 5}, {13, 48, 270}, {25, 300, 31}, {64, 256, 33}, {12, ncBlock + 40, 9}, {150, 40, 520}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, beta := range []float32{0, 1, -0.5} {
					lda, ldb, ldc, ar, br := paddedLayout(m, n, k, ta, tb)
					a, b := make([]float32, ar*lda), make([]float32, br*ldb)
					for i := range a {
						a[i] = float32(r.NormFloat64())
					}
					for i := range b {
						b[i] = float32(r.NormFloat64())
					}
					c0 := make([]float32, m*ldc)
					for i := range c0 {
						c0[i] = float32(r.NormFloat64())
						if beta == 0 || i%ldc >= n {
							c0[i] = float32(math.NaN())
						}
					}
					var first []float32
					var firstName string
					for name, kern := range ks {
						c := append([]float32(nil), c0...)
						Sgemm(kern, ta, tb, m, n, k, 1.25, a, lda, b, ldb, beta, c, ldc)
						for i, g := range c {
							if i%ldc >= n {
								if !math.IsNaN(float64(g)) {
									t.Fatalf("%s m%d n%d k%d: C[%d][%d] outside the product written", name, m, n, k, i/ldc, i%ldc)
								}
								continue
							}
							if math.IsNaN(float64(g)) || first != nil && math.Float32bits(g) != math.Float32bits(first[i]) {
								t.Fatalf("%s m%d n%d k%d ta=%v tb=%v beta=%v: C[%d][%d] = %v, %s gives %v", name, m, n, k, ta, tb, beta, i/ldc, i%ldc, g, firstName, first[i])
							}
						}
						if first == nil {
							first, firstName = c, name
						}
					}
				}
			}
		}
	}
}

// paddedLayout returns the leading dimensions of an m×n×k product's A, B
// and C with every row padded (k+3, n+2, n+1; transposed A m+3, transposed
// B k+2) and the stored rows of A and B: the strided layouts the tests run.
func paddedLayout(m, n, k int, ta, tb bool) (lda, ldb, ldc, ar, br int) {
	lda, ldb, ldc, ar, br = k+3, n+2, n+1, m, k
	if ta {
		lda, ar = m+3, k
	}
	if tb {
		ldb, br = k+2, n
	}
	return lda, ldb, ldc, ar, br
}
