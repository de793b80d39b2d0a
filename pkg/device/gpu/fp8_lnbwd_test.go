package gpu

// fp8_lnbwd_test.go: LayerNormBackwardCastFP8 (kernels/fp8.cu's
// layernorm_backward_cast_e5m2) on the emulator, its launches, and on
// the GPU, against pkg/device/cpu's twin (LayerNormBackward, then
// CastTransposeDBiasFP8 of the updated dinp).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// lnbShapes: C 1, 33, 70 (C % 4 != 0: the general path), 64, 96, 768 and
// 1024 (the rows in registers), 1280 and 1600 (GPT-2 large and xl: the
// general path past 1024); N 1, 5, 17, 65, 130: partial blocks and
// partial 16-row chunks of qt; 64, 128: N % 16 == 0 (qt's vector stores).
var lnbShapes = [][2]int{{1, 1}, {5, 33}, {17, 64}, {130, 70}, {128, 96}, {65, 768}, {64, 1024}, {33, 1280}, {16, 1600}}

// lnbCase is one call's inputs: dout (N,C) and weight (C) of dt, the fp32
// rows inp with their mean and rstd, the residual gradient dinp0 that the
// call adds to, the starts of dweight, dbias, dbiasNext and amax.
type lnbCase struct {
	N, C          int
	s             float32
	dout, w       *tensor.Tensor
	inp, dinp0    []float32
	mean, rstd    []float32
	dw0, db0, dn0 []float32
	amax0         [2]float32
	g, wf         []float32 // dout and weight widened to fp32
}

// lnbOut is what a call leaves: the updated dinp, q, qt, the amax pair and
// the parameter gradients with their sums added.
type lnbOut struct {
	dinp       []float32
	q, qt      []byte
	amax       [2]float32
	dw, db, dn []float32
}

// lnbInput makes a case: rows spread over 2^-3 .. 2^3 (so rstd varies),
// dout N(0,1), weights N(0,1)·2^-2..2^2, dinp0 N(0,1)·2^-4..2^4 (under the
// E5M2 scale 1536 some of the new dinp saturates); row 1 (when N > 1) has
// dout 0, so its new dinp is dinp0 exactly, where zeros, values that flush
// and values past max sit.
func lnbInput(rng *tensor.RNG, dt tensor.DType, N, C int) *lnbCase {
	c := &lnbCase{N: N, C: C, s: fp8Scale(tensor.E5M2)}
	c.inp, c.dinp0 = make([]float32, N*C), make([]float32, N*C)
	g, w := make([]float32, N*C), make([]float32, C)
	for r := range N {
		sc := math.Ldexp(1, int(rng.Uint64()%7)-3)
		for i := range C {
			c.inp[r*C+i] = float32(rng.Norm()*sc + 0.1*float64(r%3))
			c.dinp0[r*C+i] = float32(rng.Norm() * math.Ldexp(1, int(rng.Uint64()%9)-4))
			g[r*C+i] = float32(rng.Norm())
		}
	}
	for i := range w {
		w[i] = float32(rng.Norm() * math.Ldexp(1, int(rng.Uint64()%5)-2))
	}
	if N > 1 {
		specials := []float32{0, float32(math.Copysign(0, -1)), 1e-12, -3e-9, 100, -1e3, 1e-3}
		for i := range C {
			g[C+i] = 0
			c.dinp0[C+i] = specials[i%len(specials)]
		}
	}
	c.dout, c.w = tensor.New(dt, N, C), tensor.New(dt, C)
	if err := errors.Join(c.dout.SetF32(g), c.w.SetF32(w)); err != nil {
		panic(err)
	}
	c.g, c.wf = c.dout.ToF32(), c.w.ToF32()
	c.mean, c.rstd = make([]float32, N), make([]float32, N)
	for r := range N {
		var m, v float64
		for _, x := range c.inp[r*C : (r+1)*C] {
			m += float64(x)
		}
		m /= float64(C)
		for _, x := range c.inp[r*C : (r+1)*C] {
			v += (float64(x) - m) * (float64(x) - m)
		}
		c.mean[r], c.rstd[r] = float32(m), float32(1/math.Sqrt(v/float64(C)+1e-5))
	}
	c.dw0, c.db0, c.dn0 = make([]float32, C), make([]float32, C), make([]float32, C)
	for i := range C {
		c.dw0[i], c.db0[i], c.dn0[i] = float32(rng.Norm()), float32(rng.Norm()), float32(rng.Norm())
	}
	c.amax0 = [2]float32{0.5, math.Float32frombits(7)} // below most |v|; 7 underflows counted before
	return c
}

func f32T(v []float32, shape ...int) *tensor.Tensor {
	t, err := tensor.FromF32(append([]float32(nil), v...), shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// lnbTwin runs pkg/device/cpu's LayerNormBackwardCastFP8 on the case.
func lnbTwin(t *testing.T, c *lnbCase) lnbOut {
	t.Helper()
	N, C := c.N, c.C
	d := cpu.New(device.Options{Fused: true})
	dinp, dw, db, dn := f32T(c.dinp0, N, C), f32T(c.dw0, C), f32T(c.db0, C), f32T(c.dn0, C)
	q, qt := tensor.New(tensor.F8E5M2, N, C), tensor.New(tensor.F8E5M2, C, N)
	amax := f32T(c.amax0[:], 2)
	d.LayerNormBackwardCastFP8(dinp, dw, db, q, qt, amax, dn, c.dout, f32T(c.inp, N, C), c.w, f32T(c.mean, N), f32T(c.rstd, N), f32T([]float32{c.s}, 1), N, C)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	return lnbOut{dinp.F32(), q.U8(), qt.U8(), [2]float32(amax.F32()), dw.F32(), db.F32(), dn.F32()}
}

// checkLNBwdCast compares a kernel's outputs with the twin's.
//
// Against its own dinp v, exactly: q = e5m2(v·s) (the conversion of
// tensor.QuantizeFP8), qt = qᵀ, amax[0] = max(amax0, max |v|) as bits,
// amax[1] = amax0's count + the underflows of v.
//
// Against the twin (whose sums run in other orders: the CPU's row means
// in float64): dinp within tol_i = 2^-20·(|dinp0_i| + |twin_i|) +
// 2^-18·rstd·A·(1+B)² of the row (A = max |w·dout|, B = max |n|: the
// rounding of the two row means and of their products, at 64 fp32 ulps);
// q the twin's code, one E5M2 rounding from it or the code of a value
// within the tolerance of the twin's dinp, for at most 2 + N·C/1000 codes
// (where the dinp difference crosses a rounding boundary); dweight,
// dbias and dbiasNext within 2^-18 of their start plus the sum of |terms|
// over the column (dbiasNext: plus the column's dinp tolerances).
func checkLNBwdCast(t *testing.T, name string, c *lnbCase, got lnbOut) {
	t.Helper()
	N, C := c.N, c.C
	want := lnbTwin(t, c)
	bad := 0
	miss := func(format string, args ...any) {
		if bad++; bad <= 6 {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	tol := make([]float64, N*C)
	m := math.Float32bits(c.amax0[0]) & 0x7fffffff
	under := math.Float32bits(c.amax0[1])
	off := 0
	for r := range N {
		var A, B float64
		s := float64(c.rstd[r])
		for i := range C {
			A = max(A, math.Abs(float64(c.wf[i])*float64(c.g[r*C+i])))
			B = max(B, math.Abs(s*(float64(c.inp[r*C+i])-float64(c.mean[r]))))
		}
		for i := range C {
			k := r*C + i
			v := got.dinp[k]
			tol[k] = math.Ldexp(math.Abs(float64(c.dinp0[k]))+math.Abs(float64(want.dinp[k])), -20) + math.Ldexp(s*A*(1+B)*(1+B), -18)
			if d := math.Abs(float64(v) - float64(want.dinp[k])); !(d <= tol[k]) {
				miss("dinp[%d,%d] %g, twin %g (tolerance %g)", r, i, v, want.dinp[k], tol[k])
			}
			bits := math.Float32bits(v) & 0x7fffffff
			m = max(m, bits)
			code := tensor.E5M2.FromF32(v * c.s)
			if code&0x7f == 0 && bits != 0 && bits < 0x7f800000 {
				under++
			}
			if !cpu.SameFP8(got.q[k], code, tensor.E5M2) || got.qt[i*N+r] != got.q[k] {
				miss("q[%d,%d] %#02x, qt %#02x, want e5m2(dinp·s) %#02x (dinp %g)", r, i, got.q[k], got.qt[i*N+r], code, v)
			}
			if got.q[k] != want.q[k] {
				off++
				// One rounding apart, or (where dinp is a small
				// difference of large terms, its tolerance a large part
				// of it) the code of a value within the tolerance of the
				// twin's dinp.
				lo := tensor.E5M2.ToF32(tensor.E5M2.FromF32(float32(float64(want.dinp[k])-tol[k]) * c.s))
				hi := tensor.E5M2.ToF32(tensor.E5M2.FromF32(float32(float64(want.dinp[k])+tol[k]) * c.s))
				if gv := tensor.E5M2.ToF32(got.q[k]); !nearE5M2(got.q[k], want.q[k]) && !(gv >= lo && gv <= hi) {
					miss("q[%d,%d] %#02x, twin %#02x: more than one rounding apart, and not the code of a value within the tolerance (dinp %g, twin %g, tolerance %g)", r, i, got.q[k], want.q[k], v, want.dinp[k], tol[k])
				}
			}
		}
	}
	if off > 2+N*C/1000 {
		miss("%d of %d codes one rounding off the twin's: more than the dinp's rounding explains", off, N*C)
	}
	if math.Float32bits(got.amax[0]) != m {
		miss("amax %g, want max(amax0, max |dinp|) %g", got.amax[0], math.Float32frombits(m))
	}
	if u := math.Float32bits(got.amax[1]); u != under {
		miss("%d underflows counted, want %d (7 before the call)", u, under)
	}
	if wm := float64(want.amax[0]); math.Abs(float64(got.amax[0])-wm) > 1e-5*wm {
		miss("amax %g, twin %g", got.amax[0], wm)
	}
	for i := range C {
		var sw, sb, sn, tn float64
		for r := range N {
			k := r*C + i
			n := float64(c.rstd[r]) * (float64(c.inp[k]) - float64(c.mean[r]))
			sw += math.Abs(n * float64(c.g[k]))
			sb += math.Abs(float64(c.g[k]))
			sn += math.Abs(float64(want.dinp[k]))
			tn += tol[k]
		}
		for _, x := range []struct {
			what           string
			got, want, st0 float32
			mag, extra     float64
		}{{"dweight", got.dw[i], want.dw[i], c.dw0[i], sw, 0}, {"dbias", got.db[i], want.db[i], c.db0[i], sb, 0},
			{"dbiasNext", got.dn[i], want.dn[i], c.dn0[i], sn, tn}} {
			tl := math.Ldexp(math.Abs(float64(x.st0))+x.mag, -18) + x.extra
			if d := math.Abs(float64(x.got) - float64(x.want)); !(d <= tl) {
				miss("%s[%d] %g, twin %g (tolerance %g)", x.what, i, x.got, x.want, tl)
			}
		}
	}
	if bad > 6 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
}

// lnbParts returns layernorm_backward_cast_e5m2's partials in its order:
// for block b (rows lnb8RowsFor(C)·b ..), part[b] = [Σ n·dout | Σ dout] and dpart[b] =
// Σ v (v the updated dinp), with n = rstd·(x - mean) and n·dout each
// rounded to fp32. Fast path (fast): each warp w of 4 sums rows w, w+4,
// ... of the block from 0 in row order, the warps' sums added in warp
// order; general path: the block's rows in order from 0.
func lnbParts(c *lnbCase, v []float32, fast bool) (part, dpart []float32) {
	N, C := c.N, c.C
	rows := lnb8RowsFor(C)
	nb := blocks(N, rows)
	part, dpart = make([]float32, nb*2*C), make([]float32, nb*C)
	warps, stride := lnb8Block/32, lnb8Block/32
	if !fast {
		warps, stride = 1, 1
	}
	for b := range nb {
		for i := range C {
			var tw, tb, tn float32
			for w := range warps {
				var aw, ab, an float32
				for r := rows*b + w; r < min(N, rows*(b+1)); r += stride {
					k := r*C + i
					n := float32(c.rstd[r] * float32(c.inp[k]-c.mean[r]))
					aw = float32(aw + float32(n*c.g[k]))
					ab = float32(ab + c.g[k])
					an = float32(an + v[k])
				}
				if w == 0 {
					tw, tb, tn = aw, ab, an
				} else {
					tw, tb, tn = float32(tw+aw), float32(tb+ab), float32(tn+an)
				}
			}
			part[b*2*C+i], part[b*2*C+C+i], dpart[b*C+i] = tw, tb, tn
		}
	}
	return part, dpart
}

// emuLNB runs layernorm_backward_cast_e5m2 on the emulator and returns its
// outputs, dweight, dbias and dbiasNext its partials added to the starts
// in block order; it checks the partials bit for bit against lnbParts.
func emuLNB(t *testing.T, bin string, c *lnbCase, name string, vec, vq, vc, rev int) lnbOut {
	t.Helper()
	N, C := c.N, c.C
	le := func(b []byte, v []float32) []byte {
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	in := le(nil, []float32{c.s})
	in = append(in, c.dout.Raw()...)
	in = le(le(in, c.inp), c.dinp0)
	in = append(in, c.w.Raw()...)
	in = le(le(in, c.mean), c.rstd)
	out := runEmu(t, bin, in, "lbio", fmt.Sprint(N), fmt.Sprint(C), fmt.Sprint(vec), fmt.Sprint(vq), fmt.Sprint(vc), fmt.Sprint(rev), fmt.Sprint(lnb8RowsFor(C)))
	nb := blocks(N, lnb8RowsFor(C))
	if want := 4*N*C + 2*N*C + 8 + 4*nb*3*C; len(out) != want {
		t.Fatalf("%s: %d bytes out, want %d", name, len(out), want)
	}
	f32s := func(b []byte, n int) ([]float32, []byte) {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, b[4*n:]
	}
	var o lnbOut
	o.dinp, out = f32s(out, N*C)
	o.q, o.qt, out = out[:N*C], out[N*C:2*N*C], out[2*N*C:]
	o.amax = emuAmax(out)
	part, out := f32s(out[8:], nb*2*C)
	dpart, _ := f32s(out, nb*C)
	// the amax start: the emulator starts from 0 and no counts
	o.amax[0] = math.Float32frombits(max(math.Float32bits(o.amax[0]), math.Float32bits(c.amax0[0])))
	o.amax[1] = math.Float32frombits(math.Float32bits(o.amax[1]) + math.Float32bits(c.amax0[1]))
	wp, wd := lnbParts(c, o.dinp, vec == 1 && C <= lnFastMaxC)
	bad := 0
	for i := range part {
		if math.Float32bits(part[i]) != math.Float32bits(wp[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%s: part[%d] %g, want %g (the kernel's order)", name, i, part[i], wp[i])
			}
		}
	}
	for i := range dpart {
		if math.Float32bits(dpart[i]) != math.Float32bits(wd[i]) {
			if bad++; bad <= 6 {
				t.Errorf("%s: dpart[%d] %g, want %g (the kernel's order)", name, i, dpart[i], wd[i])
			}
		}
	}
	o.dw, o.db, o.dn = append([]float32(nil), c.dw0...), append([]float32(nil), c.db0...), append([]float32(nil), c.dn0...)
	for b := range nb {
		for i := range C {
			o.dw[i] += part[b*2*C+i]
			o.db[i] += part[b*2*C+C+i]
			o.dn[i] += dpart[b*C+i]
		}
	}
	return o
}

// TestLayerNormBackwardCastFP8EmulatorMatchesCPU runs
// layernorm_backward_cast_e5m2 compiled for the host (kernels/emu/fp8)
// on lnbShapes for every dtype, with the paths the launcher takes (blocks
// in order) and with every path scalar (blocks reversed): its partials bit
// for bit in the kernel's order (lnbParts), the rest against the CPU twin
// (checkLNBwdCast). Needs g++, not a GPU.
func TestLayerNormBackwardCastFP8EmulatorMatchesCPU(t *testing.T) {
	rng := tensor.NewRNG(45)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		for _, sh := range lnbShapes {
			N, C := sh[0], sh[1]
			c := lnbInput(rng, dt, N, C)
			vec, vc := 0, 0
			if C%4 == 0 && C <= lnFastMaxC {
				vec = 1
			}
			if N%16 == 0 {
				vc = 1
			}
			for _, run := range [][4]int{{vec, 1, vc, 0}, {0, 0, 0, 1}} {
				name := fmt.Sprintf("emulated %s N %d C %d vec (%d,%d,%d) reverse %d", dt, N, C, run[0], run[1], run[2], run[3])
				checkLNBwdCast(t, name, c, emuLNB(t, bin, c, name, run[0], run[1], run[2], run[3]))
			}
		}
	}
}

// TestLaunchLayerNormBackwardCastFP8 (any machine): the kernel, its PTX
// signature, its vector flags and partials, layernorm_reduce and
// matmul_bias_grad over them; refusals.
func TestLaunchLayerNormBackwardCastFP8(t *testing.T) {
	sigs := signatures(t)
	f32 := tensor.F32
	for _, dt := range floatDTypes {
		for _, c := range []struct{ N, C, vec, vecCol int }{{200, 48, 1, 0}, {128, 96, 1, 1}, {130, 70, 0, 0}, {64, 1280, 0, 1}, {16, 2048, 0, 1}} {
			N, C := c.N, c.C
			dw, db, dn := dev(f32, C), dev(f32, C), dev(f32, C)
			got, err := hooked(t, true, func(d *Device) {
				q, qt := cuda.DevicePtr(dev(f32, 1).Dev), cuda.DevicePtr(dev(f32, 1).Dev)
				if err := d.layerNormBackwardCastFP8P(dev(f32, N, C), dw, db, q, qt, dev(f32, 2), dn, dev(dt, N, C), dev(f32, N, C), dev(dt, C), dev(f32, N), dev(f32, N), dev(f32, 1), N, C); err != nil {
					t.Errorf("%s: %v", dt, err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s N %d C %d", dt, N, C)
			names := checkSigs(t, name, sigs, got)
			if len(names) != 3 || names[0] != lnBwdFP8Kernel || got[0].dt != dt || names[1] != "layernorm_reduce" || got[1].dt != dt || names[2] != kernBiasGrad || got[2].dt != f32 {
				t.Fatalf("%s: launches %v, want %s/%s, layernorm_reduce/%s, %s/f32", name, names, lnBwdFP8Kernel, dt, dt, kernBiasGrad)
			}
			rows := lnb8RowsFor(C)
			nb := blocks(N, rows)
			k, r, b := got[0].args, got[1].args, got[2].args
			if k[12] != N || k[13] != C || k[14] != rows || k[15] != c.vec || k[16] != 1 || k[17] != c.vecCol {
				t.Errorf("%s: N, C, rows, vec, vecQ, vecCol %v, want %d %d %d %d 1 %d", name, k[12:], N, C, rows, c.vec, c.vecCol)
			}
			if k[2] != k[1].(cuda.DevicePtr)+cuda.DevicePtr(nb*2*C*4) {
				t.Errorf("%s: dpart %v, want part %v + %d bytes", name, k[2], k[1], nb*2*C*4)
			}
			if r[0] != cuda.DevicePtr(dw.Dev) || r[1] != cuda.DevicePtr(db.Dev) || r[2] != k[1] || r[3] != nb || r[4] != C {
				t.Errorf("%s: layernorm_reduce args %v, want dweight, dbias, the kernel's part, %d blocks, C %d", name, r, nb, C)
			}
			if b[0] != cuda.DevicePtr(dn.Dev) || b[1] != k[2] || b[2] != nb || b[3] != C {
				t.Errorf("%s: matmul_bias_grad args %v, want dbiasNext, the kernel's dpart, %d blocks, C %d", name, b, nb, C)
			}
		}
	}
	const N, C = 64, 96
	bf := tensor.BF16
	for _, c := range []struct {
		name                         string
		C                            int
		dinp, inp, dout, w, dn, amax *tensor.Tensor
	}{
		{"C past 2048", 2049, dev(f32, N, 2049), dev(f32, N, 2049), dev(bf, N, 2049), dev(bf, 2049), dev(f32, 2049), dev(f32, 2)},
		{"dinp bf16", C, dev(bf, N, C), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(f32, C), dev(f32, 2)},
		{"inp bf16", C, dev(f32, N, C), dev(bf, N, C), dev(bf, N, C), dev(bf, C), dev(f32, C), dev(f32, 2)},
		{"weight f16, dout bf16", C, dev(f32, N, C), dev(f32, N, C), dev(bf, N, C), dev(tensor.F16, C), dev(f32, C), dev(f32, 2)},
		{"dbiasNext of C-1", C, dev(f32, N, C), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(f32, C-1), dev(f32, 2)},
		{"dbiasNext on the host", C, dev(f32, N, C), dev(f32, N, C), dev(bf, N, C), dev(bf, C), tensor.New(f32, C), dev(f32, 2)},
		{"amax of 1", C, dev(f32, N, C), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(f32, C), dev(f32, 1)},
	} {
		var refused error
		got, err := hooked(t, true, func(d *Device) {
			refused = d.layerNormBackwardCastFP8P(c.dinp, dev(f32, c.C), dev(f32, c.C), 1, 1, c.amax, c.dn, c.dout, c.inp, c.w, dev(f32, N), dev(f32, N), dev(f32, 1), N, c.C)
		})
		if !errors.Is(refused, ErrFP8Args) || !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: %v (recorded: %v), %d launches; want ErrFP8Args and none", c.name, refused, err, len(got))
		}
	}
	// the exported method: q and qt of E4M3 are refused
	got, err := hooked(t, true, func(d *Device) {
		d.LayerNormBackwardCastFP8(dev(f32, N, C), dev(f32, C), dev(f32, C), dev(tensor.F8E4M3, N, C), dev(tensor.F8E4M3, C, N), dev(f32, 2), dev(f32, C),
			dev(bf, N, C), dev(f32, N, C), dev(bf, C), dev(f32, N), dev(f32, N), dev(f32, 1), N, C)
	})
	if !errors.Is(err, ErrFP8Args) || len(got) != 0 {
		t.Errorf("q of E4M3: recorded %v, %d launches; want ErrFP8Args and none", err, len(got))
	}
}

// TestGPULayerNormBackwardCastFP8: the kernel on the GPU against the CPU
// twin (checkLNBwdCast), every dtype, lnbShapes and GPT-2's 8192×768 and
// xl's 2048×1600, q and qt poisoned first. Needs sm_90.
func TestGPULayerNormBackwardCastFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the layernorm backward's cast needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		for _, sh := range append(append([][2]int(nil), lnbShapes...), [2]int{8192, 768}, [2]int{2048, 1600}) {
			N, C := sh[0], sh[1]
			c := lnbInput(rng, dt, N, C)
			dinp, dw, db, dn := toGPU(t, g, f32T(c.dinp0, N, C)), toGPU(t, g, f32T(c.dw0, C)), toGPU(t, g, f32T(c.db0, C)), toGPU(t, g, f32T(c.dn0, C))
			amax := toGPU(t, g, f32T(c.amax0[:], 2))
			q, qt := fp8Buf(t, g, N*C, 0xa5), fp8Buf(t, g, N*C, 0x5a)
			if err := g.layerNormBackwardCastFP8P(dinp, dw, db, cuda.DevicePtr(q.Dev), cuda.DevicePtr(qt.Dev), amax, dn, toGPU(t, g, c.dout),
				toGPU(t, g, f32T(c.inp, N, C)), toGPU(t, g, c.w), toGPU(t, g, f32T(c.mean, N)), toGPU(t, g, f32T(c.rstd, N)), toGPU(t, g, f32T([]float32{c.s}, 1)), N, C); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			out := lnbOut{toHost(t, g, dinp).F32(), fp8Download(t, g, q, 0, N*C), fp8Download(t, g, qt, 0, N*C), [2]float32(toHost(t, g, amax).F32()),
				toHost(t, g, dw).F32(), toHost(t, g, db).F32(), toHost(t, g, dn).F32()}
			checkLNBwdCast(t, fmt.Sprintf("%s N %d C %d", dt, N, C), c, out)
		}
	}
}

// BenchmarkGPULayerNormBackwardCastFP8 times LayerNormBackwardCastFP8
// (layernorm_backward_cast_e5m2, layernorm_reduce and matmul_bias_grad)
// against what it replaces, LayerNormBackward then CastTransposeDBiasFP8
// of the updated dinp, at GPT-2's widths with bf16 dout and weight, with
// CUDA events (cuda.Context.Median of 20), inputs zeroed; it reports both
// times, the fused form's share and its GB/s (dout, inp and dinp read,
// dinp, q and qt written: 16 bytes an element).
func BenchmarkGPULayerNormBackwardCastFP8(b *testing.B) {
	fx.once.Do(fx.setup)
	if fx.err != nil {
		testreq.Skip(b, "DRUTO_REQUIRE_GPU", "no usable GPU: %v", fx.err)
	}
	g := fx.fused
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(b, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the layernorm backward's cast needs sm_90)", g.Name())
	}
	time1 := func(fn func() error) (float64, error) { // ms, the median of 20 event-timed runs
		d, err := g.ctx.Median(g.stream, 20, fn)
		return float64(d) / float64(time.Millisecond), err
	}
	dt, f32 := tensor.BF16, tensor.F32
	for _, sh := range [][2]int{{16384, 768}, {8192, 1024}, {8192, 1280}, {8192, 1600}} {
		N, C := sh[0], sh[1]
		var ts []*tensor.Tensor
		alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
			t, err := g.Alloc(dt, shape...)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.stream.Memset8(cuda.DevicePtr(t.Dev), 0, uint64(t.Bytes())); err != nil {
				b.Fatal(err)
			}
			ts = append(ts, t)
			return t
		}
		dinp, inp, dout, w := alloc(f32, N, C), alloc(f32, N, C), alloc(dt, N, C), alloc(dt, C)
		dw, db, dn, mean, rstd := alloc(f32, C), alloc(f32, C), alloc(f32, C), alloc(f32, N), alloc(f32, N)
		amax, scale, qs := alloc(f32, 2), alloc(f32, 1), alloc(tensor.I32, N*C/2) // q and qt, N·C bytes each
		q := cuda.DevicePtr(qs.Dev)
		qt := q + cuda.DevicePtr(N*C)
		b.Run(fmt.Sprintf("%s_%dx%d", dt, N, C), func(b *testing.B) {
			for range b.N {
				fms, err := time1(func() error {
					return g.layerNormBackwardCastFP8P(dinp, dw, db, q, qt, amax, dn, dout, inp, w, mean, rstd, scale, N, C)
				})
				if err != nil {
					b.Fatal(err)
				}
				sms, err := time1(func() error {
					g.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C)
					return g.castTransposeDBiasFP8P(q, qt, amax, dn, dinp, scale, N, C)
				})
				if err != nil {
					b.Fatal(err)
				}
				gbps := float64(16*N*C) / fms / 1e6
				b.ReportMetric(fms*1e3, "us")
				b.ReportMetric(sms*1e3, "us-split")
				b.ReportMetric(100*fms/sms, "%split")
				b.ReportMetric(gbps, "GB/s")
				b.Logf("(%d,%d): fused %.1f µs (%.0f GB/s), LayerNormBackward + CastTransposeDBiasFP8 %.1f µs: %.0f%%", N, C, fms*1e3, gbps, sms*1e3, 100*fms/sms)
			}
		})
		if err := g.Sync(); err != nil {
			b.Fatal(err)
		}
		for _, t := range ts {
			g.Free(t)
		}
	}
}
