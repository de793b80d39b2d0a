package blas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/druto/druto/pkg/blas/internal/gemm"
	"github.com/druto/druto/pkg/tensor"
)

// naive is the float64 triple loop reference of Sgemm on the m×n block.
func naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				ia, ib := i*lda+p, p*ldb+j
				if transA {
					ia = p*lda + i
				}
				if transB {
					ib = j*ldb + p
				}
				av, bv := a[ia], b[ib]
				s += float64(av) * float64(bv)
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
	}
	return x
}

// gemmCase is one Sgemm call with padded leading dimensions.
type gemmCase struct {
	ta, tb      bool
	m, n, k     int
	alpha, beta float32
}

func (g gemmCase) String() string {
	return fmt.Sprintf("tA=%v,tB=%v,m=%d,n=%d,k=%d,alpha=%g,beta=%g", g.ta, g.tb, g.m, g.n, g.k, g.alpha, g.beta)
}

func gemmCases() []gemmCase {
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 1, 128}, {1, 96, 5}, {65, 70, 31}, {130, 67, 257}, {4, 4, 0}}
	scalars := [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}, {0, 0.5}}
	var cs []gemmCase
	for _, s := range shapes {
		for _, ab := range scalars {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					cs = append(cs, gemmCase{ta, tb, s[0], s[1], s[2], ab[0], ab[1]})
				}
			}
		}
	}
	return cs
}

// runCase calls sgemm (one backend) on padded operands and checks the m×n
// block against the float64 loop, and that C's padding is untouched.
func runCase(t *testing.T, r *rand.Rand, g gemmCase, sgemm sgemmFunc) {
	t.Helper()
	runCasePad(t, r, g, [3]int{3, 1, 2}, sgemm)
}

// runCasePad is runCase with the padding of lda, ldb and ldc given.
func runCasePad(t *testing.T, r *rand.Rand, g gemmCase, pad [3]int, sgemm sgemmFunc) {
	t.Helper()
	ar, ac := g.m, g.k
	if g.ta {
		ar, ac = g.k, g.m
	}
	br, bc := g.k, g.n
	if g.tb {
		br, bc = g.n, g.k
	}
	lda, ldb, ldc := max(ac, 1)+pad[0], max(bc, 1)+pad[1], g.n+pad[2]
	a := randSlice(r, max(ar, 1)*lda)
	b := randSlice(r, max(br, 1)*ldb)
	c := randSlice(r, g.m*ldc)
	if g.beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN()) // beta 0 must not read C
		}
	}
	want := naive(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc)
	orig := append([]float32(nil), c...)
	if err := sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc); err != nil {
		t.Fatalf("%v: %v", g, err)
	}
	got := make([]float64, g.m*g.n)
	for i := range g.m {
		for j := range g.n {
			got[i*g.n+j] = float64(c[i*ldc+j])
		}
		for j := g.n; j < ldc; j++ {
			if math.Float32bits(c[i*ldc+j]) != math.Float32bits(orig[i*ldc+j]) {
				t.Fatalf("%v pad %v: padding C[%d,%d] changed", g, pad, i, j)
			}
		}
	}
	// An fp32 dot product of k terms has a rounding error growing like sqrt(k).
	if err := tensor.Close(got, want, tensor.F32, math.Sqrt(float64(max(g.k, 1)))); err != nil {
		t.Fatalf("%v pad %v: %v", g, pad, err)
	}
}

func TestSgemmNaive(t *testing.T) {
	t.Logf("implementation: %s (load error: %v)", Name(), LoadError())
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range gemmCases() {
		runCase(t, r, g, Sgemm)
		runCase(t, r, g, SgemmSerial)
	}
}

// TestGonumNaive checks the pure-Go path directly, whatever Name reports.
func TestGonumNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	call := sgemmCall(gonumBackend{}.sgemm)
	for _, g := range gemmCases() {
		runCase(t, r, g, call)
	}
}

// TestNativeVsGonum compares the two implementations on one larger product.
// Without OpenBLAS it skips, unless DRUTO_BLAS_TESTS=require (CI sets it, as
// CI installs the library): then the fallback would hide a broken loader.
func TestNativeVsGonum(t *testing.T) {
	if !Native() {
		if os.Getenv("DRUTO_BLAS_TESTS") == "require" {
			t.Fatalf("DRUTO_BLAS_TESTS=require but OpenBLAS did not load: %v", LoadError())
		}
		t.Skipf("no native library: %v", LoadError()) // require: DRUTO_BLAS_TESTS
	}
	r := rand.New(rand.NewPCG(5, 6))
	m, n, k := 257, 129, 383
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	if err := Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c1, n); err != nil {
		t.Fatal(err)
	}
	gonumBackend{}.sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c2, n)
	if err := tensor.CloseF32(c1, c2, tensor.F32, math.Sqrt(float64(k))); err != nil {
		t.Fatalf("openblas vs gonum: %v", err)
	}
}

func TestSgemmArgs(t *testing.T) {
	x := make([]float32, 12)
	cases := []struct {
		name string
		call func() error
	}{
		{"negative m", func() error { return Sgemm(false, false, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2) }},
		{"short A", func() error { return Sgemm(false, false, 4, 3, 4, 1, x, 4, x, 3, 0, x, 3) }},
		{"short B", func() error { return Sgemm(false, true, 2, 4, 4, 1, x, 4, x, 4, 0, x, 4) }},
		{"short C", func() error { return Sgemm(false, false, 3, 5, 1, 1, x, 1, x, 5, 0, x, 5) }},
		{"small lda", func() error { return Sgemm(false, false, 2, 2, 3, 1, x, 2, x, 2, 0, x, 2) }},
		{"small lda trans", func() error { return Sgemm(true, false, 3, 2, 2, 1, x, 2, x, 2, 0, x, 2) }},
		{"small ldc", func() error { return Sgemm(false, false, 2, 3, 2, 1, x, 2, x, 3, 0, x, 2) }},
		{"huge", func() error { return Sgemm(false, false, 1, 1, 1, 1, x, 1<<32, x, 1, 0, x, 1) }},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, ErrArg) {
			t.Errorf("%s: got %v, want ErrArg", c.name, err)
		}
	}
	if err := Sgemm(false, false, 0, 3, 2, 1, nil, 2, x, 3, 0, nil, 3); err != nil {
		t.Errorf("m=0: %v", err)
	}
}

// TestChooseFallback runs the selection with the override set to paths
// that cannot serve: it must fall back to gonum and say why.
func TestChooseFallback(t *testing.T) {
	fb := fallback()
	b, err := choose("/nonexistent", true)
	if b.name() != fb.name() || err == nil || !(errors.Is(err, errNoCgo) || strings.Contains(err.Error(), "/nonexistent")) {
		t.Fatalf("choose(/nonexistent) = %T, %v; want %s and an error naming the path", b, err, fb.name())
	}
	if _, asm := fb.(packedBackend); asm != hasAsm() {
		t.Errorf("fallback %T, but the CPU has an assembly kernel: %v", fb, hasAsm())
	}
	// libc loads but has no cblas_sgemm: the dlsym error must come through.
	b, err = choose("libc.so.6", true)
	if b.name() != fb.name() || err == nil {
		t.Fatalf("choose(libc.so.6) = %T, %v; want the fallback and an error", b, err)
	}
	if !errors.Is(err, errNoCgo) && !strings.Contains(err.Error(), "cblas_sgemm") {
		t.Errorf("libc error does not name the symbol: %v", err)
	}
}

// TestEnvFallback re-runs TestSgemmNaive in a child process with
// DRUTO_BLAS_LIB=/nonexistent, which must select the fallback (the assembly
// SGEMM where the CPU has one, else gonum) and still pass.
func TestEnvFallback(t *testing.T) {
	if os.Getenv(EnvLib) == "/nonexistent" {
		if Native() || Name() != fallback().name() {
			t.Fatalf("%s=/nonexistent but Name() = %q", EnvLib, Name())
		}
		want := "gonum"
		if hasAsm() {
			want = "druto Go assembly"
		}
		if d := Describe(); !strings.HasPrefix(d, want) {
			t.Fatalf("Describe() = %q, want it to start with %q", d, want)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(TestSgemmNaive|TestEnvFallback)$", "-test.v")
	cmd.Env = append(os.Environ(), EnvLib+"=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with %s=/nonexistent: %v\n%s", EnvLib, err, out)
	}
	if want := "implementation: " + fallback().name(); !strings.Contains(string(out), want) {
		t.Fatalf("child did not use the fallback (%q):\n%s", want, out)
	}
}

// TestConcurrent calls Sgemm from several goroutines at once (as attention
// does, one head per goroutine), each product large enough to be split.
func TestConcurrent(t *testing.T) {
	SetThreads(3)
	defer SetThreads(0)
	r := rand.New(rand.NewPCG(7, 8))
	const m, n, k, G = 128, 32, 128, 8
	a, b := randSlice(r, G*m*k), randSlice(r, k*n)
	c := make([]float32, G*m*n)
	var wg sync.WaitGroup
	errs := make([]error, G)
	for g := range G {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				errs[g] = Sgemm(false, false, m, n, k, 1, a[g*m*k:], k, b, n, 0, c[g*m*n:], n)
			}
		}()
	}
	wg.Wait()
	for g := range G {
		if errs[g] != nil {
			t.Fatal(errs[g])
		}
		want := naive(false, false, m, n, k, 1, a[g*m*k:], k, b, n, 0, c[g*m*n:], n)
		got := make([]float64, m*n)
		for i, v := range c[g*m*n : (g+1)*m*n] {
			got[i] = float64(v)
		}
		if err := tensor.Close(got, want, tensor.F32, math.Sqrt(k)); err != nil {
			t.Fatalf("goroutine %d: %v", g, err)
		}
	}
}

// TestSplit checks that a product spread over p goroutines, by rows or by
// columns, matches the float64 loop and the unsplit call.
func TestSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	bes := []backend{current(), gonumBackend{}, packedBackend{kern: gemm.KernGo, isa: "Go"}}
	if fb, ok := fallback().(packedBackend); ok {
		bes = append(bes, fb)
	}
	for _, be := range bes {
		for _, s := range [][3]int{{300, 70, 40}, {20, 500, 33}, {2, 3, 1}, {17, 17, 300}} {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					lda, ldb := k+1, n+2
					if ta {
						lda = m + 1
					}
					if tb {
						ldb = k + 2
					}
					a, b := randSlice(r, max(m, k)*lda), randSlice(r, max(n, k)*ldb)
					ldc := n + 3
					c0 := randSlice(r, m*ldc)
					want := make([]float32, len(c0))
					copy(want, c0)
					be.sgemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, want, ldc)
					ref := naive(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c0, ldc)
					for _, p := range []int{2, 3, 5} {
						c := append([]float32(nil), c0...)
						split(be, p, ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c, ldc)
						got := make([]float64, m*n)
						for i := range m {
							for j := range n {
								got[i*n+j] = float64(c[i*ldc+j])
							}
						}
						what := fmt.Sprintf("%s m=%d n=%d k=%d tA=%v tB=%v p=%d", be.name(), m, n, k, ta, tb, p)
						if err := tensor.Close(got, ref, tensor.F32, math.Sqrt(float64(k))); err != nil {
							t.Errorf("%s: vs float64: %v", what, err)
						}
						if err := tensor.CloseF32(c, want, tensor.F32, math.Sqrt(float64(k))); err != nil {
							t.Errorf("%s: vs unsplit: %v", what, err)
						}
					}
				}
			}
		}
	}
}

// benchShapes are the tiny GPT's GEMMs: M = B·T = 1024 rows, N×K per layer.
var benchShapes = [][2]int{{384, 128}, {128, 128}, {512, 128}, {128, 512}, {256, 128}}

// BenchmarkSgemm times C (M×N) = A (M×K) · Bᵀ (N×K), the forward of a
// linear layer, on the library Name reports and on gonum.
func BenchmarkSgemm(b *testing.B) {
	const M = 1024
	impls := []struct {
		name string
		be   backend
	}{{"native", current()}, {"gonum", gonumBackend{}}}
	for _, im := range impls {
		if im.name == "native" && !Native() {
			continue
		}
		for _, s := range benchShapes {
			N, K := s[0], s[1]
			b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", im.name, M, N, K), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 1))
				x, w, c := randSlice(r, M*K), randSlice(r, N*K), make([]float32, M*N)
				for b.Loop() {
					if im.name == "native" {
						if err := Sgemm(false, true, M, N, K, 1, x, K, w, K, 0, c, N); err != nil {
							b.Fatal(err)
						}
					} else {
						im.be.sgemm(false, true, M, N, K, 1, x, K, w, K, 0, c, N)
					}
				}
				b.ReportMetric(float64(2*M*N*K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
