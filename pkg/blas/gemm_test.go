package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/internal/cputime"
	"github.com/druto/druto/internal/testreq"

	"github.com/druto/druto/pkg/blas/internal/gemm"
)

// hasAsm reports whether this CPU has an assembly micro-kernel.
func hasAsm() bool {
	_, _, ok := gemm.Asm()
	return ok
}

// packedKernels are the micro-kernels the blocked driver is tested on: the
// portable Go one everywhere, and every assembly one this CPU runs (AVX2
// and, where the CPU has it, AVX-512).
func packedKernels(t testing.TB) map[string]gemm.Kernel {
	ks := gemm.AsmAll()
	ks["go"] = gemm.KernGo
	if len(ks) == 1 {
		t.Logf("no assembly micro-kernel on this CPU/architecture: testing the driver on the Go kernel only")
	}
	return ks
}

// sgemmFunc is Sgemm's signature.
type sgemmFunc = func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error

// sgemmCall is Sgemm's argument handling around one backend's sgemm.
func sgemmCall(sgemm func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)) sgemmFunc {
	return func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
		if err := check(transA, transB, m, n, k, a, lda, b, ldb, c, ldc); err != nil {
			return err
		}
		if m == 0 || n == 0 {
			return nil
		}
		if k == 0 || alpha == 0 {
			scale(m, n, beta, c, ldc)
			return nil
		}
		sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return nil
	}
}

// packedCall is Sgemm's argument handling around the blocked driver.
func packedCall(kern gemm.Kernel) sgemmFunc { return sgemmCall(packedBackend{kern: kern}.sgemm) }

// TestPackedNaive checks the blocked SGEMM on each kernel against the
// float64 loop: the fixed cases, the edges of every block size (mr, nr,
// kc, mc, nc, each ±1), and random shapes with all transposes, scalars
// (beta 0 on NaN-poisoned C) and padded leading dimensions.
func TestPackedNaive(t *testing.T) {
	for name, kern := range packedKernels(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, 12))
			call := packedCall(kern)
			for _, g := range gemmCases() {
				runCase(t, r, g, call)
			}
			scalars := [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}, {1, -1}, {3, 0}}
			// Block edges: mr 6, nr 16, kc 256, mc 144, and n 256 where A
			// starts being packed.
			edges := [][3]int{
				{5, 15, 255}, {6, 16, 256}, {7, 17, 257}, {143, 33, 31}, {144, 48, 9}, {145, 47, 513},
				{12, 32, 1}, {1, 16, 300}, {6, 1, 2}, {290, 18, 260},
				{7, 255, 5}, {7, 256, 5}, {145, 257, 257}, {150, 300, 3}, {1, 270, 9},
			}
			for i, s := range edges {
				ab := scalars[i%len(scalars)]
				for _, ta := range []bool{false, true} {
					for _, tb := range []bool{false, true} {
						runCase(t, r, gemmCase{ta, tb, s[0], s[1], s[2], ab[0], ab[1]}, call)
					}
				}
			}
			for i := range 200 {
				dim := func() int {
					if r.IntN(4) == 0 {
						return 1 + r.IntN(3)
					}
					return 1 + r.IntN(70)
				}
				ab := scalars[r.IntN(len(scalars))]
				pad := [3]int{r.IntN(40), r.IntN(40), r.IntN(40)} // 0 too: packed ld
				n := dim()
				if i%4 == 0 {
					n = 250 + r.IntN(100) // A packed
				}
				runCasePad(t, r, gemmCase{r.IntN(2) == 1, r.IntN(2) == 1, dim(), n, dim(), ab[0], ab[1]}, pad, call)
			}
		})
	}
}

// TestPackedWide covers the nc block (4096 columns) edge on one product,
// and the lone-row (m = 1) and lone-column (n = 1) shapes of the LM head.
func TestPackedWide(t *testing.T) {
	if testing.Short() {
		t.Skip("-short") // skip: -short
	}
	for name, kern := range packedKernels(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(13, 14))
			call := packedCall(kern)
			runCase(t, r, gemmCase{false, true, 13, 4097, 40, 1, 0}, call)
			runCase(t, r, gemmCase{true, false, 7, 8200, 3, 0.5, 1}, call)
			runCase(t, r, gemmCase{false, false, 1, 5000, 70, 1, 0}, call)
			runCase(t, r, gemmCase{true, true, 3000, 1, 130, 1, 0.5}, call)
		})
	}
}

// TestPackedNaNBeta0: with beta 0, NaN and Inf in C must vanish in every
// tile (full and edge), and the product of finite inputs must be finite.
func TestPackedNaNBeta0(t *testing.T) {
	for name, kern := range packedKernels(t) {
		r := rand.New(rand.NewPCG(15, 16))
		m, n, k := 19, 37, 5
		a, b := randSlice(r, m*k), randSlice(r, k*n)
		c := make([]float32, m*n)
		for i := range c {
			c[i] = float32(math.NaN())
			if i%3 == 0 {
				c[i] = float32(math.Inf(-1))
			}
		}
		if err := packedCall(kern)(false, false, m, n, k, 1, a, k, b, n, 0, c, n); err != nil {
			t.Fatal(err)
		}
		for i, v := range c {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: C[%d] = %v after beta=0", name, i, v)
			}
		}
	}
}

// TestPackedDeterministic: the blocked SGEMM gives the same bits for the
// same call, and Sgemm's split over goroutines gives the bits of one call.
func TestPackedDeterministic(t *testing.T) {
	fb, ok := fallback().(packedBackend)
	if !ok {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no assembly micro-kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(17, 18))
	m, n, k := 301, 77, 300
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	fb.sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c1, n)
	split(fb, 3, false, true, m, n, k, 1, a, k, b, k, 0, c2, n)
	for i := range c1 {
		if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) {
			t.Fatalf("C[%d]: %v unsplit, %v split", i, c1[i], c2[i])
		}
	}
}

// ExampleDescribe shows the shape of the description; the words depend on
// the machine.
func ExampleDescribe() {
	d := Describe()
	fmt.Println(len(d) > 0)
	// Output: true
}

// modelShape is one GEMM of the tiny GPT (C = 128, B·T = 1024, V = 50304):
// a linear layer's forward (NT), its dinp (NN) or its dweight (TN).
type modelShape struct {
	name    string
	ta, tb  bool
	m, n, k int
	serial  bool // one goroutine (SgemmSerial), as attention calls it per head
}

func modelShapes() []modelShape {
	const BT, C, V = 1024, 128, 50304
	var ss []modelShape
	for _, l := range []struct {
		name   string
		oc, ic int
	}{{"qkv", 3 * C, C}, {"proj", C, C}, {"fc", 4 * C, C}, {"fcproj", C, 4 * C}, {"lmhead", V, C}} {
		ss = append(ss,
			modelShape{l.name + "_fwd_NT", false, true, BT, l.oc, l.ic, false},
			modelShape{l.name + "_dinp_NN", false, false, BT, l.ic, l.oc, false},
			modelShape{l.name + "_dw_TN", true, false, l.oc, l.ic, BT, false})
	}
	// Attention, one head (T = 128, head size 32) on one goroutine: the
	// scores Q·Kᵀ (and dP = dO·Vᵀ), P·V (and dQ = dS·K), and Pᵀ·dO (dV, dK).
	const T, hs = 128, 32
	ss = append(ss,
		modelShape{"attn_scores_NT", false, true, T, T, hs, true},
		modelShape{"attn_pv_NN", false, false, T, hs, T, true},
		modelShape{"attn_dv_TN", true, false, T, hs, T, true},
		modelShape{"attn_rows32_NT", false, true, 32, T, hs, true})
	return append(ss, modelShape{"square1024_NN", false, false, 1024, 1024, 1024, false})
}

// BenchmarkModelGemm times the model's GEMMs through Sgemm's threading on
// each implementation: "fallback" (the assembly SGEMM; "fallback-AVX2FMA"
// its AVX2 kernel where the CPU has AVX-512), "native" (OpenBLAS,
// when it loads) and "gonum", on the same operands; GFLOP/s is reported.
// Compare implementations within one run: the machine's load moves the
// absolute numbers. -short keeps the square and the forward shapes only.
func BenchmarkModelGemm(b *testing.B) {
	impls := []struct {
		name string
		be   backend
	}{}
	if fb, ok := fallback().(packedBackend); ok {
		impls = append(impls, struct {
			name string
			be   backend
		}{"fallback", fb})
		// The other assembly kernels of this CPU (AVX2 where the fallback
		// runs AVX-512), to compare them on the same operands.
		for isa, kern := range gemm.AsmAll() {
			if isa != fb.isa {
				impls = append(impls, struct {
					name string
					be   backend
				}{"fallback-" + strings.NewReplacer("+", "", "-", "").Replace(isa), packedBackend{kern: kern, isa: isa}})
			}
		}
	}
	if Native() {
		impls = append(impls, struct {
			name string
			be   backend
		}{"native", current()})
	}
	impls = append(impls, struct {
		name string
		be   backend
	}{"gonum", gonumBackend{}})
	// "dot-bf16": SgemmBF16 on bf16 copies of the operands, where it runs
	// the AVX512_BF16 pair kernel (threaded as SgemmBF16 does).
	isaDot, dot := DotBF16()
	if dot {
		impls = append(impls, struct {
			name string
			be   backend
		}{"dot-bf16", nil})
	}
	p := runtime.GOMAXPROCS(0)
	for _, s := range modelShapes() {
		if testing.Short() && !(s.name == "square1024_NN" || strings.HasSuffix(s.name, "_fwd_NT") || s.serial) {
			continue
		}
		lda, ldb := s.k, s.n
		if s.ta {
			lda = s.m
		}
		if s.tb {
			ldb = s.k
		}
		for _, im := range impls {
			b.Run(fmt.Sprintf("%s/%s_m%d_n%d_k%d", s.name, im.name, s.m, s.n, s.k), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 1))
				a, bm := randSlice(r, s.m*s.k), randSlice(r, s.k*s.n)
				c := make([]float32, s.m*s.n)
				var ah, bh []uint16
				if im.be == nil {
					ah, bh = toBF16(a), toBF16(bm)
					b.Log(isaDot)
				}
				var cpu0 time.Duration
				for b.Loop() {
					if cpu0 == 0 {
						cpu0 = cputime.Now() // after b.Loop resets the timer
					}
					if im.be == nil {
						if err := SgemmBF16(s.ta, s.tb, s.m, s.n, s.k, 1, Mat{BF16: ah}, lda, Mat{BF16: bh}, ldb, 0, c, s.n); err != nil {
							b.Fatal(err)
						}
					} else if !s.serial && im.be.serial() && p > 1 && s.m*s.n*s.k >= splitMin {
						split(im.be, p, s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
					} else {
						im.be.sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, s.n)
					}
				}
				flop := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(b.N)
				b.ReportMetric(flop/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				// Per CPU-second (all threads): the work each core gets done,
				// less moved by other processes' load than the wall clock.
				if cpu := cputime.Now() - cpu0; cpu0 != 0 && cpu > 0 {
					b.ReportMetric(flop/cpu.Seconds()/1e9, "GFLOP/cpu-s")
				}
			})
		}
	}
}

// BenchmarkAttnBlocks times the products of one attention head at the tiny
// preset's shape (T 128, hs 32, row blocks of 32: the causal blocks of
// pkg/device/cpu's fused attention, forward and backward) on one goroutine,
// through the fallback (assembly) and the native library, interleaved head
// by head so that both see the same load; it reports the CPU time per head
// of each in µs.
func BenchmarkAttnBlocks(b *testing.B) {
	if !Native() || !hasAsm() {
		b.Skip("needs both a native library and the assembly SGEMM") // skip: a benchmark (CI runs none)
	}
	const T, hs, blk, ld = 128, 32, 32, 3 * 128
	r := rand.New(rand.NewPCG(5, 6))
	qkv, g, p, dp := randSlice(r, T*ld), randSlice(r, T*128), randSlice(r, T*T), randSlice(r, T*T)
	o, dx := make([]float32, T*128), make([]float32, T*ld)
	kern, _, _ := gemm.Asm()
	impls := []backend{packedBackend{kern: kern}, current()}
	var cpu [2]time.Duration
	for b.Loop() {
		for i, be := range impls {
			c0 := cputime.Now()
			for r0 := 0; r0 < T; r0 += blk {
				r1, m := r0+blk, blk
				be.sgemm(false, true, m, r1, hs, 0.17, qkv[r0*ld:], ld, qkv[128:], ld, 0, p[r0*T:], T)
				be.sgemm(false, false, m, hs, r1, 1, p[r0*T:], T, qkv[256:], ld, 0, o[r0*128:], 128)
				be.sgemm(false, true, m, r1, hs, 1, g[r0*128:], 128, qkv[256:], ld, 0, dp[r0*T:], T)
				be.sgemm(true, false, r1, hs, m, 1, p[r0*T:], T, g[r0*128:], 128, 1, dx[256:], ld)
				be.sgemm(false, false, m, hs, r1, 1, dp[r0*T:], T, qkv[128:], ld, 1, dx[r0*ld:], ld)
				be.sgemm(true, false, r1, hs, m, 1, dp[r0*T:], T, qkv[r0*ld:], ld, 1, dx[128:], ld)
			}
			cpu[i] += cputime.Now() - c0
		}
	}
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "fallback-cpu-µs")
	b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "native-cpu-µs")
}

// toBF16 returns the bf16 bit patterns of x (truncated: the benchmarks only
// need bf16 operands of the same magnitudes).
func toBF16(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = uint16(math.Float32bits(v) >> 16)
	}
	return h
}
