//go:build cgo && linux

package cuda

// cublaslt.go: libcublasLt (11, 12, 13) through dlsym'd function pointers.

/*
#include <stdint.h>
#include <stdlib.h>

typedef int cublasStatus_t;
typedef uintptr_t h_t;   // cublasLtHandle_t, descriptors, layouts, preferences
typedef uintptr_t dptr;  // device pointers
typedef uintptr_t CUstream;

#define T(name) ((name##_t)fn)

typedef cublasStatus_t (*cublasLtCreate_t)(h_t*);
static cublasStatus_t c_cublasLtCreate(void* fn, h_t* h) { return T(cublasLtCreate)(h); }
typedef cublasStatus_t (*cublasLtDestroy_t)(h_t);
static cublasStatus_t c_cublasLtDestroy(void* fn, h_t h) { return T(cublasLtDestroy)(h); }
typedef size_t (*cublasLtGetVersion_t)(void);
static size_t c_cublasLtGetVersion(void* fn) { return T(cublasLtGetVersion)(); }
typedef cublasStatus_t (*cublasLtMatmulDescCreate_t)(h_t*, int, int);
static cublasStatus_t c_cublasLtMatmulDescCreate(void* fn, h_t* d, int c, int s) { return T(cublasLtMatmulDescCreate)(d, c, s); }
typedef cublasStatus_t (*setAttr_t)(h_t, int, const void*, size_t);
static cublasStatus_t c_setAttr(void* fn, h_t d, int a, const void* b, size_t n) { return ((setAttr_t)fn)(d, a, b, n); }
typedef cublasStatus_t (*destroyer_t)(h_t);
static cublasStatus_t c_destroy(void* fn, h_t d) { return ((destroyer_t)fn)(d); }
typedef cublasStatus_t (*cublasLtMatrixLayoutCreate_t)(h_t*, int, uint64_t, uint64_t, int64_t);
static cublasStatus_t c_cublasLtMatrixLayoutCreate(void* fn, h_t* l, int t, uint64_t r, uint64_t c, int64_t ld) {
	return T(cublasLtMatrixLayoutCreate)(l, t, r, c, ld);
}
typedef cublasStatus_t (*cublasLtMatmulPreferenceCreate_t)(h_t*);
static cublasStatus_t c_cublasLtMatmulPreferenceCreate(void* fn, h_t* p) { return T(cublasLtMatmulPreferenceCreate)(p); }
typedef cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic_t)(h_t, h_t, h_t, h_t, h_t, h_t, h_t, int, void*, int*);
static cublasStatus_t c_cublasLtMatmulAlgoGetHeuristic(void* fn, h_t h, h_t d, h_t a, h_t b, h_t c, h_t dd, h_t p,
	int req, void* out, int* n) {
	return T(cublasLtMatmulAlgoGetHeuristic)(h, d, a, b, c, dd, p, req, out, n);
}
typedef cublasStatus_t (*cublasLtMatmulAlgoConfigSetAttribute_t)(void*, int, const void*, size_t);
static cublasStatus_t c_algoConfigSet(void* fn, void* algo, int attr, const void* buf, size_t n) {
	return T(cublasLtMatmulAlgoConfigSetAttribute)(algo, attr, buf, n);
}
typedef cublasStatus_t (*cublasLtMatmulAlgoCheck_t)(h_t, h_t, h_t, h_t, h_t, h_t, const void*, void*);
static cublasStatus_t c_algoCheck(void* fn, h_t h, h_t d, h_t a, h_t b, h_t c, h_t dd, const void* algo, void* out) {
	return T(cublasLtMatmulAlgoCheck)(h, d, a, b, c, dd, algo, out);
}
typedef cublasStatus_t (*cublasLtMatmulAlgoConfigGetAttribute_t)(const void*, int, void*, size_t, size_t*);
static cublasStatus_t c_algoConfig(void* fn, const void* algo, int attr, void* buf, size_t n) {
	size_t written = 0;
	return T(cublasLtMatmulAlgoConfigGetAttribute)(algo, attr, buf, n, &written);
}
typedef cublasStatus_t (*cublasLtMatmul_t)(h_t, h_t, const void*, dptr, h_t, dptr, h_t, const void*, dptr, h_t,
	dptr, h_t, const void*, dptr, size_t, CUstream);
static cublasStatus_t c_cublasLtMatmul(void* fn, h_t h, h_t desc, const void* alpha, dptr a, h_t ad, dptr b, h_t bd,
	const void* beta, dptr c, h_t cd, dptr d, h_t dd, const void* algo, dptr ws, size_t wsn, CUstream s) {
	return T(cublasLtMatmul)(h, desc, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, ws, wsn, s);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cgoLt holds libcublasLt's function pointers.
type cgoLt struct {
	create_, destroy_, version_, descCreate, descSet, descDestroy, layoutCreate, layoutSet, layoutDestroy,
	prefCreate, prefSet, prefDestroy, heuristic, matmul_ unsafe.Pointer
	algoConfig_ unsafe.Pointer // optional: describes the chosen algorithms
	algoSet_    unsafe.Pointer // optional: split-K variants
	algoCheck_  unsafe.Pointer // optional: split-K variants
}

// newLtAPI resolves libcublasLt's functions.
func newLtAPI(lib Library) (ltAPI, error) {
	s := &symbols{lib: lib}
	l := &cgoLt{
		create_: s.need("cublasLtCreate"), destroy_: s.need("cublasLtDestroy"), version_: s.need("cublasLtGetVersion"),
		descCreate: s.need("cublasLtMatmulDescCreate"), descSet: s.need("cublasLtMatmulDescSetAttribute"),
		descDestroy: s.need("cublasLtMatmulDescDestroy"), layoutCreate: s.need("cublasLtMatrixLayoutCreate"),
		layoutSet: s.need("cublasLtMatrixLayoutSetAttribute"), layoutDestroy: s.need("cublasLtMatrixLayoutDestroy"),
		prefCreate: s.need("cublasLtMatmulPreferenceCreate"), prefSet: s.need("cublasLtMatmulPreferenceSetAttribute"),
		prefDestroy: s.need("cublasLtMatmulPreferenceDestroy"), heuristic: s.need("cublasLtMatmulAlgoGetHeuristic"),
		matmul_: s.need("cublasLtMatmul"), algoConfig_: s.want("cublasLtMatmulAlgoConfigGetAttribute"),
		algoSet_: s.want("cublasLtMatmulAlgoConfigSetAttribute"), algoCheck_: s.want("cublasLtMatmulAlgoCheck"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *cgoLt) check(call string, r C.cublasStatus_t) error {
	if r == 0 {
		return nil
	}
	return Error{Call: call, Code: int(r), Name: codeName(blasErrorNames, "CUBLAS_STATUS", int(r))}
}

func (l *cgoLt) create() (uintptr, error) {
	var h C.h_t
	return uintptr(h), l.check("cublasLtCreate", C.c_cublasLtCreate(l.create_, &h))
}

func (l *cgoLt) destroy(h uintptr) error {
	return l.check("cublasLtDestroy", C.c_cublasLtDestroy(l.destroy_, C.h_t(h)))
}

func (l *cgoLt) version() uint64 { return uint64(C.c_cublasLtGetVersion(l.version_)) }

func (l *cgoLt) matmulDescCreate(compute, scale int) (uintptr, error) {
	var d C.h_t
	return uintptr(d), l.check("cublasLtMatmulDescCreate", C.c_cublasLtMatmulDescCreate(l.descCreate, &d, C.int(compute), C.int(scale)))
}

func (l *cgoLt) matmulDescSetAttribute(d uintptr, attr int, buf unsafe.Pointer, n uintptr) error {
	return l.check("cublasLtMatmulDescSetAttribute", C.c_setAttr(l.descSet, C.h_t(d), C.int(attr), buf, C.size_t(n)))
}

func (l *cgoLt) matmulDescDestroy(d uintptr) error {
	return l.check("cublasLtMatmulDescDestroy", C.c_destroy(l.descDestroy, C.h_t(d)))
}

func (l *cgoLt) matrixLayoutCreate(dtype int, rows, cols uint64, ld int64) (uintptr, error) {
	var h C.h_t
	return uintptr(h), l.check("cublasLtMatrixLayoutCreate",
		C.c_cublasLtMatrixLayoutCreate(l.layoutCreate, &h, C.int(dtype), C.uint64_t(rows), C.uint64_t(cols), C.int64_t(ld)))
}

func (l *cgoLt) matrixLayoutSetAttribute(h uintptr, attr int, buf unsafe.Pointer, n uintptr) error {
	return l.check("cublasLtMatrixLayoutSetAttribute", C.c_setAttr(l.layoutSet, C.h_t(h), C.int(attr), buf, C.size_t(n)))
}

func (l *cgoLt) matrixLayoutDestroy(h uintptr) error {
	return l.check("cublasLtMatrixLayoutDestroy", C.c_destroy(l.layoutDestroy, C.h_t(h)))
}

func (l *cgoLt) preferenceCreate() (uintptr, error) {
	var h C.h_t
	return uintptr(h), l.check("cublasLtMatmulPreferenceCreate", C.c_cublasLtMatmulPreferenceCreate(l.prefCreate, &h))
}

func (l *cgoLt) preferenceSetAttribute(h uintptr, attr int, buf unsafe.Pointer, n uintptr) error {
	return l.check("cublasLtMatmulPreferenceSetAttribute", C.c_setAttr(l.prefSet, C.h_t(h), C.int(attr), buf, C.size_t(n)))
}

func (l *cgoLt) preferenceDestroy(h uintptr) error {
	return l.check("cublasLtMatmulPreferenceDestroy", C.c_destroy(l.prefDestroy, C.h_t(h)))
}

func (l *cgoLt) algoGetHeuristic(h, desc, a, b, c, d, pref uintptr, out []ltHeuristic) (int, error) {
	if len(out) == 0 {
		return 0, nil
	}
	var n C.int
	err := l.check("cublasLtMatmulAlgoGetHeuristic", C.c_cublasLtMatmulAlgoGetHeuristic(l.heuristic,
		C.h_t(h), C.h_t(desc), C.h_t(a), C.h_t(b), C.h_t(c), C.h_t(d), C.h_t(pref), C.int(len(out)), unsafe.Pointer(&out[0]), &n))
	return int(n), err
}

func (l *cgoLt) algoConfig(algo *[8]uint64, attr int) (uint32, bool) {
	if l.algoConfig_ == nil {
		return 0, false
	}
	var v [2]uint32 // room for an 8-byte attribute; the small ones land in v[0] (little endian)
	r := C.c_algoConfig(l.algoConfig_, unsafe.Pointer(algo), C.int(attr), unsafe.Pointer(&v[0]), 4)
	return v[0], r == 0
}

func (l *cgoLt) algoConfigSet(algo *[8]uint64, attr int, v uint32) error {
	if l.algoSet_ == nil {
		return fmt.Errorf("%w: cublasLtMatmulAlgoConfigSetAttribute", ErrSymbol)
	}
	return l.check("cublasLtMatmulAlgoConfigSetAttribute", C.c_algoConfigSet(l.algoSet_, unsafe.Pointer(algo), C.int(attr), unsafe.Pointer(&v), 4))
}

func (l *cgoLt) algoCheck(h, desc, a, b, c, d uintptr, algo *[8]uint64, out *ltHeuristic) error {
	if l.algoCheck_ == nil {
		return fmt.Errorf("%w: cublasLtMatmulAlgoCheck", ErrSymbol)
	}
	return l.check("cublasLtMatmulAlgoCheck", C.c_algoCheck(l.algoCheck_, C.h_t(h), C.h_t(desc), C.h_t(a), C.h_t(b), C.h_t(c), C.h_t(d),
		unsafe.Pointer(algo), unsafe.Pointer(out)))
}

func (l *cgoLt) matmul(h, desc uintptr, alpha unsafe.Pointer, a DevicePtr, ad uintptr, b DevicePtr, bd uintptr,
	beta unsafe.Pointer, c DevicePtr, cd uintptr, d DevicePtr, dd uintptr,
	algo *[8]uint64, ws DevicePtr, wsSize uint64, stream uintptr) error {
	return l.check("cublasLtMatmul", C.c_cublasLtMatmul(l.matmul_, C.h_t(h), C.h_t(desc), alpha,
		C.dptr(a), C.h_t(ad), C.dptr(b), C.h_t(bd), beta, C.dptr(c), C.h_t(cd), C.dptr(d), C.h_t(dd),
		unsafe.Pointer(algo), C.dptr(ws), C.size_t(wsSize), C.CUstream(stream)))
}
