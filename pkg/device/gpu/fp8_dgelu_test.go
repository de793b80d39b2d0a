package gpu

// fp8_dgelu_test.go: DGELUCastTransposeDBiasFP8, the FP8 backward's fused
// dGELU cast (kernels/fp8.cu's dgelu_cast_transpose_dbias_e5m2), against
// pkg/device/cpu's twin: on the host emulator, its launches (any machine)
// and on the GPU.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// dgeluPre returns N·C pre-activations rounded to dt: 3·N(0,1) (both
// tails of gelu', its zero near -0.75) and, in the first elements, a
// sweep over [-12, 12), where gelu_grad_lean's exp saturates. Finite, as
// the fc layer's output is.
func dgeluPre(rng *tensor.RNG, dt tensor.DType, N, C int) *tensor.Tensor {
	v := make([]float32, N*C)
	for i := range v {
		v[i] = float32(3 * rng.Norm())
	}
	for i := 0; i < len(v) && i < 4096; i++ {
		v[i] = -12 + 24*float32(i)/4096
	}
	h := tensor.New(dt, N, C)
	if err := h.SetF32(v); err != nil {
		panic(err)
	}
	return h
}

// dgeluV is v = gelu'(pre)·dy as pkg/device/cpu computes it (its
// GELUBackward in f32: the twin's derivative, the same bits).
func dgeluV(t *testing.T, dy, pre []float32, N, C int) []float32 {
	t.Helper()
	d := cpu.New(device.Options{Fused: true})
	v := tensor.New(tensor.F32, N, C)
	hd, _ := tensor.FromF32(dy, N, C)
	hp, _ := tensor.FromF32(pre, N, C)
	d.GELUBackward(v, hp, hd, N*C)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	return v.F32()
}

// dgeluAbsErr bounds |gelu_grad_lean(x) - the CPU's gelu'(x)| for all x:
// the CPU's fp32 tanh form is up to ~1e-6 off in the left tail (x near -5,
// where t + 1 and 1 - t·t cancel; it gives 0 from about -5.7 on, where
// gelu' is still ~-5e-9), gelu_grad_lean ~1e-7 there.
const dgeluAbsErr = 2e-6

// checkDGELUFP8 compares the fused dGELU cast's q, qt, amax, part (the
// tiles' column sums; nil on the GPU) and dbias (dbias0 plus the sums; nil
// to skip) with cpu.DGELUCastTransposeDBiasFP8 on dy and pre, allowing for
// the two derivatives' difference: each v_i within tol_i = 2^-20·|v_i|
// (gelu_grad_lean is a few fp32 ulps from the CPU's tanh form where gelu'
// is not tiny) + dgeluAbsErr·|dy_i| (the left tail) of the twin's.
//
// q: the twin's code, or the rounding of a value within tol_i of the
// twin's v: from pre = -3 up (the body, where the CPU's gelu' is close)
// for at most one code in a thousand over a dtype's cases (bodyCodes; a
// small case may hold a few more by chance), mostly one E5M2 step where the few
// ulps cross a rounding boundary, a few subnormal steps near gelu's zero
// (pre ≈ -0.752, where v is within the kernel's ~1e-7 absolute error of 0:
// the H100 gave 0x14 for the twin's 0x10 at dy 10); in the left tail,
// with a large E5M2 scale, possibly a few subnormal steps. Where
// dy is ±Inf and the twin's v NaN (0·Inf: its gelu' is 0 in the far left
// tail, the kernel's tiny), ±max or NaN. qt exactly the kernel's qᵀ; amax
// within a relative 1e-6 (or both non-finite); part and dbias within fp32
// rounding of the sums (2^-20 of the sum of |v|, and of |dbias0|) plus the
// sum of tol_i (both non-finite where a column holds a non-finite dy). It
// returns how many codes differ from the twin's in the body and in the
// tail.
func checkDGELUFP8(t *testing.T, name string, q, qt []byte, pair [2]float32, part, dbias, dbias0, dy, pre []float32, scale float32, N, C int) (body, tail int) {
	t.Helper()
	f := tensor.E5M2
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wdb := append([]float32(nil), dbias0...)
	wamax, wunder := cpu.DGELUCastTransposeDBiasFP8(wq, wqt, wdb, dy, pre, scale, N, C)
	amax := pair[0]
	v := dgeluV(t, dy, pre, N, C)
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	tol := make([]float64, N*C)
	for i := range tol {
		tol[i] = math.Ldexp(math.Abs(float64(v[i])), -20) + dgeluAbsErr*math.Abs(float64(dy[i]))
	}
	// within reports whether code x is the rounding of a value within
	// tol_i of v_i: between the codes of the interval's ends (rounding is
	// monotone).
	within := func(x uint8, i int) bool {
		if !finite(v[i]) || !finite(dy[i]) {
			return cpu.IsNaNFP8(x, f) || x&0x7f == 0x7b // NaN or ±max (saturated ±Inf)
		}
		lo := f.ToF32(f.FromF32(float32((float64(v[i]) - tol[i]) * float64(scale))))
		hi := f.ToF32(f.FromF32(float32((float64(v[i]) + tol[i]) * float64(scale))))
		return lo <= f.ToF32(x) && f.ToF32(x) <= hi
	}
	bad := 0
	for r := range N {
		for c := range C {
			i := r*C + c
			ok := cpu.SameFP8(q[i], wq[i], f)
			if !ok && pre[i] >= -3 {
				body++
				ok = within(q[i], i)
			} else if !ok {
				tail++
				ok = within(q[i], i)
			}
			if !ok || q[i] != qt[c*N+r] {
				if bad++; bad <= 5 {
					t.Errorf("%s: q[%d,%d] %#02x (dy %g, pre %g, v %g), twin %#02x; qt %#02x", name, r, c, q[i], dy[i], pre[i], v[i], wq[i], qt[c*N+r])
				}
			}
		}
	}
	// Underflows: the twin's count, give or take the codes that differ and
	// the zero codes of gelu's left tail (one derivative 0, the other tiny).
	if u, z := int(math.Float32bits(pair[1])), leftTailZeros(wq, pre, f); u < wunder-body-tail-z || u > wunder+body+tail+z {
		t.Errorf("%s: %d underflows, the twin %d (%d codes differ, %d zero codes in the left tail)", name, u, wunder, body+tail, z)
	}
	switch {
	case !finite(amax) || !finite(wamax):
		if finite(amax) || finite(wamax) {
			t.Errorf("%s: amax %g, twin %g", name, amax, wamax)
		}
	case math.Abs(float64(amax-wamax)) > 1e-6*float64(wamax):
		t.Errorf("%s: amax %g, twin %g (relative %.3g)", name, amax, wamax, math.Abs(float64(amax-wamax))/float64(wamax))
	}
	close := func(got, want float32, tol float64) bool {
		if !finite(got) || !finite(want) {
			return !finite(got) && !finite(want)
		}
		return math.Abs(float64(got-want)) <= tol
	}
	for c := range C {
		var colTol float64
		for tr := range blocks(N, 64) {
			var tileTol float64
			for r := 64 * tr; r < min(N, 64*tr+64); r++ {
				tileTol += math.Ldexp(math.Abs(float64(v[r*C+c])), -20) + tol[r*C+c]
			}
			colTol += tileTol
			if part == nil {
				continue
			}
			got, want := part[tr*C+c], cpu.FP8DBiasTile(v, N, C, 64*tr, c)
			if !close(got, want, tileTol) {
				if bad++; bad <= 5 {
					t.Errorf("%s: part[%d,%d] %g, want %g (tolerance %g)", name, tr, c, got, want, tileTol)
				}
			}
		}
		if dbias != nil {
			if tol := math.Ldexp(math.Abs(float64(dbias0[c])), -20) + colTol; !close(dbias[c], wdb[c], tol) {
				if bad++; bad <= 5 {
					t.Errorf("%s: dbias[%d] %g, want %g (tolerance %g)", name, c, dbias[c], wdb[c], tol)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
	return body, tail
}

// TestDGELUDBiasFP8EmulatorMatchesCPU runs dgelu_cast_transpose_dbias_e5m2
// compiled for the host (kernels/emu/fp8: gelu_grad_lean's ex2 and rcp as
// exp2f and a division, flushed as .ftz) against
// cpu.DGELUCastTransposeDBiasFP8 and the tile sums of its v, on fp8Shapes
// and 130×70 for every dtype, vector and scalar paths, blocks reversed; dy
// with ±0, ±Inf, NaN and values past max where there are columns enough
// to leave finite ones.
func TestDGELUDBiasFP8EmulatorMatchesCPU(t *testing.T) {
	rng := tensor.NewRNG(43)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		body, tail, all := 0, 0, 0
		for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{130, 70}) {
			N, C := sh[0], sh[1]
			hdy := fp8Input(rng, dt, N, C, N*C > 200)
			hpre := dgeluPre(rng, dt, N, C)
			s := fp8Scale(tensor.E5M2)
			in := append(emuCastInput(s, hdy), hpre.Raw()...)
			for _, run := range emuRuns(N, C) {
				out := runEmu(t, bin, in, "dgio", fmt.Sprint(N), fmt.Sprint(C), fmt.Sprint(run[0]), fmt.Sprint(run[1]), fmt.Sprint(run[2]))
				chunks := blocks(N, 64)
				if len(out) != 2*N*C+8+4*chunks*C {
					t.Fatalf("%s (%d,%d): %d bytes out, want %d", dt, N, C, len(out), 2*N*C+8+4*chunks*C)
				}
				amax := emuAmax(out[2*N*C:])
				part := make([]float32, chunks*C)
				for i := range part {
					part[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[2*N*C+8+4*i:]))
				}
				name := fmt.Sprintf("emulated dgelu %s N %d C %d vec (%d,%d) reverse %d", dt, N, C, run[0], run[1], run[2])
				b, tl := checkDGELUFP8(t, name, out[:N*C], out[N*C:2*N*C], amax, part, nil, make([]float32, C), hdy.ToF32(), hpre.ToF32(), s, N, C)
				body, tail, all = body+b, tail+tl, all+N*C
			}
		}
		bodyCodes(t, dt, body, tail, all)
	}
}

// bodyCodes logs how many of a dtype's codes differ from the twin's and
// fails where those from pre = -3 up exceed one in a thousand: more than
// the derivatives' last bits explain.
func bodyCodes(t *testing.T, dt tensor.DType, body, tail, all int) {
	t.Helper()
	t.Logf("%s: E5M2 codes other than the CPU twin's: %d of %d from pre = -3 up (one step each), %d in gelu's left tail", dt, body, all, tail)
	if body > max(2, all/1000) {
		t.Errorf("%s: %d of %d codes from pre = -3 up one step off the twin's: more than the derivatives' last bits explain", dt, body, all)
	}
}

// TestLaunchDGELUCastTransposeDBiasFP8 (any machine): the dGELU
// cast-transpose with the column sums, then matmul_bias_grad over them
// into dbias; no vector rows with pre misaligned; refusals.
func TestLaunchDGELUCastTransposeDBiasFP8(t *testing.T) {
	sigs := signatures(t)
	N, C := 200, 48
	for _, dt := range floatDTypes {
		for _, aligned := range []bool{true, false} {
			dbias, pre := dev(tensor.F32, C), dev(dt, N, C)
			if !aligned {
				pre = tensor.OnDevice(dt, pre.Dev+uintptr(dt.Size()), N, C)
			}
			got, err := hooked(t, true, func(d *Device) {
				q, qt := cuda.DevicePtr(dev(tensor.F32, 1).Dev), cuda.DevicePtr(dev(tensor.F32, 1).Dev)
				if err := d.dgeluCastTransposeDBiasFP8P(q, qt, dev(tensor.F32, 2), dbias, dev(dt, N, C), pre, dev(tensor.F32, 1), N, C); err != nil {
					t.Errorf("%s: %v", dt, err)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			names := checkSigs(t, "dgelu dbias "+dt.String(), sigs, got)
			if len(names) != 2 || names[0] != "dgelu_cast_transpose_dbias_e5m2" || got[0].dt != dt || names[1] != kernBiasGrad || got[1].dt != tensor.F32 {
				t.Fatalf("%s: launches %v, want dgelu_cast_transpose_dbias_e5m2/%s then %s/f32", dt, names, dt, kernBiasGrad)
			}
			a := got[0].args
			vecRow := 0
			if aligned {
				vecRow = 1
			}
			if a[5] != cuda.DevicePtr(pre.Dev) || a[7] != N || a[8] != C || a[9] != vecRow || a[10] != 0 {
				t.Errorf("%s aligned %v: args %v, want pre, N %d, C %d, vec (%d, 0)", dt, aligned, a, N, C, vecRow)
			}
			if b := got[1].args; b[0] != cuda.DevicePtr(dbias.Dev) || b[1] != a[3] || b[2] != blocks(N, 64) || b[3] != C {
				t.Errorf("%s: matmul_bias_grad args %v, want dbias, the kernel's part, %d chunks, C %d", dt, b, blocks(N, 64), C)
			}
		}
	}
	for _, c := range []struct {
		name string
		pre  *tensor.Tensor
	}{{"pre nil", nil}, {"pre f32 for bf16 dy", dev(tensor.F32, N, C)}, {"pre of N-1 rows", dev(tensor.BF16, N-1, C)},
		{"pre on the host", tensor.New(tensor.BF16, N, C)}} {
		var refused error
		_, err := hooked(t, true, func(d *Device) {
			refused = d.dgeluCastTransposeDBiasFP8P(1, 1, dev(tensor.F32, 2), dev(tensor.F32, C), dev(tensor.BF16, N, C), c.pre, dev(tensor.F32, 1), N, C)
		})
		if !errors.Is(refused, ErrFP8Args) || !errors.Is(err, ErrFP8Args) {
			t.Errorf("%s: %v (recorded: %v), want ErrFP8Args", c.name, refused, err)
		}
	}
}

// TestGPUDGELUCastTransposeDBiasFP8: the GPU against the CPU twin, dbias
// added to a nonzero start, every dtype, fp8Shapes and GPT-2's fc output
// gradient 8192×3072.
func TestGPUDGELUCastTransposeDBiasFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the dGELU cast-transpose needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		body, tail, all := 0, 0, 0
		for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{8192, 3072}) {
			N, C := sh[0], sh[1]
			hdy := fp8Input(rng, dt, N, C, N*C > 200)
			hpre := dgeluPre(rng, dt, N, C)
			s := fp8Scale(tensor.E5M2)
			hs, _ := tensor.FromF32([]float32{s}, 1)
			db0 := make([]float32, C)
			for i := range db0 {
				db0[i] = float32(rng.Norm())
			}
			hdb, _ := tensor.FromF32(db0, C)
			dbias := toGPU(t, g, hdb)
			q, qt := fp8Buf(t, g, N*C, 0xa5), fp8Buf(t, g, N*C, 0x5a)
			amax := toGPU(t, g, tensor.New(tensor.F32, 2))
			if err := g.dgeluCastTransposeDBiasFP8P(cuda.DevicePtr(q.Dev), cuda.DevicePtr(qt.Dev), amax, dbias, toGPU(t, g, hdy), toGPU(t, g, hpre), toGPU(t, g, hs), N, C); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			name := fmt.Sprintf("dgelu %s N %d C %d", dt, N, C)
			b, tl := checkDGELUFP8(t, name, fp8Download(t, g, q, 0, N*C), fp8Download(t, g, qt, 0, N*C), [2]float32(toHost(t, g, amax).F32()),
				nil, toHost(t, g, dbias).F32(), db0, hdy.ToF32(), hpre.ToF32(), s, N, C)
			body, tail, all = body+b, tail+tl, all+N*C
		}
		bodyCodes(t, dt, body, tail, all)
	}
}
