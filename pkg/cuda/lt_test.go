//go:build linux

package cuda

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"
)

// fakeLt is an ltAPI that records descriptor attributes, returns a fixed
// list of heuristic results and rejects the algorithms listed in reject.
type fakeLt struct {
	results []ltHeuristic
	reject  map[uint64]bool // by algo[0]
	attrs   map[int][]byte  // the last value of each descriptor attribute
	ran     []uint64        // algo[0] of every matmul queued
	desc    [2]int          // the compute and scale types of the last descriptor
	layouts []fakeLayout    // every matrix layout created, in order
	// scales holds the A and B scale pointers on the descriptor when each
	// matmul was queued (zero: unset or null).
	scales [][2]uint64
}

// fakeLayout is the arguments of one cublasLtMatrixLayoutCreate.
type fakeLayout struct {
	dtype      int
	rows, cols uint64
	ld         int64
}

func (f *fakeLt) create() (uintptr, error) { return 1, nil }
func (f *fakeLt) destroy(uintptr) error    { return nil }
func (f *fakeLt) version() uint64          { return 120000 }
func (f *fakeLt) matmulDescCreate(compute, scale int) (uintptr, error) {
	f.desc = [2]int{compute, scale}
	return 2, nil
}
func (f *fakeLt) matmulDescDestroy(uintptr) error { return nil }
func (f *fakeLt) matrixLayoutCreate(dtype int, rows, cols uint64, ld int64) (uintptr, error) {
	f.layouts = append(f.layouts, fakeLayout{dtype, rows, cols, ld})
	return 3, nil
}
func (f *fakeLt) matrixLayoutSetAttribute(uintptr, int, unsafe.Pointer, uintptr) error {
	return nil
}
func (f *fakeLt) matrixLayoutDestroy(uintptr) error  { return nil }
func (f *fakeLt) preferenceCreate() (uintptr, error) { return 4, nil }
func (f *fakeLt) preferenceDestroy(uintptr) error    { return nil }

// algoConfig reports what algoConfigSet stored (in a[1+attr]), else a
// split-K of 1 and 10·id + attr for the other attributes.
func (f *fakeLt) algoConfig(a *[8]uint64, attr int) (uint32, bool) {
	switch {
	case a[1+attr] != 0:
		return uint32(a[1+attr]), true
	case attr == ltAlgoSplitK:
		return 1, true
	}
	return uint32(a[0]*10 + uint64(attr)), true
}
func (f *fakeLt) algoConfigSet(a *[8]uint64, attr int, v uint32) error {
	a[1+attr] = uint64(v)
	return nil
}

// algoCheck accepts split-K up to 4 (k MiB of workspace each) and 16 (64
// MiB: beyond the workspace), and refuses 8.
func (f *fakeLt) algoCheck(_, _, _, _, _, _ uintptr, a *[8]uint64, out *ltHeuristic) error {
	k := a[1+ltAlgoSplitK]
	if k == 8 {
		return Error{Call: "cublasLtMatmulAlgoCheck", Code: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED"}
	}
	out.workspace = k << 20
	if k == 16 {
		out.workspace = 64 << 20
	}
	return nil
}
func (f *fakeLt) preferenceSetAttribute(uintptr, int, unsafe.Pointer, uintptr) error {
	return nil
}
func (f *fakeLt) matmulDescSetAttribute(_ uintptr, attr int, buf unsafe.Pointer, n uintptr) error {
	if f.attrs == nil {
		f.attrs = map[int][]byte{}
	}
	f.attrs[attr] = append([]byte(nil), unsafe.Slice((*byte)(buf), n)...)
	return nil
}
func (f *fakeLt) algoGetHeuristic(_, _, _, _, _, _, _ uintptr, out []ltHeuristic) (int, error) {
	return copy(out, f.results), nil
}
func (f *fakeLt) matmul(_, _ uintptr, _ unsafe.Pointer, _ DevicePtr, _ uintptr, _ DevicePtr, _ uintptr,
	_ unsafe.Pointer, _ DevicePtr, _ uintptr, _ DevicePtr, _ uintptr, algo *[8]uint64, _ DevicePtr, _ uint64, _ uintptr) error {
	if f.reject[algo[0]] {
		return Error{Call: "cublasLtMatmul", Code: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED"}
	}
	f.ran = append(f.ran, algo[0])
	var sc [2]uint64
	for i, attr := range []int{ltDescAScale, ltDescBScale} {
		if b := f.attrs[attr]; len(b) == 8 {
			sc[i] = binary.LittleEndian.Uint64(b)
		}
	}
	f.scales = append(f.scales, sc)
	return nil
}

// fakeLtHandle is a cuBLASLt handle over f on a fake driver's context, and
// a stream of it; the context closes when the test ends.
func fakeLtHandle(t *testing.T, f *fakeLt) (*LtHandle, *Stream) {
	t.Helper()
	c, s := fakeStream(t, newFakeDriver())
	return &LtHandle{l: &BLASLt{api: f}, c: c, h: 1}, s
}

func TestLtHeuristicSize(t *testing.T) {
	if n := unsafe.Sizeof(ltHeuristic{}); n != 96 {
		t.Fatalf("ltHeuristic is %d bytes; cublasLtMatmulHeuristicResult_t is 96", n)
	}
}

// TestLtCandidates: NewMatmul keeps the heuristic's valid results that fit
// the workspace, in order; Run falls through rejected candidates until one
// runs, then stays on it; UseAlgo picks one; BiasF32 sets the bias type.
func TestLtCandidates(t *testing.T) {
	f := &fakeLt{
		results: []ltHeuristic{
			{algo: [8]uint64{1}, workspace: 64 << 20}, // too much workspace
			{algo: [8]uint64{2}, state: 15},           // not valid
			{algo: [8]uint64{3}, workspace: 1 << 20},
			{algo: [8]uint64{4}},
			{algo: [8]uint64{5}},
		},
		reject: map[uint64]bool{3: true},
	}
	h, s := fakeLtHandle(t, f)
	p := LtParams{TransA: true, M: 8, N: 16, K: 8192, AType: R16BF, BType: R16BF, CType: R16BF, LDA: 8192, LDB: 8192, LDC: 8,
		Compute: Compute32F, Epilogue: EpilogueDGELUBGrad, AuxLD: 8, MaxWorkspace: 32 << 20, BiasF32: true}
	m, err := h.NewMatmul(p)
	if err != nil {
		t.Fatal(err)
	}
	// algos 3, 4, 5, then 3 split over K in 2 and in 4 (8 refused, 16 beyond the workspace)
	if m.Algos() != 5 || m.Algo() != 0 || m.WorkspaceRequired != 1<<20 {
		t.Fatalf("candidates %d, current %d, workspace %d; want 5, 0, 1 MiB", m.Algos(), m.Algo(), m.WorkspaceRequired)
	}
	if info := m.AlgoInfo(4); !strings.Contains(info, "algo 30") || !strings.Contains(info, "splitK 4") ||
		!strings.Contains(info, "reduction 2") || !strings.Contains(info, "workspace 4194304 B") {
		t.Errorf("split-K candidate: %q", info)
	}
	if b := f.attrs[ltDescBiasType]; len(b) != 4 || b[0] != byte(R32F) {
		t.Errorf("bias type attribute %v, want R32F", b)
	}
	if b := f.attrs[ltDescEpilogue]; len(b) != 4 || b[0] != byte(EpilogueDGELUBGrad) {
		t.Errorf("epilogue attribute %v", b)
	}
	args := LtArgs{Alpha: 1, A: 0x100, B: 0x200, D: 0x300, Bias: 0x400, Aux: 0x500, Workspace: 0x600, WorkspaceBytes: 32 << 20}
	for range 2 {
		if err := m.Run(s, args); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.ran) != 2 || f.ran[0] != 4 || f.ran[1] != 4 || m.Algo() != 1 {
		t.Fatalf("ran %v (current %d); want algo 4 twice after 3 was rejected", f.ran, m.Algo())
	}
	// Once one has run, a later rejection is an error, not a silent switch.
	f.reject[4] = true
	if err := m.Run(s, args); err == nil {
		t.Fatal("a proven candidate's failure was swallowed")
	}
	if err := m.UseAlgo(2); err != nil || m.Run(s, args) != nil || f.ran[len(f.ran)-1] != 5 {
		t.Fatalf("UseAlgo(2): %v, ran %v", err, f.ran)
	}
	if err := m.UseAlgo(5); err == nil {
		t.Error("UseAlgo beyond the candidates accepted")
	}
	if info := m.AlgoInfo(2); !strings.Contains(info, "algo 50") || !strings.Contains(info, "splitK 1") {
		t.Errorf("AlgoInfo(2) = %q", info)
	}
	if err := m.Run(s, LtArgs{A: 1, B: 1, D: 1, Aux: 1, WorkspaceBytes: 32 << 20}); err == nil || !strings.Contains(err.Error(), "bias") {
		t.Errorf("no bias pointer: %v", err)
	}
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}

	// Without a usable result NewMatmul fails with NOT_SUPPORTED.
	f.results = f.results[:2]
	if _, err := h.NewMatmul(p); !errors.As(err, new(Error)) || !strings.Contains(err.Error(), "NOT_SUPPORTED") {
		t.Fatalf("no candidate: %v", err)
	}
	// BiasF32 without a bias epilogue sets nothing.
	f.results, f.attrs = f.results[:0:0], nil
	f.results = append(f.results, ltHeuristic{algo: [8]uint64{9}})
	p.Epilogue = EpilogueDefault
	if _, err := h.NewMatmul(p); err != nil || f.attrs[ltDescBiasType] != nil {
		t.Fatalf("default epilogue: %v, bias type %v", err, f.attrs[ltDescBiasType])
	}
	// A large output or a short K gets no split-K variants.
	q := p
	q.M, q.N, q.LDC = 4096, 4096, 4096
	if m, err := h.NewMatmul(q); err != nil || m.Algos() != 1 {
		t.Fatalf("large output: %v", err)
	}
	q = p
	q.K = 1024
	if m, err := h.NewMatmul(q); err != nil || m.Algos() != 1 {
		t.Fatalf("short K: %v", err)
	}
	if m, err := h.NewMatmul(p); err != nil || m.Algos() != 3 { // algo 9, split in 2 and in 4
		t.Fatalf("the variants again: %v", err)
	}
}

// TestLtFP8: an FP8 matmul (the row-major out (N,OC) = a (N,C)·b (OC,C)ᵀ of
// gpu.MatmulFP8: TN, A = b, B = a) creates its layouts with the FP8 types
// and one-byte leading dimensions, an fp32 compute and scale type, and
// sets both scale pointers on the descriptor before every run, nulls
// included; FP8 parameters outside cuBLASLt's rules and scale pointers on
// a non-FP8 matmul are refused.
func TestLtFP8(t *testing.T) {
	f := &fakeLt{results: []ltHeuristic{{algo: [8]uint64{7}}}}
	h, s := fakeLtHandle(t, f)
	const N, C, OC = 64, 768, 2304
	p := LtParams{TransA: true, M: OC, N: N, K: C, AType: R8FE4M3, BType: R8FE5M2, CType: R16BF,
		LDA: C, LDB: C, LDC: OC, Compute: Compute32F, MaxWorkspace: 32 << 20}
	m, err := h.NewMatmul(p)
	if err != nil {
		t.Fatal(err)
	}
	if f.desc != [2]int{int(Compute32F), int(R32F)} {
		t.Errorf("descriptor compute/scale types %v, want %d, %d", f.desc, Compute32F, R32F)
	}
	want := []fakeLayout{{int(R8FE4M3), C, OC, C}, {int(R8FE5M2), C, N, C}, {int(R16BF), OC, N, OC}}
	if len(f.layouts) != len(want) {
		t.Fatalf("layouts %v, want %v", f.layouts, want)
	}
	for i := range want {
		if f.layouts[i] != want[i] {
			t.Errorf("layout %d: %+v, want %+v", i, f.layouts[i], want[i])
		}
	}
	if b := f.attrs[ltDescTransA]; len(b) != 4 || b[0] != 1 {
		t.Errorf("transA attribute %v, want 1", b)
	}
	if b := f.attrs[ltDescTransB]; len(b) != 4 || b[0] != 0 {
		t.Errorf("transB attribute %v, want 0", b)
	}
	if f.attrs[ltDescAScale] != nil || f.attrs[ltDescBScale] != nil {
		t.Error("scale pointers set before a run")
	}
	args := LtArgs{Alpha: 1, A: 0x100, B: 0x200, D: 0x300, AScale: 0x1000, BScale: 0x2000, Workspace: 0x600, WorkspaceBytes: 32 << 20}
	if err := m.Run(s, args); err != nil {
		t.Fatal(err)
	}
	args.AScale, args.BScale = 0x3000, 0
	if err := m.Run(s, args); err != nil {
		t.Fatal(err)
	}
	if len(f.scales) != 2 || f.scales[0] != [2]uint64{0x1000, 0x2000} || f.scales[1] != [2]uint64{0x3000, 0} {
		t.Errorf("scale pointers at each run %#x, want [0x1000 0x2000] then [0x3000 0]", f.scales)
	}

	// Refused: outside the FP8 rules, before any descriptor is made.
	for _, c := range []struct {
		name string
		edit func(q *LtParams)
	}{
		{"NN", func(q *LtParams) { q.TransA, q.LDA = false, OC }},
		{"TT", func(q *LtParams) { q.TransB, q.LDB = true, N }},
		{"one FP8 operand", func(q *LtParams) { q.BType = R16BF }},
		{"FP8 D", func(q *LtParams) { q.CType = R8FE4M3 }},
		{"tf32 compute", func(q *LtParams) { q.Compute = Compute32FFastTF32 }},
		{"K 24", func(q *LtParams) { q.K, q.LDA, q.LDB = 24, 24, 24 }},
		{"LDA 776", func(q *LtParams) { q.LDA = C + 8 }},
		{"LDC 2300", func(q *LtParams) { q.M, q.LDC = 2300, 2300 }},
	} {
		q := p
		c.edit(&q)
		f.layouts = nil
		if _, err := h.NewMatmul(q); err == nil || len(f.layouts) != 0 {
			t.Errorf("%s: %v, %d layouts made; want refused before any", c.name, err, len(f.layouts))
		}
	}
	// fp32 C/D: 2302·4 bytes are not 16-byte columns, 2300·4 are.
	q := p
	q.CType, q.M, q.LDC = R32F, 2302, 2302
	if _, err := h.NewMatmul(q); err == nil {
		t.Error("fp32 D with LDC 2302 accepted")
	}
	q.M, q.LDC = 2300, 2300
	if _, err := h.NewMatmul(q); err != nil {
		t.Errorf("fp32 D: %v", err)
	}

	// A bf16 matmul sets no scale pointers and refuses them.
	b := LtParams{TransA: true, M: OC, N: N, K: C, AType: R16BF, BType: R16BF, CType: R16BF,
		LDA: C, LDB: C, LDC: OC, Compute: Compute32F, MaxWorkspace: 32 << 20}
	f.attrs, f.scales = nil, nil
	bm, err := h.NewMatmul(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := bm.Run(s, LtArgs{Alpha: 1, A: 0x100, B: 0x200, D: 0x300, WorkspaceBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	if f.attrs[ltDescAScale] != nil || f.attrs[ltDescBScale] != nil {
		t.Error("a bf16 matmul set scale pointers")
	}
	if err := bm.Run(s, LtArgs{Alpha: 1, A: 0x100, B: 0x200, D: 0x300, AScale: 0x1000, WorkspaceBytes: 32 << 20}); err == nil {
		t.Error("scale pointers on a bf16 matmul accepted")
	}
}
