package gpu

// fp8_layernorm_test.go: LayerNormFP8 and ResidualLayerNormFP8 (the FP8
// producers of kernels/fp8.cu): their launches against the PTX (any
// machine), the kernels compiled for the host (kernels/emu/fp8, g++)
// against pkg/device/cpu's twins, and on an sm_90 GPU the kernels against
// the twins and against LayerNorm's own kernels.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// lnFP8Shapes: the rows in registers (C 100, 768, 1024) and in three
// passes (C 33, 1280, 1600: GPT-2 large and xl), N with a partial block of
// 64 rows and partial 16-row chunks of qt (17, 65, 70, 130) and N a
// multiple of 16 (qt's vector stores: 128).
var lnFP8Shapes = [][2]int{{1, 1}, {17, 33}, {33, 100}, {65, 768}, {128, 768}, {100, 1024}, {70, 1280}, {130, 1600}}

// lnFP8Case is one call's inputs on the host: rows a (N,C) f32 and, for
// the residual form, b (N,C) T; weight and bias (C) T; the scale.
type lnFP8Case struct {
	N, C     int
	residual bool
	a, b     *tensor.Tensor
	w, bias  *tensor.Tensor
	s        float32
}

// lnFP8Input makes rows spread over 2^-4 .. 2^4 times N(0,1) and weights
// over 2^-9 .. 2^5, so that y·s both saturates and flushes to zero; with
// specials, a NaN and an Inf in two rows (those rows NaN, amax NaN) or,
// with one row, infinite weights (y ±Inf, q ±max, amax +Inf).
func lnFP8Input(rng *tensor.RNG, dt tensor.DType, N, C int, residual, specials bool) lnFP8Case {
	c := lnFP8Case{N: N, C: C, residual: residual, s: 37.5}
	spread := func(n, lo, span int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Norm() * math.Ldexp(1, int(rng.Uint64()%uint64(span))+lo))
		}
		return v
	}
	a, w := spread(N*C, -4, 9), spread(C, -9, 15)
	if specials && N >= 3 {
		a[1*C+int(rng.Uint64()%uint64(C))] = float32(math.NaN())
		a[2*C+int(rng.Uint64()%uint64(C))] = float32(math.Inf(1))
	} else if specials {
		w[0], w[C/2] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	c.a, _ = tensor.FromF32(a, N, C)
	c.w = tensor.New(dt, C)
	if err := c.w.SetF32(w); err != nil {
		panic(err)
	}
	c.bias = randHost(rng, dt, 0, 0.01, C)
	if residual {
		c.b = randHost(rng, dt, 0, 1, N, C)
	}
	return c
}

// lnFP8Out is what a kernel wrote.
type lnFP8Out struct {
	q, qt           []byte
	amax            [2]float32 // max |y| and the underflows
	mean, rstd, res []float32
}

// checkLNFP8 compares a kernel's outputs with pkg/device/cpu's twins:
// q, qt and amax bit for bit (NaNs as NaNs) with NormCastTransposeFP8 of
// the kernel's own mean and rstd; res bit for bit with a + b; mean and
// rstd within LayerNorm's fp32 tolerance (NaN where the twin's are) of
// LayerNormFP8's, whose sums are float64.
func checkLNFP8(t *testing.T, name string, c lnFP8Case, got lnFP8Out) {
	t.Helper()
	N, C := c.N, c.C
	f := tensor.E4M3
	a, w, bias := c.a.ToF32(), c.w.ToF32(), c.bias.ToF32()
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wmean, wrstd := make([]float32, N), make([]float32, N)
	rows := a
	if c.residual {
		rows = make([]float32, N*C)
		cpu.ResidualLayerNormFP8(rows, wq, wqt, wmean, wrstd, a, c.b.ToF32(), w, bias, c.s, f, N, C)
		for i := range rows {
			if math.Float32bits(got.res[i]) != math.Float32bits(rows[i]) && !(got.res[i] != got.res[i] && rows[i] != rows[i]) {
				t.Fatalf("%s: res[%d] %v, want a + b = %v", name, i, got.res[i], rows[i])
			}
		}
	} else {
		cpu.LayerNormFP8(wq, wqt, wmean, wrstd, a, w, bias, c.s, f, N, C)
	}
	atol, rtol := tensor.Tolerance(tensor.F32)
	for i := range N {
		for _, p := range [][2]float32{{got.mean[i], wmean[i]}, {got.rstd[i], wrstd[i]}} {
			g, want := float64(p[0]), float64(p[1])
			if math.IsNaN(want) != math.IsNaN(g) || !math.IsNaN(want) && math.Abs(g-want) > atol+rtol*math.Abs(want) {
				t.Fatalf("%s: row %d: mean, rstd %v, %v; the twin's %v, %v", name, i, got.mean[i], got.rstd[i], wmean[i], wrstd[i])
			}
		}
	}
	wamax, wunder := cpu.NormCastTransposeFP8(wq, wqt, rows, got.mean, got.rstd, w, bias, c.s, f, N, C)
	compareFP8(t, name, got.q, got.qt, got.amax, wq, wqt, wamax, wunder, rows, f, N, C)
}

// TestLaunchLayerNormFP8 (any machine): both forms launch their kernel
// with arguments that match its PTX signature, the vector flags the
// alignment allows, amax zeroed first; bad arguments are refused.
func TestLaunchLayerNormFP8(t *testing.T) {
	sigs := signatures(t)
	F := tensor.F32
	for _, dt := range floatDTypes {
		for _, residual := range []bool{false, true} {
			for _, c := range []struct {
				N, C, qOff, rowOff int // misalignments: q and qt by qOff bytes, the rows by rowOff bytes
				vec, vecQ, vecCol  int
			}{{33, 100, 0, 0, 1, 1, 0}, {128, 768, 0, 0, 1, 1, 1}, {64, 33, 0, 0, 0, 1, 1}, {128, 1600, 1, 0, 1, 0, 0}, {128, 768, 0, 4, 0, 1, 1}} {
				name := fmt.Sprintf("%s residual %v N %d C %d offsets %d, %d", dt, residual, c.N, c.C, c.qOff, c.rowOff)
				var zeroed []int
				memsetHook = func(p cuda.DevicePtr, n int) { zeroed = append(zeroed, n) }
				amax := dev(F, 2)
				got, err := hooked(t, true, func(d *Device) {
					q := cuda.DevicePtr(dev(F, 1).Dev) + cuda.DevicePtr(c.qOff)
					qt := cuda.DevicePtr(dev(F, 1).Dev) + cuda.DevicePtr(c.qOff)
					rows := shifted(dev(F, c.N, c.C), uintptr(c.rowOff))
					var err error
					if residual {
						err = d.residualLayerNormFP8P(dev(F, c.N, c.C), q, qt, amax, dev(F, c.N), dev(F, c.N), rows, dev(dt, c.N, c.C), dev(dt, c.C), dev(dt, c.C), dev(F, 1), c.N, c.C)
					} else {
						err = d.layerNormFP8P(q, qt, amax, dev(F, c.N), dev(F, c.N), rows, dev(dt, c.C), dev(dt, c.C), dev(F, 1), c.N, c.C)
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				})
				memsetHook = nil
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				names := checkSigs(t, name, sigs, got)
				want := lnFP8Kernel
				if residual {
					want = resLNFP8Kernel
				}
				if len(names) != 1 || names[0] != want || got[0].dt != dt {
					t.Fatalf("%s: launches %v, want %s/%s", name, names, want, dt)
				}
				a := got[0].args
				k := len(a) - 6 // N, C, rows, vec, vecQ, vecCol end the list
				if a[k] != c.N || a[k+1] != c.C || a[k+2] != lnf8DefaultRows || a[k+3] != c.vec || a[k+4] != c.vecQ || a[k+5] != c.vecCol {
					t.Errorf("%s: N, C, rows, vec, vecQ, vecCol %v, want %d %d %d %d %d %d", name, a[k:], c.N, c.C, lnf8DefaultRows, c.vec, c.vecQ, c.vecCol)
				}
				if i := map[bool]int{false: 2, true: 3}[residual]; a[i] != cuda.DevicePtr(amax.Dev) {
					t.Errorf("%s: amax argument %v, want %#x", name, a[i], amax.Dev)
				}
				if len(zeroed) != 0 {
					t.Errorf("%s: memsets %v, want none (the kernels add to amax)", name, zeroed)
				}
			}
		}
	}
	H := tensor.BF16
	q, qt := cuda.DevicePtr(dev(F, 1).Dev), cuda.DevicePtr(dev(F, 1).Dev)
	const N, C = 4, 8
	for _, c := range []struct {
		name string
		call func(d *Device) error
	}{
		{"C past the widest", func(d *Device) error {
			const W = 3585
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, 2), dev(F, 2), dev(F, 2, W), dev(H, W), dev(H, W), dev(F, 1), 2, W)
		}},
		{"bf16 rows", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(H, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"bias f16", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(H, C), dev(tensor.F16, C), dev(F, 1), N, C)
		}},
		{"mean short", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N-1), dev(F, N), dev(F, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"weight i32", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(tensor.I32, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"nil qt", func(d *Device) error {
			return d.layerNormFP8P(q, 0, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"scale 2", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(H, C), dev(H, C), dev(F, 2), N, C)
		}},
		{"host rows", func(d *Device) error {
			return d.layerNormFP8P(q, qt, dev(F, 2), dev(F, N), dev(F, N), tensor.New(F, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"nil res", func(d *Device) error {
			return d.residualLayerNormFP8P(nil, q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(H, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"res bf16", func(d *Device) error {
			return d.residualLayerNormFP8P(dev(H, N, C), q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(H, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
		{"b f32 with bf16 weights", func(d *Device) error {
			return d.residualLayerNormFP8P(dev(F, N, C), q, qt, dev(F, 2), dev(F, N), dev(F, N), dev(F, N, C), dev(F, N, C), dev(H, C), dev(H, C), dev(F, 1), N, C)
		}},
	} {
		var ret error
		got, err := hooked(t, true, func(d *Device) { ret = c.call(d) })
		if !errors.Is(ret, ErrFP8Args) || !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: returned %v, recorded %v, %d launches; want ErrFP8Args and none", c.name, ret, err, len(got))
		}
	}
	got, err := hooked(t, true, func(d *Device) {
		if err := d.layerNormFP8P(0, 0, dev(F, 2), dev(F, 0), dev(F, 0), dev(F, 0, C), dev(H, C), dev(H, C), dev(F, 1), 0, C); err != nil {
			t.Error(err)
		}
	})
	if err != nil || len(got) != 0 {
		t.Errorf("N 0: %v, %d launches; want none", err, len(got))
	}
}

// TestLayerNormFP8EmulatorMatchesCPU runs layernorm_fp8_e4m3 and
// residual_layernorm_fp8_e4m3 compiled for the host (kernels/emu/fp8,
// "lnio") against the CPU twins (checkLNFP8) for every dtype, on
// lnFP8Shapes but the widest under -short, with and without specials, with
// the vector paths the launcher would take and with none (blocks then in
// reverse). Needs g++.
func TestLayerNormFP8EmulatorMatchesCPU(t *testing.T) {
	rng := tensor.NewRNG(38)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		for _, sh := range lnFP8Shapes {
			N, C := sh[0], sh[1]
			if testing.Short() && N*C > 100*1024 {
				continue
			}
			for _, residual := range []bool{false, true} {
				c := lnFP8Input(rng, dt, N, C, residual, residual == (N%2 == 0))
				in := binary.LittleEndian.AppendUint32(nil, math.Float32bits(c.s))
				in = append(in, c.a.Raw()...)
				if residual {
					in = append(in, c.b.Raw()...)
				}
				in = append(append(in, c.w.Raw()...), c.bias.Raw()...)
				res := map[bool]string{false: "0", true: "1"}[residual]
				vec, vc := "0", "0"
				if C%4 == 0 {
					vec = "1"
				}
				if N%16 == 0 {
					vc = "1"
				}
				for _, run := range [][4]string{{vec, "1", vc, "0"}, {"0", "0", "0", "1"}} {
					out := runEmu(t, bin, in, "lnio", fmt.Sprint(N), fmt.Sprint(C), res, run[0], run[1], run[2], run[3])
					nres := 0
					if residual {
						nres = N * C
					}
					if len(out) != 2*N*C+8+8*N+4*nres {
						t.Fatalf("%s (%d,%d): %d bytes out, want %d", dt, N, C, len(out), 2*N*C+8+8*N+4*nres)
					}
					f32s := func(b []byte) []float32 {
						v := make([]float32, len(b)/4)
						for i := range v {
							v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
						}
						return v
					}
					o := 2 * N * C
					got := lnFP8Out{q: out[:N*C], qt: out[N*C : o], amax: [2]float32(f32s(out[o : o+8])),
						mean: f32s(out[o+8 : o+8+4*N]), rstd: f32s(out[o+8+4*N : o+8+8*N]), res: f32s(out[o+8+8*N:])}
					name := fmt.Sprintf("emulated %s residual %v N %d C %d vec (%s,%s,%s) reverse %s", dt, residual, N, C, run[0], run[1], run[2], run[3])
					checkLNFP8(t, name, c, got)
				}
			}
		}
	}
}

// TestGPULayerNormFP8: both kernels against the CPU twins (checkLNFP8:
// q, qt and amax bit for bit given the kernel's statistics) and against
// LayerNorm's own kernels on the same inputs (mean, rstd and res the same
// bits: one row function), every dtype, lnFP8Shapes and GPT-2's
// 8192 × 768 and 8192 × 1600, with and without specials, aligned and
// misaligned (q and qt a byte in, the rows an element in: the scalar
// paths), every output poisoned. Needs sm_90.
func TestGPULayerNormFP8(t *testing.T) {
	g := gpuDev(t, true)
	F := tensor.F32
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		err := g.layerNormFP8P(1, 1, toGPU(t, g, tensor.New(F, 1)), toGPU(t, g, tensor.New(F, 1)), toGPU(t, g, tensor.New(F, 1)),
			toGPU(t, g, tensor.New(F, 1, 4)), toGPU(t, g, tensor.New(F, 4)), toGPU(t, g, tensor.New(F, 4)), toGPU(t, g, tensor.New(F, 1)), 1, 4)
		if !errors.Is(err, ErrArch) {
			t.Errorf("on sm_%d%d: %v, want ErrArch", major, minor, err)
		}
		_ = g.Sync()
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (layernorm_fp8_e4m3 needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	sameBits := func(name string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("%s[%d]: %v, LayerNorm's kernel %v", name, i, got[i], want[i])
			}
		}
	}
	for _, dt := range floatDTypes {
		for _, sh := range append(append([][2]int(nil), lnFP8Shapes...), [2]int{8192, 768}, [2]int{8192, 1600}) {
			N, C := sh[0], sh[1]
			for _, residual := range []bool{false, true} {
				for _, misaligned := range []bool{false, true} {
					name := fmt.Sprintf("%s residual %v N %d C %d misaligned %v", dt, residual, N, C, misaligned)
					c := lnFP8Input(rng, dt, N, C, residual, misaligned)
					off := 0
					var a *tensor.Tensor
					if misaligned { // the rows one element in, q and qt one byte in
						off = 1
						big := tensor.New(F, N*C+1)
						copy(big.Raw()[4:], c.a.Raw())
						a = toGPU(t, g, big).MustView(1, N, C)
					} else {
						a = toGPU(t, g, c.a)
					}
					hs, _ := tensor.FromF32([]float32{c.s}, 1)
					w, bias, s := toGPU(t, g, c.w), toGPU(t, g, c.bias), toGPU(t, g, hs)
					q, qt := fp8Buf(t, g, N*C, 0xa5), fp8Buf(t, g, N*C, 0x5a)
					amax, mean, rstd, res := toGPU(t, g, tensor.New(F, 2)), poisoned(t, g, F, N), poisoned(t, g, F, N), poisoned(t, g, F, N, C)
					qp, qtp := cuda.DevicePtr(q.Dev)+cuda.DevicePtr(off), cuda.DevicePtr(qt.Dev)+cuda.DevicePtr(off)
					var b *tensor.Tensor
					var err error
					if residual {
						b = toGPU(t, g, c.b)
						err = g.residualLayerNormFP8P(res, qp, qtp, amax, mean, rstd, a, b, w, bias, s, N, C)
					} else {
						err = g.layerNormFP8P(qp, qtp, amax, mean, rstd, a, w, bias, s, N, C)
					}
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					got := lnFP8Out{q: fp8Download(t, g, q, off, N*C), qt: fp8Download(t, g, qt, off, N*C), amax: [2]float32(toHost(t, g, amax).F32()),
						mean: toHost(t, g, mean).F32(), rstd: toHost(t, g, rstd).F32(), res: toHost(t, g, res).F32()}
					checkLNFP8(t, name, c, got)
					// LayerNorm's own kernels (fixed-width or not, as the launcher picks)
					out, mean2, rstd2, res2 := poisoned(t, g, dt, N, C), poisoned(t, g, F, N), poisoned(t, g, F, N), poisoned(t, g, F, N, C)
					if residual {
						g.ResidualLayerNorm(res2, out, mean2, rstd2, a, b, w, bias, N, C)
						sameBits(name+" res", got.res, toHost(t, g, res2).F32())
					} else {
						g.LayerNorm(out, mean2, rstd2, a, w, bias, N, C)
					}
					sameBits(name+" mean", got.mean, toHost(t, g, mean2).F32())
					sameBits(name+" rstd", got.rstd, toHost(t, g, rstd2).F32())
				}
			}
		}
	}
}
