package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// BLASLt is the loaded cuBLASLt library.
type BLASLt struct {
	api  ltAPI
	info LibInfo
}

// LoadBLASLt finds and loads libcublasLt.
func LoadBLASLt(o LoadOptions) (*BLASLt, error) {
	l, _, err := loadBLASLt(o)
	return l, err
}

func loadBLASLt(o LoadOptions) (*BLASLt, LibInfo, error) {
	lib, info, err := find(specLt, o)
	if err != nil {
		return nil, info, err
	}
	api, err := newLtAPI(lib)
	if err != nil {
		return nil, info, err
	}
	v := api.version() // major·10000 + minor·100 + patch
	info.Version = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	return &BLASLt{api: api, info: info}, info, nil
}

// Info describes where cuBLASLt was found and its version.
func (l *BLASLt) Info() LibInfo { return l.info }

// Epilogue is what cublasLtMatmul applies to the product before storing D
// (cublasLtEpilogue_t).
type Epilogue uint32

// Epilogues: bias is a vector of M elements (one per row of the
// column-major D, i.e. per output feature of a row-major product) in D's
// type; GELU is the tanh approximation; AUX stores the pre-activation in
// the aux buffer for backward; the gradient forms read it back.
const (
	EpilogueDefault     Epilogue = 1
	EpilogueReLU        Epilogue = 2
	EpilogueBias        Epilogue = 4
	EpilogueReLUBias    Epilogue = 6
	EpilogueGELU        Epilogue = 32
	EpilogueGELUBias    Epilogue = 36
	EpilogueGELUAux     Epilogue = 160
	EpilogueGELUAuxBias Epilogue = 164
	EpilogueDGELU       Epilogue = 192
	EpilogueDGELUBGrad  Epilogue = 208
	EpilogueBGradA      Epilogue = 256
	EpilogueBGradB      Epilogue = 512
)

func (e Epilogue) usesBias() bool {
	return e == EpilogueBias || e == EpilogueReLUBias || e == EpilogueGELUBias || e == EpilogueGELUAuxBias ||
		e == EpilogueDGELUBGrad || e == EpilogueBGradA || e == EpilogueBGradB
}

func (e Epilogue) usesAux() bool {
	return e == EpilogueGELUAux || e == EpilogueGELUAuxBias || e == EpilogueDGELU || e == EpilogueDGELUBGrad
}

// Attribute numbers of matmul descriptors and preferences.
const (
	ltDescTransA   = 3
	ltDescTransB   = 4
	ltDescEpilogue = 7
	ltDescBias     = 8
	ltDescAux      = 11
	ltDescAuxLD    = 12
	ltPrefMaxWS    = 1
)

// LtHandle is a cuBLASLt handle in one context.
type LtHandle struct {
	l *BLASLt
	c *Context
	h uintptr
}

// NewHandle creates a cuBLASLt handle in context c.
func (l *BLASLt) NewHandle(c *Context) (*LtHandle, error) {
	h := &LtHandle{l: l, c: c}
	err := c.Do(func() error {
		var err error
		h.h, err = l.api.create()
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Destroy destroys the handle.
func (h *LtHandle) Destroy() error {
	return h.c.Do(func() error { return h.l.api.destroy(h.h) })
}

// LtParams describe D = epilogue(alpha·op(A)·op(B) + beta·C) in the same
// column-major terms as Gemm; D has C's type and layout.
type LtParams struct {
	TransA, TransB      bool
	M, N, K             int
	AType, BType, CType DataType
	LDA, LDB, LDC       int
	Compute             ComputeType
	Epilogue            Epilogue // 0 means EpilogueDefault
	AuxLD               int      // leading dimension of the aux matrix (M×N), for the AUX epilogues
	MaxWorkspace        uint64   // the most workspace bytes the chosen algorithm may use
}

// LtMatmul is one configured matmul: descriptors and the algorithm chosen
// by cuBLASLt's heuristic, made once and run many times.
type LtMatmul struct {
	h                 *LtHandle
	p                 LtParams
	desc, la, lb, lc  uintptr
	pref              uintptr
	algo              *ltHeuristic // its own allocation: cgo may not see the Go pointers beside it
	WorkspaceRequired uint64       // bytes the chosen algorithm needs
}

// NewMatmul creates the descriptors and picks an algorithm. Operands are
// assumed 256-byte aligned, as Pool and Arena allocations are.
func (h *LtHandle) NewMatmul(p LtParams) (*LtMatmul, error) {
	if p.Epilogue == 0 {
		p.Epilogue = EpilogueDefault
	}
	g := Gemm{TransA: p.TransA, TransB: p.TransB, M: p.M, N: p.N, K: p.K, LDA: p.LDA, LDB: p.LDB, LDC: p.LDC, Compute: p.Compute}
	if err := g.validate(false); err != nil {
		return nil, err
	}
	if p.Epilogue.usesAux() && p.AuxLD < p.M {
		return nil, fmt.Errorf("cuda: lt matmul: aux leading dimension %d below M=%d", p.AuxLD, p.M)
	}
	m := &LtMatmul{h: h, p: p, algo: new(ltHeuristic)}
	api := h.l.api
	err := h.c.Do(func() error {
		var err error
		if m.desc, err = api.matmulDescCreate(int(p.Compute), int(R32F)); err != nil {
			return err
		}
		ta, tb := int32(0), int32(0)
		if p.TransA {
			ta = 1
		}
		if p.TransB {
			tb = 1
		}
		epi := uint32(p.Epilogue)
		auxLD := int64(p.AuxLD)
		set := func(attr int, buf unsafe.Pointer, n uintptr) {
			if err == nil {
				err = api.matmulDescSetAttribute(m.desc, attr, buf, n)
			}
		}
		set(ltDescTransA, unsafe.Pointer(&ta), 4)
		set(ltDescTransB, unsafe.Pointer(&tb), 4)
		set(ltDescEpilogue, unsafe.Pointer(&epi), 4)
		if p.Epilogue.usesAux() {
			set(ltDescAuxLD, unsafe.Pointer(&auxLD), 8)
		}
		if err != nil {
			return err
		}
		rowsA, colsA := uint64(p.M), uint64(p.K)
		if p.TransA {
			rowsA, colsA = colsA, rowsA
		}
		rowsB, colsB := uint64(p.K), uint64(p.N)
		if p.TransB {
			rowsB, colsB = colsB, rowsB
		}
		if m.la, err = api.matrixLayoutCreate(int(p.AType), rowsA, colsA, int64(p.LDA)); err != nil {
			return err
		}
		if m.lb, err = api.matrixLayoutCreate(int(p.BType), rowsB, colsB, int64(p.LDB)); err != nil {
			return err
		}
		if m.lc, err = api.matrixLayoutCreate(int(p.CType), uint64(p.M), uint64(p.N), int64(p.LDC)); err != nil {
			return err
		}
		if m.pref, err = api.preferenceCreate(); err != nil {
			return err
		}
		ws := p.MaxWorkspace
		if err = api.preferenceSetAttribute(m.pref, ltPrefMaxWS, unsafe.Pointer(&ws), 8); err != nil {
			return err
		}
		return api.algoGetHeuristic(h.h, m.desc, m.la, m.lb, m.lc, m.lc, m.pref, m.algo)
	})
	if err != nil {
		m.Destroy()
		return nil, fmt.Errorf("cuda: lt matmul %dx%dx%d epilogue %d: %w", p.M, p.N, p.K, p.Epilogue, err)
	}
	m.WorkspaceRequired = m.algo.workspace
	return m, nil
}

// LtArgs are the operands of one run of an LtMatmul.
type LtArgs struct {
	Alpha, Beta    float32
	A, B, C, D     DevicePtr // C may equal D; with Beta 0 C is not read
	Bias           DevicePtr // for the bias epilogues
	Aux            DevicePtr // for the AUX and gradient epilogues
	Workspace      DevicePtr
	WorkspaceBytes uint64
}

// Run queues the matmul on s.
func (m *LtMatmul) Run(s *Stream, a LtArgs) error {
	if m.p.Epilogue.usesBias() && a.Bias == 0 {
		return errors.New("cuda: lt matmul: the epilogue needs a bias pointer")
	}
	if m.p.Epilogue.usesAux() && a.Aux == 0 {
		return errors.New("cuda: lt matmul: the epilogue needs an aux pointer")
	}
	if a.WorkspaceBytes < m.WorkspaceRequired {
		return fmt.Errorf("cuda: lt matmul: the algorithm needs %d workspace bytes, got %d", m.WorkspaceRequired, a.WorkspaceBytes)
	}
	if a.C == 0 {
		a.C = a.D
	}
	api := m.h.l.api
	return m.h.c.Do(func() error {
		if m.p.Epilogue.usesBias() {
			b := uint64(a.Bias)
			if err := api.matmulDescSetAttribute(m.desc, ltDescBias, unsafe.Pointer(&b), 8); err != nil {
				return err
			}
		}
		if m.p.Epilogue.usesAux() {
			x := uint64(a.Aux)
			if err := api.matmulDescSetAttribute(m.desc, ltDescAux, unsafe.Pointer(&x), 8); err != nil {
				return err
			}
		}
		alpha, beta := a.Alpha, a.Beta
		return api.matmul(m.h.h, m.desc, unsafe.Pointer(&alpha), a.A, m.la, a.B, m.lb,
			unsafe.Pointer(&beta), a.C, m.lc, a.D, m.lc, m.algo, a.Workspace, a.WorkspaceBytes, s.h)
	})
}

// Destroy frees the descriptors.
func (m *LtMatmul) Destroy() error {
	api := m.h.l.api
	return m.h.c.Do(func() error {
		var errs []error
		if m.pref != 0 {
			errs = append(errs, api.preferenceDestroy(m.pref))
		}
		for _, l := range []uintptr{m.la, m.lb, m.lc} {
			if l != 0 {
				errs = append(errs, api.matrixLayoutDestroy(l))
			}
		}
		if m.desc != 0 {
			errs = append(errs, api.matmulDescDestroy(m.desc))
		}
		m.pref, m.la, m.lb, m.lc, m.desc = 0, 0, 0, 0, 0
		return errors.Join(errs...)
	})
}
