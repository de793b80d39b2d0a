//go:build linux

package cuda

import (
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
}

func (f *fakeLt) create() (uintptr, error)                                       { return 1, nil }
func (f *fakeLt) destroy(uintptr) error                                          { return nil }
func (f *fakeLt) version() uint64                                                { return 120000 }
func (f *fakeLt) matmulDescCreate(int, int) (uintptr, error)                     { return 2, nil }
func (f *fakeLt) matmulDescDestroy(uintptr) error                                { return nil }
func (f *fakeLt) matrixLayoutCreate(int, uint64, uint64, int64) (uintptr, error) { return 3, nil }
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
	return nil
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
	c, err := fakeContext(newFakeDriver())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
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
	h := &LtHandle{l: &BLASLt{api: f}, c: c, h: 1}
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
