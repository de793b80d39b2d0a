package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// dotKernels returns the pair kernels to test: the portable one, and the
// AVX512_BF16 ones where the CPU has them (one tile only, and with the
// two-tile kernel).
func dotKernels() map[string][2]DotKernel {
	ks := map[string][2]DotKernel{"go": {KernDotGo, nil}}
	if kern, wide, ok := DotAsmAll(); ok {
		ks["avx512bf16"] = [2]DotKernel{kern, wide}
		ks["avx512bf16-single"] = [2]DotKernel{kern, nil}
	}
	return ks
}

// TestSgemmDot checks SgemmDot (both operands bf16, k two steps at a time)
// against a float64 product of the same bf16 values, within the rounding
// of fp32 sums (pkg/blas's bf16 tolerance: |got - want| <= 1e-4·√k·(1 +
// |want|)): every transposition, odd and even m, n, k (an odd k pads the
// last pair), several KC blocks with an odd last one, several NC blocks
// of columns, A in place and packed, padded strides (odd and even ldb),
// beta 0 on NaN-poisoned C and beta 0.5. C outside the product must stay
// NaN.
func TestSgemmDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bf := func(n int) []uint16 {
		h := make([]uint16, n)
		for i := range h {
			h[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
		}
		return h
	}
	shapes := [][3]int{{1, 1, 1}, {6, 16, 2}, {7, 17, 9}, {6, 32, 8}, {13, 300, 270}, {150, 40, 520}, {64, 256, 33}, {20, 70, 1037}, {9, 48, 1024}, {7, ncBlock + 37, 20}}
	for name, kk := range dotKernels() {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, beta := range []float32{0, 0.5} {
						lda, ldb, ldc, ar, br := paddedLayout(m, n, k, ta, tb)
						a, b := bf(ar*lda), bf(br*ldb)
						c0 := make([]float32, m*ldc)
						got := make([]float32, m*ldc)
						for i := range got {
							c0[i] = float32(r.NormFloat64())
							if beta == 0 || i%ldc >= n {
								c0[i] = float32(math.NaN())
							}
							got[i] = c0[i]
						}
						SgemmDot(kk[0], kk[1], ta, tb, m, n, k, 0.75, a, lda, b, ldb, beta, got, ldc)
						tag := fmt.Sprintf("%s m%d n%d k%d ta=%v tb=%v beta %v", name, m, n, k, ta, tb, beta)
						for i := range m {
							for j := range ldc {
								g := got[i*ldc+j]
								if j >= n {
									if !math.IsNaN(float64(g)) {
										t.Fatalf("%s: C[%d][%d] outside the product written: %v", tag, i, j, g)
									}
									continue
								}
								var sum float64
								for p := range k {
									ai, bi := i*lda+p, p*ldb+j
									if ta {
										ai = p*lda + i
									}
									if tb {
										bi = j*ldb + p
									}
									sum += float64(widen1(a[ai])) * float64(widen1(b[bi]))
								}
								want := 0.75 * sum
								if beta != 0 {
									want += float64(beta) * float64(c0[i*ldc+j])
								}
								if math.IsNaN(float64(g)) || math.Abs(float64(g)-want) > 1e-4*math.Sqrt(float64(k))*(1+math.Abs(want)) {
									t.Fatalf("%s: C[%d][%d] = %v, want %v", tag, i, j, g, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestDotWideAgrees checks that the two-tile pair kernel gives the bits of
// the one-tile kernel (SgemmDot with and without it), on shapes with pairs
// of full panels, a last single panel and edge rows.
func TestDotWideAgrees(t *testing.T) {
	kern, wide, ok := DotAsmAll()
	if !ok {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no AVX512_BF16 on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range [][3]int{{12, 64, 32}, {13, 80, 515}, {100, 272, 128}} {
		m, n, k := s[0], s[1], s[2]
		for _, tb := range []bool{false, true} {
			lda, ldb, ldc, ar, br := paddedLayout(m, n, k, false, tb)
			a, b := make([]uint16, ar*lda), make([]uint16, br*ldb)
			for i := range a {
				a[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			}
			for i := range b {
				b[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			}
			one, two := make([]float32, m*ldc), make([]float32, m*ldc)
			SgemmDot(kern, nil, false, tb, m, n, k, 1, a, lda, b, ldb, 0, one, ldc)
			SgemmDot(kern, wide, false, tb, m, n, k, 1, a, lda, b, ldb, 0, two, ldc)
			for i := range one {
				if math.Float32bits(one[i]) != math.Float32bits(two[i]) {
					t.Fatalf("m%d n%d k%d tb=%v: element %d: two-tile kernel %v, one-tile %v", m, n, k, tb, i, two[i], one[i])
				}
			}
		}
	}
}

// TestPackDot checks the pair packing of both operands (assembly and Go
// paths) against the definition, odd k and partial panels included.
func TestPackDot(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{7, 33, 9}, {12, 32, 16}, {6, 16, 1}} {
		m, n, k := s[0], s[1], s[2]
		kp := (k + 1) / 2
		for _, tr := range []bool{false, true} {
			for _, ld := range []int{0, 1} { // padding: an even or odd stride
				// B: op(B) is k×n.
				ldb, br := n+ld, k
				if tr {
					ldb, br = k+ld+(k%2), n
				}
				b := make([]uint16, br*ldb)
				for i := range b {
					b[i] = uint16(r.Uint32())
				}
				at := func(p, j int) uint16 {
					if p >= k {
						return 0
					}
					if tr {
						return b[j*ldb+p]
					}
					return b[p*ldb+j]
				}
				db := make([]uint32, roundUp(n, nr)*kp)
				for i := range db {
					db[i] = 0xdeadbeef
				}
				packBDot(tr, b, ldb, 0, 0, k, n, db)
				for jr := 0; jr < n; jr += nr {
					for q := range kp {
						for j := range nr {
							var want uint32
							if jr+j < n {
								want = pair(at(2*q, jr+j), at(2*q+1, jr+j))
							}
							if g := db[jr*kp+q*nr+j]; g != want {
								t.Fatalf("packBDot trans=%v k%d n%d ldb %d: panel %d step %d col %d = %#x, want %#x", tr, k, n, ldb, jr/nr, q, j, g, want)
							}
						}
					}
				}
				// A: op(A) is m×k.
				lda, ar := k+ld, m
				if tr {
					lda, ar = m+ld, k
				}
				a := make([]uint16, ar*lda)
				for i := range a {
					a[i] = uint16(r.Uint32())
				}
				atA := func(i, p int) uint16 {
					if p >= k || i >= m {
						return 0
					}
					if tr {
						return a[p*lda+i]
					}
					return a[i*lda+p]
				}
				da := make([]uint32, roundUp(m, mr)*kp)
				for i := range da {
					da[i] = 0xdeadbeef
				}
				packADot(tr, a, lda, 0, 0, m, k, da)
				for ir := 0; ir < m; ir += mr {
					for q := range kp {
						for i := range mr {
							want := pair(atA(ir+i, 2*q), atA(ir+i, 2*q+1))
							if g := da[ir*kp+q*mr+i]; g != want {
								t.Fatalf("packADot trans=%v m%d k%d: panel %d step %d row %d = %#x, want %#x", tr, m, k, ir/mr, q, i, g, want)
							}
						}
					}
				}
			}
		}
	}
}
