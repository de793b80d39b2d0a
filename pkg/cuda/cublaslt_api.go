package cuda

import (
	"errors"
	"fmt"
	"strings"
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

// Attribute numbers of matmul descriptors, preferences and algorithm
// configurations.
const (
	ltDescTransA    = 3
	ltDescTransB    = 4
	ltDescEpilogue  = 7
	ltDescBias      = 8
	ltDescAux       = 11
	ltDescAuxLD     = 12
	ltDescAScale    = 17 // CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
	ltDescBScale    = 18 // CUBLASLT_MATMUL_DESC_B_SCALE_POINTER
	ltDescBiasType  = 26 // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
	ltPrefMaxWS     = 1
	ltAlgoID        = 0 // CUBLASLT_ALGO_CONFIG_ID
	ltAlgoTile      = 1
	ltAlgoSplitK    = 2
	ltAlgoReduction = 3
	ltAlgoSwizzle   = 4
	ltAlgoStages    = 6
)

// LtCandidates is how many algorithms NewMatmul asks the heuristic for.
const LtCandidates = 8

// Split-K variants: for a product whose output has at most
// ltSplitKMaxOutput elements and whose K is at least ltSplitKMinK (the
// weight gradients: few output tiles for many SMs, a long K) NewMatmul
// appends the heuristic's first algorithm
// split over K in each of ltSplitKs parts (fp32 partial sums in the
// workspace) where cublasLtMatmulAlgoCheck accepts it and the first does
// not split already: more candidates for tuning and the benchmarks, never
// the default choice.
const (
	ltSplitKMaxOutput = 4 << 20
	ltSplitKMinK      = 4096
)

var ltSplitKs = [...]uint32{2, 4, 8, 16}

// LtMaxCandidates bounds LtMatmul.Algos: the heuristic's and the split-K
// variants.
const LtMaxCandidates = LtCandidates + len(ltSplitKs)

const ltReductionComputeType = 2 // CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE

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
//
// FP8 operands (AType and BType R8FE4M3 or R8FE5M2) compute
//
//	D = epilogue(alpha·scaleA·scaleB·op(A)·op(B) + beta·C)
//
// with scaleA and scaleB fp32 scalars in device memory, given with each
// run (LtArgs.AScale, BScale): the dequantisation factors, 1/s for an
// operand cast as fp8(x·s). cuBLASLt's FP8 kernels on Hopper take only
// the "TN" layout (TransA, not TransB: both operands K-major), fp32
// compute and scale, and 16-byte rows: K and LDA, LDB multiples of 16, LDC
// a multiple of 16 bytes of CType (Blackwell's are less strict; the Hopper
// rules hold for every GPU here). NewMatmul refuses FP8 parameters outside
// these rules, and an FP8 CType (an FP8 D needs a D scale, which
// druto does not pass); a type combination the library has no kernel for
// fails in its heuristic with NOT_SUPPORTED.
type LtParams struct {
	TransA, TransB      bool
	M, N, K             int
	AType, BType, CType DataType
	LDA, LDB, LDC       int
	Compute             ComputeType
	Epilogue            Epilogue // 0 means EpilogueDefault
	AuxLD               int      // leading dimension of the aux matrix (M×N), for the AUX epilogues
	MaxWorkspace        uint64   // the most workspace bytes the chosen algorithm may use
	// BiasF32 makes the bias (or bias-gradient) vector fp32 whatever D's
	// type (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE); the default is D's type.
	// Libraries that do not support it have no algorithm for the matmul.
	BiasF32 bool
	// BiasBF16 sets the bias vector's type to bf16 explicitly (FP8 GEMMs
	// with a bf16 D take their bias type from this attribute, as
	// Transformer Engine sets it).
	BiasBF16 bool
}

// LtMatmul is one configured matmul: descriptors and the algorithms
// cuBLASLt's heuristic proposed for it (up to LtCandidates, best first),
// made once and run many times. It runs the first candidate that works:
// should cublasLtMatmul reject the current one before it has ever run
// (NOT_SUPPORTED, INVALID_VALUE), Run moves on to the next.
type LtMatmul struct {
	h                 *LtHandle
	p                 LtParams
	desc, la, lb, lc  uintptr
	pref              uintptr
	cands             []ltHeuristic // no Go pointers inside: cgo may be handed one element
	cur               int           // the candidate Run uses
	proven            bool          // the current candidate has run once
	WorkspaceRequired uint64        // bytes the current candidate needs
}

// NewMatmul creates the descriptors and asks the heuristic for up to
// LtCandidates algorithms, keeping those that fit MaxWorkspace in its
// order. Operands are assumed 256-byte aligned, as Pool and Arena
// allocations are.
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
	if err := p.validateFP8(); err != nil {
		return nil, err
	}
	m := &LtMatmul{h: h, p: p}
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
		biasType := int32(R32F)
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
		if p.BiasF32 && p.Epilogue.usesBias() {
			set(ltDescBiasType, unsafe.Pointer(&biasType), 4)
		}
		biasBF16 := int32(R16BF)
		if p.BiasBF16 && !p.BiasF32 && p.Epilogue.usesBias() {
			set(ltDescBiasType, unsafe.Pointer(&biasBF16), 4)
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
		res := make([]ltHeuristic, LtCandidates)
		n, err := api.algoGetHeuristic(h.h, m.desc, m.la, m.lb, m.lc, m.lc, m.pref, res)
		if err != nil {
			return err
		}
		for _, r := range res[:min(n, len(res))] {
			if r.state == 0 && r.workspace <= p.MaxWorkspace {
				m.cands = append(m.cands, r)
			}
		}
		if len(m.cands) == 0 {
			return Error{Call: "cublasLtMatmulAlgoGetHeuristic", Code: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED"}
		}
		if uint64(p.M)*uint64(p.N) <= ltSplitKMaxOutput && p.K >= ltSplitKMinK {
			m.addSplitK(api)
		}
		return nil
	})
	if err != nil {
		m.Destroy()
		return nil, fmt.Errorf("cuda: lt matmul %dx%dx%d epilogue %d: %w", p.M, p.N, p.K, p.Epilogue, err)
	}
	m.WorkspaceRequired = m.cands[0].workspace
	return m, nil
}

// fp8 reports whether the matmul has FP8 operands.
func (p *LtParams) fp8() bool { return p.AType.FP8() || p.BType.FP8() }

// validateFP8 checks FP8 parameters against the rules of LtParams' comment
// (cublasLtMatmul's FP8 requirements), so that a violation reads as what
// it is rather than as a heuristic with no algorithm.
func (p *LtParams) validateFP8() error {
	if !p.fp8() && !p.CType.FP8() {
		return nil
	}
	cBytes := 2
	if p.CType == R32F {
		cBytes = 4
	}
	var why string
	switch {
	case p.CType.FP8():
		why = "an FP8 C/D type (it needs a D scale; not supported here)"
	case !p.AType.FP8() || !p.BType.FP8():
		why = fmt.Sprintf("one FP8 operand (types %d, %d): both must be FP8", p.AType, p.BType)
	case !p.TransA || p.TransB:
		why = fmt.Sprintf("transA=%v transB=%v: FP8 needs the TN layout (A transposed, B not)", p.TransA, p.TransB)
	case p.Compute != Compute32F:
		why = fmt.Sprintf("compute type %d: FP8 needs CUBLAS_COMPUTE_32F", p.Compute)
	case p.K%16 != 0 || p.LDA%16 != 0 || p.LDB%16 != 0:
		why = fmt.Sprintf("K=%d LDA=%d LDB=%d: FP8 needs multiples of 16", p.K, p.LDA, p.LDB)
	case p.LDC*cBytes%16 != 0:
		why = fmt.Sprintf("LDC=%d: FP8 needs 16-byte columns of C and D", p.LDC)
	default:
		return nil
	}
	return fmt.Errorf("cuda: lt matmul %dx%dx%d: %s", p.M, p.N, p.K, why)
}

// addSplitK appends the split-K variants of the first candidate that the
// library accepts (see ltSplitKs); on the context's thread.
func (m *LtMatmul) addSplitK(api ltAPI) {
	first := m.cands[0]
	if k, ok := api.algoConfig(&first.algo, ltAlgoSplitK); !ok || k > 1 {
		return
	}
	for _, k := range ltSplitKs {
		c := ltHeuristic{algo: first.algo}
		if api.algoConfigSet(&c.algo, ltAlgoSplitK, k) != nil ||
			api.algoConfigSet(&c.algo, ltAlgoReduction, ltReductionComputeType) != nil {
			return
		}
		var r ltHeuristic
		if api.algoCheck(m.h.h, m.desc, m.la, m.lb, m.lc, m.lc, &c.algo, &r) != nil || r.workspace > m.p.MaxWorkspace {
			continue
		}
		c.workspace, c.waves = r.workspace, r.waves
		m.cands = append(m.cands, c)
	}
}

// Algos returns how many candidate algorithms the matmul holds (at least 1).
func (m *LtMatmul) Algos() int { return len(m.cands) }

// Algo returns the index of the candidate Run uses.
func (m *LtMatmul) Algo() int { return m.cur }

// UseAlgo makes Run use candidate i (0 is the heuristic's first choice):
// for tuning and for timing the candidates against each other.
func (m *LtMatmul) UseAlgo(i int) error {
	if i < 0 || i >= len(m.cands) {
		return fmt.Errorf("cuda: lt matmul: algorithm %d of %d", i, len(m.cands))
	}
	m.cur, m.proven = i, false
	m.WorkspaceRequired = m.cands[i].workspace
	return nil
}

// AlgoInfo describes candidate i: cuBLASLt's algorithm id, tile, split-K
// count, reduction scheme, CTA swizzling and stages where the library
// reports them, the workspace it needs and its waves count.
func (m *LtMatmul) AlgoInfo(i int) string {
	if i < 0 || i >= len(m.cands) {
		return fmt.Sprintf("no algorithm %d of %d", i, len(m.cands))
	}
	c := &m.cands[i]
	var parts []string
	for _, a := range []struct {
		name string
		attr int
	}{{"algo", ltAlgoID}, {"tile", ltAlgoTile}, {"splitK", ltAlgoSplitK}, {"reduction", ltAlgoReduction}, {"swizzle", ltAlgoSwizzle}, {"stages", ltAlgoStages}} {
		var v uint32
		var ok bool
		_ = m.h.c.Do(func() error { v, ok = m.h.l.api.algoConfig(&c.algo, a.attr); return nil })
		if ok {
			parts = append(parts, fmt.Sprintf("%s %d", a.name, v))
		}
	}
	parts = append(parts, fmt.Sprintf("workspace %d B", c.workspace), fmt.Sprintf("waves %.2f", c.waves))
	return strings.Join(parts, ", ")
}

// LtArgs are the operands of one run of an LtMatmul.
type LtArgs struct {
	Alpha, Beta float32
	A, B, C, D  DevicePtr // C may equal D; with Beta 0 C is not read
	Bias        DevicePtr // for the bias epilogues
	Aux         DevicePtr // for the AUX and gradient epilogues
	// AScale and BScale point to one fp32 each, the dequantisation factors
	// of FP8 operands A and B (see LtParams); 0 means none (a factor of 1).
	// They are per run, as Bias is, so that one configured matmul (one
	// algorithm choice per shape) serves every layer's scales. Only FP8
	// matmuls take them.
	AScale, BScale DevicePtr
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
	if (a.AScale != 0 || a.BScale != 0) && !m.p.fp8() {
		return errors.New("cuda: lt matmul: scale pointers are for FP8 operands")
	}
	if a.WorkspaceBytes < m.WorkspaceRequired {
		return fmt.Errorf("cuda: lt matmul: the algorithm needs %d workspace bytes, got %d", m.WorkspaceRequired, a.WorkspaceBytes)
	}
	if a.C == 0 {
		a.C = a.D
	}
	api := m.h.l.api
	for {
		err := m.h.c.Do(func() error { return m.run(api, s, a) })
		if err == nil {
			m.proven = true
			return nil
		}
		var e Error
		if m.proven || m.cur+1 >= len(m.cands) || !errors.As(err, &e) || (e.Code != 15 && e.Code != 7) ||
			a.WorkspaceBytes < m.cands[m.cur+1].workspace {
			return err
		}
		// The candidate was rejected before it launched anything: the next.
		m.cur++
		m.WorkspaceRequired = m.cands[m.cur].workspace
	}
}

// run queues the matmul with the current candidate (on the context's thread).
func (m *LtMatmul) run(api ltAPI, s *Stream, a LtArgs) error {
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
	if m.p.fp8() { // every run: a run without scales must not keep the last one's
		for _, sc := range [...]struct {
			attr int
			p    DevicePtr
		}{{ltDescAScale, a.AScale}, {ltDescBScale, a.BScale}} {
			v := uint64(sc.p)
			if err := api.matmulDescSetAttribute(m.desc, sc.attr, unsafe.Pointer(&v), 8); err != nil {
				return err
			}
		}
	}
	alpha, beta := a.Alpha, a.Beta
	return api.matmul(m.h.h, m.desc, unsafe.Pointer(&alpha), a.A, m.la, a.B, m.lb,
		unsafe.Pointer(&beta), a.C, m.lc, a.D, m.lc, &m.cands[m.cur].algo, a.Workspace, a.WorkspaceBytes, s.h)
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
