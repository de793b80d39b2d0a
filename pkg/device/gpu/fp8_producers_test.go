package gpu

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

// nearFP8 reports whether two codes of format f are equal, both NaN, or
// neighbours (one rounding apart: the same sign and magnitudes one code
// apart, or the two zeros and the smallest subnormals around them).
func nearFP8(a, b uint8, f tensor.FP8Format) bool {
	if cpu.SameFP8(a, b, f) {
		return true
	}
	if cpu.IsNaNFP8(a, f) || cpu.IsNaNFP8(b, f) {
		return false
	}
	ma, mb := int(a&0x7f), int(b&0x7f)
	if a&0x80 == b&0x80 {
		return ma-mb == 1 || mb-ma == 1
	}
	return ma+mb <= 1 // across zero: ±0 and the smallest subnormals
}

// nearE4M3 and nearE5M2 are nearFP8 of one format.
func nearE4M3(a, b uint8) bool { return nearFP8(a, b, tensor.E4M3) }
func nearE5M2(a, b uint8) bool { return nearFP8(a, b, tensor.E5M2) }

// checkGELUFP8 compares the GELU cast-transpose's q, qt and amax with
// cpu.GELUCastTransposeFP8 on the pre-activations pre (N,C): q within one
// E4M3 rounding of the twin's (the kernel's tanhf and the CPU's tanh32 may
// differ in the last bit, which moves a value across a rounding boundary
// now and then), qt exactly qᵀ, amax within 4 float ulps (or NaN both).
func checkGELUFP8(t *testing.T, name string, q, qt []byte, pair [2]float32, pre []float32, scale float32, N, C int) {
	t.Helper()
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wamax, wunder := cpu.GELUCastTransposeFP8(wq, wqt, pre, scale, N, C)
	amax := pair[0]
	bad, off := 0, 0
	for r := range N {
		for c := range C {
			i := r*C + c
			if q[i] != wq[i] {
				off++
			}
			if !nearE4M3(q[i], wq[i]) || q[i] != qt[c*N+r] {
				if bad++; bad <= 5 {
					t.Errorf("%s: q[%d,%d] %#02x (pre %g), twin %#02x; qt %#02x", name, r, c, q[i], pre[i], wq[i], qt[c*N+r])
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
	if off > max(2, N*C/100) {
		t.Errorf("%s: %d of %d codes one rounding off the twin's: more than the last bit of tanh explains", name, off, N*C)
	}
	if (amax != amax) != (wamax != wamax) || amax == amax && math.Abs(float64(amax-wamax)) > 4*math.Abs(float64(math.Nextafter32(wamax, float32(math.Inf(1)))-wamax)) {
		t.Errorf("%s: amax %g, twin %g", name, amax, wamax)
	}
	// Underflows: the twin's count, give or take the codes one rounding off
	// and, in gelu's left tail (pre < -3), the zero codes: there one GELU
	// may give exactly 0 where the other gives a value far below the
	// format's smallest (a flush for one, not for the other).
	if u, z := int(math.Float32bits(pair[1])), leftTailZeros(wq, pre, tensor.E4M3); u < wunder-off-z || u > wunder+off+z {
		t.Errorf("%s: %d underflows, the twin %d (%d codes differ, %d zero codes in the left tail)", name, u, wunder, off, z)
	}
}

// leftTailZeros counts the codes of ±0 in q whose pre-activation is below
// -3 (gelu's left tail).
func leftTailZeros(q []byte, pre []float32, f tensor.FP8Format) int {
	n := 0
	for i, b := range q {
		if pre[i] < -3 && f.ToF32(b) == 0 {
			n++
		}
	}
	return n
}

// TestGELUFP8EmulatorMatchesCPU runs gelu_cast_transpose_e4m3 compiled for
// the host (kernels/emu/fp8) against cpu.GELUCastTransposeFP8 on
// fp8Shapes for every dtype, the launcher's vector paths and none, blocks
// in order and in reverse.
func TestGELUFP8EmulatorMatchesCPU(t *testing.T) {
	rng := tensor.NewRNG(41)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		for _, sh := range fp8Shapes {
			N, C := sh[0], sh[1]
			hx := fp8Input(rng, dt, N, C, true)
			s := fp8Scale(tensor.E4M3)
			in := emuCastInput(s, hx)
			for _, run := range emuRuns(N, C) {
				out := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(C), "gelu", fmt.Sprint(run[0]), fmt.Sprint(run[1]), fmt.Sprint(run[2]))
				if len(out) != 2*N*C+8 {
					t.Fatalf("%s (%d,%d): %d bytes out, want %d", dt, N, C, len(out), 2*N*C+8)
				}
				amax := emuAmax(out[2*N*C:])
				name := fmt.Sprintf("emulated gelu %s N %d C %d vec (%d,%d) reverse %d", dt, N, C, run[0], run[1], run[2])
				checkGELUFP8(t, name, out[:N*C], out[N*C:2*N*C], amax, hx.ToF32(), s, N, C)
			}
		}
	}
}

// TestLaunchGELUCastTransposeFP8 (any machine): the kernel, its PTX
// signature and arguments, the amax memset, and a refusal.
func TestLaunchGELUCastTransposeFP8(t *testing.T) {
	sigs := signatures(t)
	for _, dt := range floatDTypes {
		var zeroed []int
		memsetHook = func(p cuda.DevicePtr, n int) { zeroed = append(zeroed, n) }
		amax := dev(tensor.F32, 2)
		got, err := hooked(t, true, func(d *Device) {
			q, qt := cuda.DevicePtr(dev(tensor.F32, 1).Dev), cuda.DevicePtr(dev(tensor.F32, 1).Dev)
			if err := d.geluCastTransposeFP8P(q, qt, amax, dev(dt, 128, 192), dev(tensor.F32, 1), 128, 192); err != nil {
				t.Errorf("%s: %v", dt, err)
			}
		})
		memsetHook = nil
		if err != nil {
			t.Fatal(err)
		}
		names := checkSigs(t, "gelu "+dt.String(), sigs, got)
		if len(names) != 1 || names[0] != "gelu_cast_transpose_e4m3" || got[0].dt != dt {
			t.Fatalf("%s: launches %v, want gelu_cast_transpose_e4m3/%s", dt, names, dt)
		}
		if a := got[0].args; a[2] != cuda.DevicePtr(amax.Dev) || a[5] != 128 || a[6] != 192 || a[7] != 1 || a[8] != 1 {
			t.Errorf("%s: args %v", dt, a)
		}
		if len(zeroed) != 0 {
			t.Errorf("%s: memsets %v, want none (the kernels add to amax)", dt, zeroed)
		}
	}
	var refused error
	_, err := hooked(t, true, func(d *Device) {
		refused = d.geluCastTransposeFP8P(1, 1, dev(tensor.F32, 2), dev(tensor.BF16, 3, 4), dev(tensor.F32, 1), 4, 4)
	})
	if !errors.Is(refused, ErrFP8Args) || !errors.Is(err, ErrFP8Args) {
		t.Errorf("pre of 12 elements for (4,4): %v (recorded: %v), want ErrFP8Args", refused, err)
	}
}

// TestGPUGELUCastTransposeFP8: the kernel on the GPU against the CPU twin,
// every dtype, fp8Shapes and GPT-2's fc output 8192×3072.
func TestGPUGELUCastTransposeFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the GELU cast-transpose needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{8192, 3072}) {
			N, C := sh[0], sh[1]
			hx := fp8Input(rng, dt, N, C, true)
			s := fp8Scale(tensor.E4M3)
			hs, _ := tensor.FromF32([]float32{s}, 1)
			q, qt := fp8Buf(t, g, N*C, 0xa5), fp8Buf(t, g, N*C, 0x5a)
			amax := toGPU(t, g, tensor.New(tensor.F32, 2))
			if err := g.geluCastTransposeFP8P(cuda.DevicePtr(q.Dev), cuda.DevicePtr(qt.Dev), amax, toGPU(t, g, hx), toGPU(t, g, hs), N, C); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			name := fmt.Sprintf("gelu %s N %d C %d", dt, N, C)
			checkGELUFP8(t, name, fp8Download(t, g, q, 0, N*C), fp8Download(t, g, qt, 0, N*C), [2]float32(toHost(t, g, amax).F32()), hx.ToF32(), s, N, C)
		}
	}
}

// checkDBiasFP8 compares the dbias cast-transpose's q, qt and amax with
// cpu.CastTransposeDBiasFP8's (bit for bit, NaN as NaN), part (the tiles'
// column sums, nil on the GPU) with cpu.FP8DBiasTile bit for bit, and
// dbias (dbias0 plus the sums; nil to skip) within fp32 rounding of the
// twin's: 2^-20 of dbias0 plus the sum of |dy| over the column.
func checkDBiasFP8(t *testing.T, name string, q, qt []byte, amax [2]float32, part, dbias, dbias0, dy []float32, scale float32, N, C int) {
	t.Helper()
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wdb := append([]float32(nil), dbias0...)
	wamax, wunder := cpu.CastTransposeDBiasFP8(wq, wqt, wdb, dy, scale, N, C)
	compareFP8(t, name, q, qt, amax, wq, wqt, wamax, wunder, dy, tensor.E5M2, N, C)
	bad := 0
	for c := range C {
		if part != nil {
			for tr := range blocks(N, 64) {
				got, want := part[tr*C+c], cpu.FP8DBiasTile(dy, N, C, 64*tr, c)
				if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					if bad++; bad <= 5 {
						t.Errorf("%s: part[%d,%d] %g, want %g", name, tr, c, got, want)
					}
				}
			}
		}
		if dbias != nil {
			var mag float64
			for r := range N {
				mag += math.Abs(float64(dy[r*C+c]))
			}
			tol := math.Ldexp(math.Abs(float64(dbias0[c]))+mag, -20)
			if got, want := dbias[c], wdb[c]; (got != got) != (want != want) || got == got && math.Abs(float64(got-want)) > tol {
				if bad++; bad <= 5 {
					t.Errorf("%s: dbias[%d] %g, want %g (tolerance %g)", name, c, got, want, tol)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
}

// TestDBiasFP8EmulatorMatchesCPU runs cast_transpose_dbias_e5m2 compiled
// for the host against cpu.CastTransposeDBiasFP8 and its tile sums, on
// fp8Shapes for every dtype, vector and scalar paths, blocks reversed.
func TestDBiasFP8EmulatorMatchesCPU(t *testing.T) {
	rng := tensor.NewRNG(42)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{130, 70}) {
			N, C := sh[0], sh[1]
			hx := fp8Input(rng, dt, N, C, N*C > 200) // specials only where they leave finite columns to check
			s := fp8Scale(tensor.E5M2)
			in := emuCastInput(s, hx)
			for _, run := range emuRuns(N, C) {
				out := runEmu(t, bin, in, "dbio", fmt.Sprint(N), fmt.Sprint(C), fmt.Sprint(run[0]), fmt.Sprint(run[1]), fmt.Sprint(run[2]))
				chunks := blocks(N, 64)
				if len(out) != 2*N*C+8+4*chunks*C {
					t.Fatalf("%s (%d,%d): %d bytes out, want %d", dt, N, C, len(out), 2*N*C+8+4*chunks*C)
				}
				amax := emuAmax(out[2*N*C:])
				part := make([]float32, chunks*C)
				for i := range part {
					part[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[2*N*C+8+4*i:]))
				}
				name := fmt.Sprintf("emulated dbias %s N %d C %d vec (%d,%d) reverse %d", dt, N, C, run[0], run[1], run[2])
				checkDBiasFP8(t, name, out[:N*C], out[N*C:2*N*C], amax, part, nil, make([]float32, C), hx.ToF32(), s, N, C)
			}
		}
	}
}

// TestLaunchCastTransposeDBiasFP8 (any machine): the cast-transpose with
// the column sums, then matmul_bias_grad over them into dbias; refusals.
func TestLaunchCastTransposeDBiasFP8(t *testing.T) {
	sigs := signatures(t)
	N, C := 200, 48
	for _, dt := range floatDTypes {
		dbias := dev(tensor.F32, C)
		got, err := hooked(t, true, func(d *Device) {
			q, qt := cuda.DevicePtr(dev(tensor.F32, 1).Dev), cuda.DevicePtr(dev(tensor.F32, 1).Dev)
			if err := d.castTransposeDBiasFP8P(q, qt, dev(tensor.F32, 2), dbias, dev(dt, N, C), dev(tensor.F32, 1), N, C); err != nil {
				t.Errorf("%s: %v", dt, err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		names := checkSigs(t, "dbias "+dt.String(), sigs, got)
		if len(names) != 2 || names[0] != "cast_transpose_dbias_e5m2" || got[0].dt != dt || names[1] != kernBiasGrad || got[1].dt != tensor.F32 {
			t.Fatalf("%s: launches %v, want cast_transpose_dbias_e5m2/%s then %s/f32", dt, names, dt, kernBiasGrad)
		}
		if a := got[1].args; a[0] != cuda.DevicePtr(dbias.Dev) || a[1] != got[0].args[3] || a[2] != blocks(N, 64) || a[3] != C {
			t.Errorf("%s: matmul_bias_grad args %v, want dbias, the kernel's part, %d chunks, C %d", dt, a, blocks(N, 64), C)
		}
	}
	for _, c := range []struct {
		name  string
		dbias *tensor.Tensor
		N     int
	}{{"dbias of C-1", dev(tensor.F32, C-1), N}, {"dbias bf16", dev(tensor.BF16, C), N}, {"dbias on the host", tensor.New(tensor.F32, C), N},
		{"N past the grid", dev(tensor.F32, C), 64*maxGridYZ + 1}} {
		var refused error
		_, err := hooked(t, true, func(d *Device) {
			refused = d.castTransposeDBiasFP8P(1, 1, dev(tensor.F32, 2), c.dbias, dev(tensor.BF16, c.N, C), dev(tensor.F32, 1), c.N, C)
		})
		if !errors.Is(refused, ErrFP8Args) || !errors.Is(err, ErrFP8Args) {
			t.Errorf("%s: %v (recorded: %v), want ErrFP8Args", c.name, refused, err)
		}
	}
}

// TestGPUCastTransposeDBiasFP8: the GPU against the CPU twin, dbias added
// to a nonzero start, every dtype, fp8Shapes and GPT-2's 8192×768.
func TestGPUCastTransposeDBiasFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (the cast-transpose needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{8192, 768}) {
			N, C := sh[0], sh[1]
			hx := fp8Input(rng, dt, N, C, N*C > 200)
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
			if err := g.castTransposeDBiasFP8P(cuda.DevicePtr(q.Dev), cuda.DevicePtr(qt.Dev), amax, dbias, toGPU(t, g, hx), toGPU(t, g, hs), N, C); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			name := fmt.Sprintf("dbias %s N %d C %d", dt, N, C)
			checkDBiasFP8(t, name, fp8Download(t, g, q, 0, N*C), fp8Download(t, g, qt, 0, N*C), [2]float32(toHost(t, g, amax).F32()),
				nil, toHost(t, g, dbias).F32(), db0, hx.ToF32(), s, N, C)
		}
	}
}
