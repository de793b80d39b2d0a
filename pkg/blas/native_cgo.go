//go:build cgo

package blas

/*
typedef void (*druto_sgemm_fn)(int, int, int, int, int, int, float,
	const float*, int, const float*, int, float, float*, int);
typedef void (*druto_int_fn)(int);

// CBLAS enums: CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112.
static void druto_sgemm(void* f, int ta, int tb, int m, int n, int k, float alpha,
		const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
	((druto_sgemm_fn)f)(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void druto_call_int(void* f, int n) { ((druto_int_fn)f)(n); }
*/
import "C"

import (
	"fmt"
	"path/filepath"
	"unsafe"
)

// nativeBackend calls cblas_sgemm of a loaded library.
type nativeBackend struct {
	lib     *library
	sgemmFn unsafe.Pointer
	single  bool   // the library was set to one thread (openblas_set_num_threads)
	label   string // "openblas /path" or "cblas /path"
}

// openNative loads name and resolves cblas_sgemm (required) and
// openblas_set_num_threads (optional; when present the library is set to
// one thread, and Sgemm spreads large products over goroutines).
func openNative(name string) (backend, error) {
	lib, err := dlOpen(name)
	if err != nil {
		return nil, err
	}
	fn, err := lib.sym("cblas_sgemm")
	if err != nil {
		if cerr := lib.close(); cerr != nil {
			return nil, fmt.Errorf("%w (and %w)", err, cerr)
		}
		return nil, err
	}
	nb := &nativeBackend{lib: lib, sgemmFn: fn}
	kind := "cblas"
	if p, err := lib.sym("openblas_set_num_threads"); err == nil {
		C.druto_call_int(p, 1)
		nb.single, kind = true, "openblas"
	}
	path, err := lib.path()
	if err != nil {
		path = name
	} else if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	nb.label = kind + " " + path
	return nb, nil
}

func (nb *nativeBackend) sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	C.druto_sgemm(nb.sgemmFn, cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		first(a), C.int(lda), first(b), C.int(ldb), C.float(beta), first(c), C.int(ldc))
}

func (nb *nativeBackend) serial() bool { return nb.single }

func (nb *nativeBackend) name() string { return nb.label }

// first points at x[0] (Sgemm has checked that x is long enough).
func first(x []float32) *C.float { return (*C.float)(unsafe.Pointer(&x[0])) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
