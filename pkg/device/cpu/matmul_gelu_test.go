package cpu

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ntGELUGradRef is the float64 derivative of the tanh-form GELU.
func ntGELUGradRef(x float64) float64 {
	a := math.Sqrt(2 / math.Pi)
	u := a * (x + 0.044715*x*x*x)
	t := math.Tanh(u)
	return 0.5*(1+t) + 0.5*x*(1-t*t)*a*(1+3*0.044715*x*x)
}

// mgCase is one MatmulBackwardGELU case: inputs and starting gradients.
type mgCase struct {
	N, C, OC              int
	dout, inp, pre, w     *tensor.Tensor
	dw0, db0, dpb0        *tensor.Tensor // F32 starting gradients (accumulated into)
	doutR, preR, wR, inpR []float64
	dw0R, db0R, dpb0R     []float64
}

func mgNewCase(t *testing.T, seed uint64, dt tensor.DType, N, C, OC int) *mgCase {
	r := ntRNG(seed)
	c := &mgCase{N: N, C: C, OC: OC}
	c.dout, c.doutR = ntTensor(t, dt, ntNormal(r, N*OC, 1, 0), N, OC)
	c.pre, c.preR = ntTensor(t, dt, ntNormal(r, N*C, 2, 0), N, C)
	c.inp, c.inpR = ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
	c.w, c.wR = ntTensor(t, dt, ntNormal(r, OC*C, 1/math.Sqrt(float64(OC)), 0), OC, C)
	c.dw0, c.dw0R = ntTensor(t, tensor.F32, ntNormal(r, OC*C, 1, 0), OC, C)
	c.db0, c.db0R = ntTensor(t, tensor.F32, ntNormal(r, OC, 1, 0), OC)
	c.dpb0, c.dpb0R = ntTensor(t, tensor.F32, ntNormal(r, C, 1, 0), C)
	return c
}

// TestMatmulBackwardGELU checks both forms against float64 (dpre =
// gelu'(pre)·(dout·w) overwriting a NaN-poisoned dpre; dweight, dbias and
// dpreBias accumulating), and each form against the sequence it replaces
// (zero, MatmulBackward, GELUBackward, column sums): bit for bit in the
// decomposed form and in fp32, within one extra rounding of dpre in 16-bit
// (the fused form rounds dpre once, the sequence twice).
func TestMatmulBackwardGELU(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, sh := range [][3]int{{1, 1, 1}, {17, 7, 5}, {64, 96, 24}, {33, 384, 96}} {
			N, C, OC := sh[0], sh[1], sh[2]
			for _, f := range ntForms {
				t.Run(ntName(dt, N, C, OC, f.name), func(t *testing.T) {
					c := mgNewCase(t, uint64(N*131+C*7+OC), dt, N, C, OC)
					d := ntDev(f.fused, 2)
					dpre := tensor.New(dt, N, C)
					ntPoison(dpre)
					dw, db, dpb := ntClone(c.dw0), ntClone(c.db0), ntClone(c.dpb0)
					d.MatmulBackwardGELU(dpre, dpb, dw, db, c.dout, c.inp, c.pre, c.w, N, C, OC)
					ntSync(t, d)

					// float64 reference
					dx, dwR, dbR := mtMatmulBackRef(c.doutR, c.inpR, c.wR, N, C, OC)
					wantPre := make([]float64, N*C)
					wantPB := append([]float64(nil), c.dpb0R...)
					for i := range N {
						for j := range C {
							v := ntGELUGradRef(c.preR[i*C+j]) * dx[i*C+j]
							wantPre[i*C+j] = v
							wantPB[j] += v
						}
					}
					for i := range dwR {
						dwR[i] += c.dw0R[i]
					}
					for i := range dbR {
						dbR[i] += c.db0R[i]
					}
					sc := math.Sqrt(float64(OC))
					if dt != tensor.F32 {
						sc = 2 // the 16-bit roundings of dpre dominate
					}
					ntClose(t, "dpre", ntF64(dpre), mtRound(dt, wantPre), dt, sc)
					ntClose(t, "dweight", ntF64(dw), dwR, tensor.F32, math.Sqrt(float64(N)))
					ntClose(t, "dbias", ntF64(db), dbR, tensor.F32, math.Sqrt(float64(N)))
					// The fused form sums the fp32 terms before rounding; the
					// decomposed one sums terms rounded twice to 16 bits, whose
					// errors add up over the N rows (it is checked bit for bit
					// against its own dpre below).
					pbTol, pbScale := tensor.F32, math.Sqrt(float64(N))
					if dt != tensor.F32 && !f.fused {
						pbTol, pbScale = dt, 4*math.Sqrt(float64(N))
					}
					ntClose(t, "dpreBias", ntF64(dpb), wantPB, pbTol, pbScale)

					// the sequence the op replaces, on the same device
					sPre := tensor.New(dt, N, C)
					ntPoison(sPre)
					sdw, sdb, sdpb := ntClone(c.dw0), ntClone(c.db0), ntClone(c.dpb0)
					d.Zero(sPre)
					d.MatmulBackward(sPre, sdw, sdb, c.dout, c.inp, c.w, N, C, OC)
					d.GELUBackward(sPre, c.pre, sPre, N*C)
					d.columnSumInto(sdpb, d.gemmF32(sPre), N, C)
					ntSync(t, d)
					if !ntSameBits(dw, sdw) || !ntSameBits(db, sdb) {
						t.Errorf("dweight or dbias differ from MatmulBackward's")
					}
					if !f.fused || dt == tensor.F32 {
						if !ntSameBits(dpre, sPre) || !ntSameBits(dpb, sdpb) {
							t.Errorf("dpre or dpreBias differ in bits from the sequence it replaces")
						}
					} else {
						ntCloseT(t, "fused dpre vs the sequence", dpre, sPre, dt, 2)
					}
				})
			}
		}
	}
}

// TestMatmulBackwardGELUBadArgs: a missing operand or a wrong size is an
// error at Sync, not a panic.
func TestMatmulBackwardGELUBadArgs(t *testing.T) {
	d := ntDev(true, 1)
	f := func(n ...int) *tensor.Tensor { return tensor.New(tensor.F32, n...) }
	d.MatmulBackwardGELU(nil, nil, f(2, 3), nil, f(4, 2), f(4, 3), f(4, 3), f(2, 3), 4, 3, 2)
	if err := d.Sync(); err == nil {
		t.Error("nil dpre accepted")
	}
	d.MatmulBackwardGELU(f(4, 3), f(2), f(2, 3), nil, f(4, 2), f(4, 3), f(4, 3), f(2, 3), 4, 3, 2)
	if err := d.Sync(); err == nil {
		t.Error("dpreBias of the wrong size accepted")
	}
	d.MatmulBackwardGELU(f(4, 3), f(3), f(2, 3), f(2), f(4, 2), f(4, 3), f(4, 3), f(2, 3), 4, 3, 2)
	if err := d.Sync(); err != nil {
		t.Errorf("good arguments: %v", err)
	}
}
