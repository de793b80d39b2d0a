package blas

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/druto/druto/pkg/blas/internal/gemm"
)

// ErrArg is returned (wrapped) by Sgemm for sizes, leading dimensions or
// slices that do not describe the matrices.
var ErrArg = errors.New("blas: invalid argument")

// errNoCgo explains the pure-Go path of a CGO_ENABLED=0 build.
var errNoCgo = errors.New("blas: built without cgo (CGO_ENABLED=0): native libraries cannot be loaded")

// EnvLib names the environment variable that picks the native library.
const EnvLib = "DRUTO_BLAS_LIB"

// sonames are tried in order when EnvLib is not set.
var sonames = []string{"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}

// gonumName is Name's answer on the pure-Go path.
const gonumName = "gonum (pure Go; install libopenblas0-pthread for ~10x)"

// backend is one implementation of row-major sgemm; the arguments are
// already validated.
type backend interface {
	sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	// serial reports whether a call runs on the calling thread only, so
	// that Sgemm spreads large products over goroutines itself.
	serial() bool
	name() string
}

const (
	// splitMin is the smallest product (m·n·k multiply-adds) that Sgemm
	// spreads over goroutines: below it the hand-off costs more than it saves.
	splitMin = 1 << 18
	// splitAlign rounds the rows (or columns) of each part, a multiple of
	// the library's register blocking.
	splitAlign = 16
)

// threads is the number of goroutines Sgemm spreads a large product over;
// 0 means runtime.GOMAXPROCS(0).
var threads atomic.Int64

var (
	once    sync.Once
	chosen  backend
	loadErr error
)

// current returns the backend, choosing it on first use.
func current() backend {
	once.Do(func() {
		path, set := os.LookupEnv(EnvLib)
		chosen, loadErr = choose(path, set)
	})
	return chosen
}

// choose loads the library named by override when set, else the first
// soname that loads; it falls back to gonum and returns why.
func choose(override string, set bool) (backend, error) {
	names := sonames
	if set {
		names = []string{override}
	}
	var errs []error
	for _, name := range names {
		nb, err := openNative(name)
		if err == nil {
			return nb, nil
		}
		errs = append(errs, err)
		if errors.Is(err, errNoCgo) {
			break
		}
	}
	fb := fallback()
	return fb, fmt.Errorf("blas: no native library, using %s: %w", fb.name(), errors.Join(errs...))
}

// fallback is the pure-Go path: the blocked SGEMM on this CPU's assembly
// micro-kernel (amd64 with AVX2 + FMA), else gonum.
func fallback() backend {
	if kern, isa, ok := gemm.Asm(); ok {
		return packedBackend{kern: kern, isa: isa}
	}
	return gonumBackend{}
}

// Name reports the implementation in use: "openblas /path" (or "cblas
// /path" for another CBLAS library), or the fallback (druto's Go assembly
// SGEMM, or gonum on CPUs without AVX2) with a hint.
func Name() string { return current().name() }

// Describe reports the CPU GEMM path for humans (druto detect): the
// implementation, its instruction set where it is druto's own, and the
// threads Sgemm spreads a large product over.
func Describe() string {
	be := current()
	p := int(threads.Load())
	if p == 0 {
		p = runtime.GOMAXPROCS(0)
	}
	switch b := be.(type) {
	case packedBackend:
		return fmt.Sprintf("druto Go assembly SGEMM (%s, %dx%d micro-kernel), %d threads (no native library; install libopenblas0-pthread for more)", b.isa, gemm.MR, gemm.NR, p)
	case gonumBackend:
		return fmt.Sprintf("gonum pure Go (no AVX2 kernel on this CPU), its own threads (GOMAXPROCS %d); install libopenblas0-pthread for ~10x", runtime.GOMAXPROCS(0))
	}
	if be.serial() {
		return fmt.Sprintf("%s, %d threads (goroutines, library set to 1)", be.name(), p)
	}
	return be.name() + ", the library's own threads"
}

// Native reports whether a native library is in use.
func Native() bool {
	switch current().(type) {
	case gonumBackend, packedBackend:
		return false
	}
	return true
}

// LoadError returns why no native library is in use, or nil when one is.
func LoadError() error {
	current()
	return loadErr
}

// SetThreads sets how many goroutines Sgemm spreads a large product over
// (n < 1 means runtime.GOMAXPROCS(0), the default); the setting is
// process-wide. With OpenBLAS (a library exporting openblas_set_num_threads)
// the library itself is set to one thread when loaded and Sgemm splits the
// rows (or columns) of C over goroutines, each calling it: its own thread
// pool would spin between calls and compete with the Go code that runs
// between GEMMs. A CBLAS library without that symbol, and gonum, keep their
// own threading.
func SetThreads(n int) { threads.Store(int64(max(n, 0))) }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices, where
// op(X) is X or Xᵀ as transA and transB say: op(A) is m×k, op(B) is k×n and C
// is m×n, with leading dimensions (row strides) lda, ldb and ldc. When beta
// is 0, C is not read (NaN in it does not propagate). Elements of C outside
// the m×n block are not touched. A large product is spread over the
// goroutines SetThreads allows. Sgemm may be called from several goroutines
// at once on disjoint outputs.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	p := int(threads.Load())
	if p == 0 {
		p = runtime.GOMAXPROCS(0)
	}
	return sgemm(p, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmSerial is Sgemm on the calling goroutine alone (gonum may still use
// its own), for callers that run many independent products in parallel.
func SgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	return sgemm(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemm validates and runs the product over up to p goroutines.
func sgemm(p int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if err := check(transA, transB, m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		scale(m, n, beta, c, ldc) // the product is zero: no backend call
		return nil
	}
	be := current()
	if !be.serial() || p < 2 || float64(m)*float64(n)*float64(k) < splitMin {
		be.sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return nil
	}
	split(be, p, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	return nil
}

// split computes the product as up to p independent parts, one per
// goroutine, the first on the calling one: blocks of rows of C (and of
// op(A)) when C has at least as many rows as columns, else blocks of its
// columns (and of op(B)), so that the operand every part packs whole is the
// smaller one. Each element of C is computed by one call over the full k,
// so the result does not depend on p.
func split(be backend, p int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	byRows := m >= n
	extent := n
	if byRows {
		extent = m
	}
	chunk := (extent + p - 1) / p
	chunk = (chunk + splitAlign - 1) / splitAlign * splitAlign
	part := func(lo, hi int) {
		if byRows {
			ao := lo * lda // rows lo..hi of op(A)
			if transA {
				ao = lo
			}
			be.sgemm(transA, transB, hi-lo, n, k, alpha, a[ao:], lda, b, ldb, beta, c[lo*ldc:], ldc)
			return
		}
		bo := lo // columns lo..hi of op(B)
		if transB {
			bo = lo * ldb
		}
		be.sgemm(transA, transB, m, hi-lo, k, alpha, a, lda, b[bo:], ldb, beta, c[lo:], ldc)
	}
	var wg sync.WaitGroup
	for lo := chunk; lo < extent; lo += chunk {
		wg.Go(func() { part(lo, min(lo+chunk, extent)) })
	}
	part(0, min(chunk, extent))
	wg.Wait()
}

// check validates Sgemm's arguments so that neither backend reads or writes
// outside the slices (gonum would panic, a C library would corrupt memory).
func check(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) error {
	return checkLens(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
}

// checkLens is check on the operands' lengths.
func checkLens(transA, transB bool, m, n, k int, la, lda, lb, ldb, lc, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: negative size m=%d n=%d k=%d", ErrArg, m, n, k)
	}
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: size or stride %d exceeds 32 bits", ErrArg, v)
		}
	}
	ar, ac := m, k // rows and columns of A as stored
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkMat("A", la, ar, ac, lda); err != nil {
		return err
	}
	if err := checkMat("B", lb, br, bc, ldb); err != nil {
		return err
	}
	return checkMat("C", lc, m, n, ldc)
}

// checkMat validates one stored rows×cols matrix with row stride ld.
func checkMat(what string, n, rows, cols, ld int) error {
	if ld < max(1, cols) {
		return fmt.Errorf("%w: ld%s=%d < %d columns", ErrArg, what, ld, max(1, cols))
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ld + cols; n < need {
		return fmt.Errorf("%w: %s (%d×%d, ld %d) needs %d elements, has %d", ErrArg, what, rows, cols, ld, need, n)
	}
	return nil
}

// scale sets C = beta·C (C = 0 when beta is 0, whatever C held).
func scale(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// packedBackend is druto's blocked SGEMM (internal/gemm) on an assembly
// micro-kernel. It is serial: Sgemm splits large products over goroutines.
type packedBackend struct {
	kern gemm.Kernel
	isa  string
}

func (p packedBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gemm.Sgemm(p.kern, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (packedBackend) serial() bool { return true }

func (p packedBackend) name() string {
	return fmt.Sprintf("druto Go assembly (%s; install libopenblas0-pthread for more)", p.isa)
}

// gonumBackend is the pure-Go path on CPUs without an assembly kernel.
type gonumBackend struct{}

func (gonumBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gonum.Implementation{}.Sgemm(trans(transA), trans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (gonumBackend) serial() bool { return false } // gonum spreads its own work

func (gonumBackend) name() string { return gonumName }

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
