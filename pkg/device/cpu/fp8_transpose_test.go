package cpu

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// TestCastTransposeFP8: q is tensor.QuantizeFP8 of x·scale, qt its
// transpose, amax is amp.Amax (the same NaN-ness, the same value when
// finite), the underflows are the nonzero finite x whose code is ±0, on
// odd shapes with ±0, ±Inf, NaN, subnormals, values that flush at the
// scale and values past max.
func TestCastTransposeFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -3e-6, 6e4, -1e5, 1e-9, -2e-8}
	for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E5M2} {
		for _, sh := range [][2]int{{1, 1}, {1, 17}, {17, 1}, {33, 100}, {64, 64}} {
			N, C := sh[0], sh[1]
			for _, withNaN := range []bool{false, true} {
				x := make([]float32, N*C)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(9)-4))
				}
				for _, v := range specials {
					x[rng.IntN(len(x))] = v
				}
				if withNaN {
					x[rng.IntN(len(x))] = float32(math.NaN())
				}
				scale := float32(37.5)
				q, qt := make([]uint8, N*C), make([]uint8, N*C)
				amax, under := CastTransposeFP8(q, qt, x, scale, f, N, C)
				want := make([]uint8, N*C)
				tensor.QuantizeFP8(want, x, scale, f)
				wantUnder := 0
				for i, v := range x {
					if v != 0 && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) && f.ToF32(want[i]) == 0 {
						wantUnder++
					}
				}
				if under != wantUnder {
					t.Errorf("%s (%d,%d): %d underflows, want %d", f, N, C, under, wantUnder)
				}
				for r := range N {
					for c := range C {
						if q[r*C+c] != want[r*C+c] || qt[c*N+r] != want[r*C+c] {
							t.Fatalf("%s (%d,%d) at (%d,%d): q %#x qt %#x, want %#x", f, N, C, r, c, q[r*C+c], qt[c*N+r], want[r*C+c])
						}
					}
				}
				ref := amp.Amax(x)
				if (amax != amax) != (ref != ref) || ref == ref && amax != ref {
					t.Errorf("%s (%d,%d) NaN %v: amax %v, amp.Amax %v", f, N, C, withNaN, amax, ref)
				}
			}
		}
	}
	if !SameFP8(0x7f, 0xfe, tensor.E5M2) || SameFP8(0x7c, 0x7d, tensor.E5M2) || !SameFP8(0xff, 0x7f, tensor.E4M3) || SameFP8(0x7e, 0x7f, tensor.E4M3) {
		t.Error("SameFP8: NaNs must match any NaN of the format, and nothing else")
	}
}

// TestDGELUCastTransposeDBiasFP8: the fused dGELU cast equals GELUBackward
// followed by CastTransposeDBiasFP8 of its output, bit for bit (q, qt,
// amax and dbias), on f32 inputs and on bf16 inputs against the same
// composition in f32 (the unfused bf16 path rounds GELUBackward's output
// to bf16 before the cast; the fused one casts the fp32 product). amax
// is added into (a larger amax stays, a smaller one is replaced, NaN in dy
// wins) and dbias is added into, from nonzero values. A pre of another
// dtype than dy's is refused.
func TestDGELUCastTransposeDBiasFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 1))
	d := ntDev(true, 2)
	scale := float32(1536) // some values saturate, some flush
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, sh := range [][2]int{{1, 1}, {1, 17}, {17, 1}, {33, 100}, {130, 70}} {
			N, C := sh[0], sh[1]
			for _, c := range []struct {
				amax0 float32
				nan   bool
			}{{0, false}, {1e6, false}, {0.5, true}} {
				dyv, prev := make([]float32, N*C), make([]float32, N*C)
				for i := range dyv {
					dyv[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(9)-4))
					prev[i] = float32(rng.NormFloat64() * 3) // both tails of gelu'
				}
				if c.nan {
					dyv[rng.IntN(len(dyv))] = float32(math.NaN())
				}
				dy, pre := tensor.New(dt, N, C), tensor.New(dt, N, C)
				if err := errors.Join(dy.SetF32(dyv), pre.SetF32(prev)); err != nil {
					t.Fatal(err)
				}
				db0 := make([]float32, C)
				for i := range db0 {
					db0[i] = float32(rng.NormFloat64())
				}
				sc, _ := tensor.FromF32([]float32{scale}, 1)
				run := func(fused bool) (q, qt, amax, dbias *tensor.Tensor) {
					q, qt = tensor.New(tensor.F8E5M2, N, C), tensor.New(tensor.F8E5M2, C, N)
					amax, _ = tensor.FromF32([]float32{c.amax0, 0}, 2)
					dbias, _ = tensor.FromF32(append([]float32(nil), db0...), C)
					if fused {
						d.DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, sc, N, C)
					} else { // the composition in f32
						dy32, _ := tensor.FromF32(dy.ToF32(), N, C)
						pre32, _ := tensor.FromF32(pre.ToF32(), N, C)
						v := tensor.New(tensor.F32, N, C)
						d.GELUBackward(v, pre32, dy32, N*C)
						d.CastTransposeDBiasFP8(q, qt, amax, dbias, v, sc, N, C)
					}
					ntSync(t, d)
					return
				}
				q, qt, amax, dbias := run(true)
				wq, wqt, wamax, wdbias := run(false)
				name := fmt.Sprintf("%s (%d,%d) amax0 %g NaN %v", dt, N, C, c.amax0, c.nan)
				if !bytes.Equal(q.Raw(), wq.Raw()) || !bytes.Equal(qt.Raw(), wqt.Raw()) {
					t.Errorf("%s: q or qt differ from GELUBackward + CastTransposeDBiasFP8", name)
				}
				if !ntSameBits(amax, wamax) || !ntSameBits(dbias, wdbias) {
					t.Errorf("%s: amax %v dbias %v, want %v %v", name, amax.F32(), dbias.F32()[:min(C, 4)], wamax.F32(), wdbias.F32()[:min(C, 4)])
				}
				// amax is max(amax0, max |v|): NaN with a NaN in dy, amax0 when larger
				a := amax.F32()[0]
				switch {
				case c.nan && a == a:
					t.Errorf("%s: amax %g, want NaN", name, a)
				case !c.nan && c.amax0 == 1e6 && a != 1e6:
					t.Errorf("%s: amax %g, want the larger amax0 kept", name, a)
				case !c.nan && c.amax0 == 0 && (a <= 0 || a >= 1e6):
					t.Errorf("%s: amax %g, want max |v|", name, a)
				}
				// dbias = db0 + the column sums of v (float64 here, to fp32 rounding)
				if c.nan {
					continue
				}
				g, p32, dy32 := dbias.F32(), pre.ToF32(), dy.ToF32()
				for col := range C {
					var s, mag float64
					for r := range N {
						x := float64(p32[r*C+col])
						tt := math.Tanh(math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x))
						gp := 0.5*(1+tt) + 0.5*x*(1-tt*tt)*math.Sqrt(2/math.Pi)*(1+3*0.044715*x*x)
						v := gp * float64(dy32[r*C+col])
						s += v
						mag += math.Abs(v)
					}
					if diff := math.Abs(float64(g[col]) - (float64(db0[col]) + s)); diff > 1e-5*(mag+math.Abs(float64(db0[col])))+1e-6 {
						t.Errorf("%s: dbias[%d] %g, want %g + %g", name, col, g[col], db0[col], s)
						break
					}
				}
			}
		}
	}
	// pre of another dtype than dy's
	N, C := 4, 8
	q, qt := tensor.New(tensor.F8E5M2, N, C), tensor.New(tensor.F8E5M2, C, N)
	amax, sc, dbias := tensor.New(tensor.F32, 2), tensor.New(tensor.F32, 1), tensor.New(tensor.F32, C)
	d.DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, tensor.New(tensor.BF16, N, C), tensor.New(tensor.F32, N, C), sc, N, C)
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "pre") {
		t.Errorf("pre f32 with dy bf16: %v, want an error naming pre", err)
	}
}

// TestTransposeFP8: the Device's TransposeFP8 writes out = inᵀ bit for bit
// in either FP8 dtype (NaN codes and all 256 codes copied, not
// converted), on odd and 16-multiple shapes, and refuses a dtype
// mismatch, a non-FP8 dtype and a short tensor, leaving out as it was.
func TestTransposeFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 46))
	d := New(device.Options{Fused: true})
	for _, dt := range []tensor.DType{tensor.F8E4M3, tensor.F8E5M2} {
		for _, sh := range [][2]int{{0, 5}, {1, 1}, {1, 17}, {17, 1}, {33, 100}, {64, 48}, {16, 256}} {
			N, C := sh[0], sh[1]
			in, out := tensor.New(dt, N, C), tensor.New(dt, C, N)
			for i := range in.U8() {
				in.U8()[i] = uint8(rng.IntN(256))
			}
			d.TransposeFP8(out, in, N, C)
			if err := d.Sync(); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			for r := range N {
				for c := range C {
					if g, w := out.U8()[c*N+r], in.U8()[r*C+c]; g != w {
						t.Fatalf("%s (%d,%d) at (%d,%d): %#x, want %#x", dt, N, C, r, c, g, w)
					}
				}
			}
		}
	}
	for name, c := range map[string]struct {
		out, in *tensor.Tensor
		shape   bool // the error wraps tensor.ErrShape
	}{"e4m3 into e5m2": {tensor.New(tensor.F8E5M2, 8, 4), tensor.New(tensor.F8E4M3, 4, 8), false},
		"in bf16":   {tensor.New(tensor.F8E5M2, 8, 4), tensor.New(tensor.BF16, 4, 8), false},
		"out short": {tensor.New(tensor.F8E5M2, 8, 3), tensor.New(tensor.F8E5M2, 4, 8), true}} {
		for i := range c.out.U8() {
			c.out.U8()[i] = 0x55
		}
		d.TransposeFP8(c.out, c.in, 4, 8)
		err := d.Sync()
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case c.shape && !errors.Is(err, tensor.ErrShape), !c.shape && !errors.Is(err, device.ErrUnsupported):
			t.Errorf("%s: %v", name, err)
		}
		if !bytes.Equal(c.out.U8(), bytes.Repeat([]byte{0x55}, len(c.out.U8()))) {
			t.Errorf("%s: out written", name)
		}
	}
}
