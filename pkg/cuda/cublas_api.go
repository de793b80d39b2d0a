package cuda

import (
	"errors"
	"fmt"
)

// DataType is a cudaDataType_t: an element type of cuBLAS operands.
type DataType int

// Element types of cuBLAS and cuBLASLt operands.
const (
	R32F  DataType = 0  // CUDA_R_32F
	R16F  DataType = 2  // CUDA_R_16F
	R16BF DataType = 14 // CUDA_R_16BF
	// The OCP FP8 formats (tensor.E4M3, tensor.E5M2), one byte an element:
	// cuBLASLt operands only (LtParams' AType and BType), on sm_89 and newer.
	R8FE4M3 DataType = 28 // CUDA_R_8F_E4M3
	R8FE5M2 DataType = 29 // CUDA_R_8F_E5M2
)

// FP8 reports whether t is one of the FP8 element types.
func (t DataType) FP8() bool { return t == R8FE4M3 || t == R8FE5M2 }

// ComputeType is a cublasComputeType_t: the precision products and sums
// are computed in.
type ComputeType int

// Compute types with fp32 accumulation (alpha and beta are float32 with each).
const (
	Compute32F         ComputeType = 68 // CUBLAS_COMPUTE_32F: full fp32 (16-bit inputs use tensor cores)
	Compute32FPedantic ComputeType = 69 // CUBLAS_COMPUTE_32F_PEDANTIC: no reduced-precision shortcuts
	Compute32FFastTF32 ComputeType = 77 // CUBLAS_COMPUTE_32F_FAST_TF32: fp32 inputs rounded to tf32
)

// Gemm describes C = alpha·op(A)·op(B) + beta·C in cuBLAS's column-major
// convention: op(A) is M×K, op(B) is K×N, C is M×N, and LDx is the stride
// between columns. A row-major product out(N,OC) = inp(N,C)·W(OC,C)ᵀ is, in
// these terms, TransA with M=OC, N=N, K=C, A=W (LDA=C), B=inp (LDB=C) and
// C=out (LDC=OC). Stride and Batch are used by GemmStridedBatched only.
type Gemm struct {
	TransA, TransB      bool
	M, N, K             int
	Alpha, Beta         float32
	A, B, C             DevicePtr
	AType, BType, CType DataType
	LDA, LDB, LDC       int
	Compute             ComputeType
	// Strided batched: the distance in elements between consecutive
	// matrices of each operand, and how many products.
	StrideA, StrideB, StrideC int64
	Batch                     int
}

// algo returns CUBLAS_GEMM_DEFAULT (-1): cuBLAS picks, tensor cores allowed.
func (g *Gemm) algo() int { return -1 }

// validate rejects shapes cuBLAS would reject with a less helpful status.
func (g *Gemm) validate(batched bool) error {
	if g.M <= 0 || g.N <= 0 || g.K <= 0 {
		return fmt.Errorf("cuda: gemm with empty extent M=%d N=%d K=%d", g.M, g.N, g.K)
	}
	rowsA, rowsB := g.M, g.K
	if g.TransA {
		rowsA = g.K
	}
	if g.TransB {
		rowsB = g.N
	}
	if g.LDA < rowsA || g.LDB < rowsB || g.LDC < g.M {
		return fmt.Errorf("cuda: gemm leading dimensions LDA=%d LDB=%d LDC=%d below rows %d, %d, %d",
			g.LDA, g.LDB, g.LDC, rowsA, rowsB, g.M)
	}
	if g.Compute == 0 {
		return errors.New("cuda: gemm without a compute type")
	}
	if batched && g.Batch <= 0 {
		return fmt.Errorf("cuda: strided batched gemm with batch %d", g.Batch)
	}
	return nil
}

// BLAS is the loaded cuBLAS library.
type BLAS struct {
	api  blasAPI
	info LibInfo
}

// Library property kinds of cublasGetProperty (libraryPropertyType).
const (
	propMajor = 0
	propMinor = 1
	propPatch = 2
)

// LoadBLAS finds and loads libcublas. Load cuBLASLt first (LoadBLASLt):
// libcublas needs it and the loader then reuses the one already loaded.
func LoadBLAS(o LoadOptions) (*BLAS, error) {
	b, _, err := loadBLAS(o)
	return b, err
}

func loadBLAS(o LoadOptions) (*BLAS, LibInfo, error) {
	lib, info, err := find(specBLAS, o)
	if err != nil {
		return nil, info, err
	}
	api, err := newBLASAPI(lib)
	if err != nil {
		return nil, info, err
	}
	var v [3]int
	for i, k := range []int{propMajor, propMinor, propPatch} {
		if v[i], err = api.property(k); err != nil {
			return nil, info, err
		}
	}
	info.Version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	return &BLAS{api: api, info: info}, info, nil
}

// Info describes where cuBLAS was found and its version.
func (b *BLAS) Info() LibInfo { return b.info }

// BLASHandle is a cuBLAS handle bound to a context and a stream.
type BLASHandle struct {
	b *BLAS
	c *Context
	h uintptr
}

// NewHandle creates a cuBLAS handle in context c whose calls run on s.
// workspace (bytes at ws; 0 for none) is given to cuBLAS 12+ so that it
// never allocates during a captured graph.
func (b *BLAS) NewHandle(c *Context, s *Stream, ws DevicePtr, wsBytes uint64) (*BLASHandle, error) {
	h := &BLASHandle{b: b, c: c}
	err := c.Do(func() error {
		var err error
		if h.h, err = b.api.create(); err != nil {
			return err
		}
		if err = b.api.setStream(h.h, s.h); err == nil && ws != 0 {
			err = b.api.setWorkspace(h.h, ws, wsBytes)
		}
		if err != nil {
			_ = b.api.destroy(h.h)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Math modes of SetMathMode (cublasMath_t).
const (
	MathDefault  = 0  // CUBLAS_DEFAULT_MATH
	MathPedantic = 2  // CUBLAS_PEDANTIC_MATH
	MathTF32     = 3  // CUBLAS_TF32_TENSOR_OP_MATH
	MathNoReduce = 16 // CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (or-ed in)
)

// SetMathMode sets the handle's math mode.
func (h *BLASHandle) SetMathMode(mode int) error {
	return h.c.Do(func() error { return h.b.api.setMathMode(h.h, mode) })
}

// SetStream moves the handle's later calls to s.
func (h *BLASHandle) SetStream(s *Stream) error {
	return h.c.Do(func() error { return h.b.api.setStream(h.h, s.h) })
}

// GemmEx queues one product (cublasGemmEx).
func (h *BLASHandle) GemmEx(g Gemm) error {
	if err := g.validate(false); err != nil {
		return err
	}
	return h.c.Do(func() error { return h.b.api.gemmEx(h.h, &g) })
}

// GemmStridedBatched queues g.Batch products of equally spaced matrices
// (cublasGemmStridedBatchedEx).
func (h *BLASHandle) GemmStridedBatched(g Gemm) error {
	if err := g.validate(true); err != nil {
		return err
	}
	return h.c.Do(func() error { return h.b.api.gemmStridedBatchedEx(h.h, &g) })
}

// Destroy destroys the handle.
func (h *BLASHandle) Destroy() error {
	return h.c.Do(func() error { return h.b.api.destroy(h.h) })
}
