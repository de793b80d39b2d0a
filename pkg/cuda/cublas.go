//go:build cgo && linux

package cuda

// cublas.go: libcublas (11, 12, 13) through dlsym'd function pointers.

/*
#include <stdint.h>
#include <stdlib.h>

typedef int cublasStatus_t;
typedef uintptr_t cublasHandle_t;
typedef uintptr_t CUstream;
typedef uintptr_t dptr;

#define T(name) ((name##_t)fn)

typedef cublasStatus_t (*cublasCreate_v2_t)(cublasHandle_t*);
static cublasStatus_t c_cublasCreate_v2(void* fn, cublasHandle_t* h) { return T(cublasCreate_v2)(h); }
typedef cublasStatus_t (*cublasDestroy_v2_t)(cublasHandle_t);
static cublasStatus_t c_cublasDestroy_v2(void* fn, cublasHandle_t h) { return T(cublasDestroy_v2)(h); }
typedef cublasStatus_t (*cublasSetStream_v2_t)(cublasHandle_t, CUstream);
static cublasStatus_t c_cublasSetStream_v2(void* fn, cublasHandle_t h, CUstream s) { return T(cublasSetStream_v2)(h, s); }
typedef cublasStatus_t (*cublasSetMathMode_t)(cublasHandle_t, int);
static cublasStatus_t c_cublasSetMathMode(void* fn, cublasHandle_t h, int m) { return T(cublasSetMathMode)(h, m); }
typedef cublasStatus_t (*cublasSetWorkspace_v2_t)(cublasHandle_t, dptr, size_t);
static cublasStatus_t c_cublasSetWorkspace_v2(void* fn, cublasHandle_t h, dptr p, size_t n) { return T(cublasSetWorkspace_v2)(h, p, n); }
typedef cublasStatus_t (*cublasGetProperty_t)(int, int*);
static cublasStatus_t c_cublasGetProperty(void* fn, int k, int* v) { return T(cublasGetProperty)(k, v); }
typedef const char* (*cublasGetStatusName_t)(cublasStatus_t);
static const char* c_cublasGetStatusName(void* fn, cublasStatus_t s) { return T(cublasGetStatusName)(s); }

typedef cublasStatus_t (*cublasGemmEx_t)(cublasHandle_t, int, int, int, int, int,
	const void*, dptr, int, int, dptr, int, int, const void*, dptr, int, int, int, int);
static cublasStatus_t c_cublasGemmEx(void* fn, cublasHandle_t h, int ta, int tb, int m, int n, int k,
	const void* alpha, dptr A, int at, int lda, dptr B, int bt, int ldb,
	const void* beta, dptr C, int ct, int ldc, int compute, int algo) {
	return T(cublasGemmEx)(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
}

typedef cublasStatus_t (*cublasGemmStridedBatchedEx_t)(cublasHandle_t, int, int, int, int, int,
	const void*, dptr, int, int, long long, dptr, int, int, long long,
	const void*, dptr, int, int, long long, int, int, int);
static cublasStatus_t c_cublasGemmStridedBatchedEx(void* fn, cublasHandle_t h, int ta, int tb, int m, int n, int k,
	const void* alpha, dptr A, int at, int lda, long long sa, dptr B, int bt, int ldb, long long sb,
	const void* beta, dptr C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
	return T(cublasGemmStridedBatchedEx)(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb,
		beta, C, ct, ldc, sc, batch, compute, algo);
}
*/
import "C"

import "unsafe"

// cgoBLAS holds libcublas's function pointers.
type cgoBLAS struct {
	create_, destroy_, setStream_, setMathMode_, setWorkspace_, getProperty, statusName,
	gemmEx_, gemmStridedBatchedEx_ unsafe.Pointer
}

// newBLASAPI resolves libcublas's functions.
func newBLASAPI(lib Library) (blasAPI, error) {
	s := &symbols{lib: lib}
	b := &cgoBLAS{
		create_: s.need("cublasCreate_v2"), destroy_: s.need("cublasDestroy_v2"),
		setStream_: s.need("cublasSetStream_v2"), setMathMode_: s.need("cublasSetMathMode"),
		setWorkspace_: s.want("cublasSetWorkspace_v2"), getProperty: s.need("cublasGetProperty"),
		statusName: s.want("cublasGetStatusName"),
		gemmEx_:    s.need("cublasGemmEx"), gemmStridedBatchedEx_: s.need("cublasGemmStridedBatchedEx"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *cgoBLAS) check(call string, r C.cublasStatus_t) error {
	if r == 0 {
		return nil
	}
	name := codeName(blasErrorNames, "CUBLAS_STATUS", int(r))
	if b.statusName != nil {
		if s := C.c_cublasGetStatusName(b.statusName, r); s != nil {
			name = C.GoString(s)
		}
	}
	return Error{Call: call, Code: int(r), Name: name}
}

func (b *cgoBLAS) create() (uintptr, error) {
	var h C.cublasHandle_t
	return uintptr(h), b.check("cublasCreate_v2", C.c_cublasCreate_v2(b.create_, &h))
}

func (b *cgoBLAS) destroy(h uintptr) error {
	return b.check("cublasDestroy_v2", C.c_cublasDestroy_v2(b.destroy_, C.cublasHandle_t(h)))
}

func (b *cgoBLAS) setStream(h, s uintptr) error {
	return b.check("cublasSetStream_v2", C.c_cublasSetStream_v2(b.setStream_, C.cublasHandle_t(h), C.CUstream(s)))
}

func (b *cgoBLAS) setMathMode(h uintptr, mode int) error {
	return b.check("cublasSetMathMode", C.c_cublasSetMathMode(b.setMathMode_, C.cublasHandle_t(h), C.int(mode)))
}

func (b *cgoBLAS) setWorkspace(h uintptr, p DevicePtr, n uint64) error {
	if b.setWorkspace_ == nil {
		return nil // cuBLAS 11 has no user workspace; it allocates its own
	}
	return b.check("cublasSetWorkspace_v2", C.c_cublasSetWorkspace_v2(b.setWorkspace_, C.cublasHandle_t(h), C.dptr(p), C.size_t(n)))
}

func (b *cgoBLAS) property(kind int) (int, error) {
	var v C.int
	return int(v), b.check("cublasGetProperty", C.c_cublasGetProperty(b.getProperty, C.int(kind), &v))
}

func op(t bool) C.int {
	if t {
		return 1 // CUBLAS_OP_T
	}
	return 0 // CUBLAS_OP_N
}

func (b *cgoBLAS) gemmEx(h uintptr, g *Gemm) error {
	alpha, beta := g.Alpha, g.Beta
	return b.check("cublasGemmEx", C.c_cublasGemmEx(b.gemmEx_, C.cublasHandle_t(h), op(g.TransA), op(g.TransB),
		C.int(g.M), C.int(g.N), C.int(g.K), unsafe.Pointer(&alpha),
		C.dptr(g.A), C.int(g.AType), C.int(g.LDA), C.dptr(g.B), C.int(g.BType), C.int(g.LDB),
		unsafe.Pointer(&beta), C.dptr(g.C), C.int(g.CType), C.int(g.LDC), C.int(g.Compute), C.int(g.algo())))
}

func (b *cgoBLAS) gemmStridedBatchedEx(h uintptr, g *Gemm) error {
	alpha, beta := g.Alpha, g.Beta
	return b.check("cublasGemmStridedBatchedEx", C.c_cublasGemmStridedBatchedEx(b.gemmStridedBatchedEx_,
		C.cublasHandle_t(h), op(g.TransA), op(g.TransB), C.int(g.M), C.int(g.N), C.int(g.K), unsafe.Pointer(&alpha),
		C.dptr(g.A), C.int(g.AType), C.int(g.LDA), C.longlong(g.StrideA),
		C.dptr(g.B), C.int(g.BType), C.int(g.LDB), C.longlong(g.StrideB),
		unsafe.Pointer(&beta), C.dptr(g.C), C.int(g.CType), C.int(g.LDC), C.longlong(g.StrideC),
		C.int(g.Batch), C.int(g.Compute), C.int(g.algo())))
}
