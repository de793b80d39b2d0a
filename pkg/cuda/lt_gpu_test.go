//go:build cgo && linux

package cuda

import (
	"errors"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ltWorkspace is the tests' cuBLASLt workspace, in bytes.
const ltWorkspace = 32 << 20

// ltSetup returns a stream, a cuBLASLt handle, the context's pool and a
// workspace of ltWorkspace bytes on the test GPU, released when t ends.
func ltSetup(t *testing.T) (*Stream, *LtHandle, *Pool, DevicePtr) {
	t.Helper()
	l, c := gpuContext(t)
	if l.BLASLt == nil {
		t.Fatalf("cuBLASLt not loaded: %+v", l.Info[2])
	}
	s, _ := c.NewStream()
	t.Cleanup(func() { s.Destroy() })
	h, err := l.BLASLt.NewHandle(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Destroy() })
	pool := c.Pool()
	ws, err := pool.Alloc(ltWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Free(ws) })
	return s, h, pool, ws
}

// TestGPULtGradEpilogues checks the backward epilogues the model uses, in
// the row-major terms of pkg/device/gpu/matmul.go, against float64:
//
//   - DGELU_BGRAD: dpre (N,C) = gelu'(pre)·(dout (N,OC)·W (OC,C)) with the
//     bf16 pre as aux, and Σ_rows dpre into the bias vector, fp32 (BiasF32)
//     where the library accepts it, else bf16;
//   - BGRADB: dW (OC,C) f32 = doutᵀ·inp and Σ_rows dout into an fp32 bias.
//
// It logs the candidates and which bias type ran, the facts the H200 run
// is for.
func TestGPULtGradEpilogues(t *testing.T) {
	s, h, pool, ws := ltSetup(t)
	const N, C, OC = 64, 256, 96
	bf := tensor.BF16
	dout, doutRaw := randMatrix(N, OC, 1, bf)
	w, wRaw := randMatrix(OC, C, OC, bf)
	pre, preRaw := randMatrix(N, C, 1, bf)
	inp, inpRaw := randMatrix(N, C, 1, bf)
	alloc := func(raw []byte, n uint64) DevicePtr {
		p, err := pool.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if raw != nil {
			err = s.CopyHtoD(p, raw)
		} else {
			err = s.Memset8(p, 0xff, n) // NaN in bf16 and fp32
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	dDout, dW, dPre, dInp := alloc(doutRaw, uint64(len(doutRaw))), alloc(wRaw, uint64(len(wRaw))), alloc(preRaw, uint64(len(preRaw))), alloc(inpRaw, uint64(len(inpRaw)))
	dDpre, dBias, dDw := alloc(nil, N*C*2), alloc(nil, C*4), alloc(nil, OC*C*4)
	defer func() {
		for _, p := range []DevicePtr{dDout, dW, dPre, dInp, dDpre, dBias, dDw} {
			_ = pool.Free(p)
		}
	}()

	// float64 reference
	a := math.Sqrt(2 / math.Pi)
	wantPre, wantPB := make([]float64, N*C), make([]float64, C)
	for i := range N {
		for j := range C {
			var y float64
			for o := range OC {
				y += float64(dout[i*OC+o]) * float64(w[o*C+j])
			}
			x := float64(pre[i*C+j])
			th := math.Tanh(a * (x + 0.044715*x*x*x))
			g := 0.5*(1+th) + 0.5*x*(1-th*th)*a*(1+3*0.044715*x*x)
			wantPre[i*C+j] = g * y
			wantPB[j] += g * y
		}
	}

	p := LtParams{M: C, N: N, K: OC, AType: R16BF, BType: R16BF, CType: R16BF, LDA: C, LDB: OC, LDC: C,
		Compute: Compute32F, Epilogue: EpilogueDGELUBGrad, AuxLD: C, MaxWorkspace: ltWorkspace, BiasF32: true}
	mm, err := h.NewMatmul(p)
	bias32 := err == nil
	if err != nil {
		t.Logf("DGELU_BGRAD with an fp32 bias vector refused (%v); the bf16 vector instead", err)
		p.BiasF32 = false
		if mm, err = h.NewMatmul(p); err != nil {
			t.Fatalf("DGELU_BGRAD: %v", err)
		}
	}
	for i := range mm.Algos() {
		t.Logf("DGELU_BGRAD candidate %d: %s", i, mm.AlgoInfo(i))
	}
	if err := mm.Run(s, LtArgs{Alpha: 1, A: dW, B: dDout, D: dDpre, Bias: dBias, Aux: dPre, Workspace: ws, WorkspaceBytes: ltWorkspace}); err != nil {
		t.Fatal(err)
	}
	gotPre := tensor.New(bf, N, C)
	biasDT := tensor.F32
	if !bias32 {
		biasDT = bf
	}
	gotPB := tensor.New(biasDT, C)
	if err := errors.Join(s.Synchronize(), s.CopyDtoH(gotPre.Raw(), dDpre), s.CopyDtoH(gotPB.Raw(), dBias)); err != nil {
		t.Fatal(err)
	}
	// cuBLASLt's GELU is its own approximation of the tanh form: scale 2.
	if err := tensor.Close(f64(gotPre.ToF32()), wantPre, bf, 2); err != nil {
		t.Errorf("DGELU_BGRAD dpre: %v", err)
	}
	if err := tensor.Close(f64(gotPB.ToF32()), wantPB, bf, 2*math.Sqrt(N)); err != nil {
		t.Errorf("DGELU_BGRAD bias gradient (%v): %v", biasDT, err)
	}
	t.Logf("DGELU_BGRAD (bias %v): dpre rel err %.3g, bias rel err %.3g", biasDT, relErr64(f64(gotPre.ToF32()), wantPre), relErr64(f64(gotPB.ToF32()), wantPB))
	_ = mm.Destroy()

	// BGRADB on the weight gradient: dW (OC,C) = doutᵀ·inp, bias (OC) = Σ_rows dout.
	wantDw, wantDb := make([]float64, OC*C), make([]float64, OC)
	for i := range N {
		for o := range OC {
			wantDb[o] += float64(dout[i*OC+o])
			for j := range C {
				wantDw[o*C+j] += float64(dout[i*OC+o]) * float64(inp[i*C+j])
			}
		}
	}
	q := LtParams{TransB: true, M: C, N: OC, K: N, AType: R16BF, BType: R16BF, CType: R32F, LDA: C, LDB: OC, LDC: C,
		Compute: Compute32F, Epilogue: EpilogueBGradB, MaxWorkspace: ltWorkspace}
	mb, err := h.NewMatmul(q)
	if err != nil {
		t.Fatalf("BGRADB: %v", err)
	}
	defer mb.Destroy()
	for i := range mb.Algos() {
		t.Logf("BGRADB candidate %d: %s", i, mb.AlgoInfo(i))
	}
	for i := range mb.Algos() { // every candidate, the split-K variants included, computes the same
		if err := mb.UseAlgo(i); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(s.Memset8(dDw, 0xff, OC*C*4), s.Memset8(dBias, 0xff, C*4)); err != nil {
			t.Fatal(err)
		}
		if err := mb.Run(s, LtArgs{Alpha: 1, A: dInp, B: dDout, D: dDw, Bias: dBias, Workspace: ws, WorkspaceBytes: ltWorkspace}); err != nil {
			t.Errorf("BGRADB candidate %d: %v", i, err)
			continue
		}
		gotDw, gotDb := tensor.New(tensor.F32, OC, C), tensor.New(tensor.F32, OC)
		if err := errors.Join(s.Synchronize(), s.CopyDtoH(gotDw.Raw(), dDw), s.CopyDtoH(gotDb.Raw(), dBias)); err != nil {
			t.Fatal(err)
		}
		if err := tensor.Close(f64(gotDw.ToF32()), wantDw, tensor.F32, N); err != nil {
			t.Errorf("BGRADB candidate %d dweight: %v", i, err)
		}
		if err := tensor.Close(f64(gotDb.ToF32()), wantDb, tensor.F32, N); err != nil {
			t.Errorf("BGRADB candidate %d dbias: %v", i, err)
		}
	}
}
