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

// nearE4M3 reports whether two E4M3 codes are equal, both NaN, or
// neighbours (one rounding apart: the same sign and magnitudes one code
// apart, or the two zeros and the smallest subnormals around them).
func nearE4M3(a, b uint8) bool {
	f := tensor.E4M3
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
	return ma+mb <= 1 // across zero: ±0 and ±2^-9
}

// checkGELUFP8 compares the GELU cast-transpose's q, qt and amax with
// cpu.GELUCastTransposeFP8 on the pre-activations pre (N,C): q within one
// E4M3 rounding of the twin's (the kernel's tanhf and the CPU's tanh32 may
// differ in the last bit, which moves a value across a rounding boundary
// now and then), qt exactly qᵀ, amax within 4 float ulps (or NaN both).
func checkGELUFP8(t *testing.T, name string, q, qt []byte, amax float32, pre []float32, scale float32, N, C int) {
	t.Helper()
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wamax := cpu.GELUCastTransposeFP8(wq, wqt, pre, scale, N, C)
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
			in := binary.LittleEndian.AppendUint32(nil, math.Float32bits(s))
			in = append(in, hx.Raw()...)
			vr, vc := 0, 0
			if C%16 == 0 {
				vr = 1
			}
			if N%16 == 0 {
				vc = 1
			}
			for _, run := range [][3]int{{vr, vc, 0}, {0, 0, 1}} {
				out := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(C), "gelu", fmt.Sprint(run[0]), fmt.Sprint(run[1]), fmt.Sprint(run[2]))
				if len(out) != 2*N*C+4 {
					t.Fatalf("%s (%d,%d): %d bytes out, want %d", dt, N, C, len(out), 2*N*C+4)
				}
				amax := math.Float32frombits(binary.LittleEndian.Uint32(out[2*N*C:]))
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
		amax := dev(tensor.F32, 1)
		got, err := hooked(t, true, func(d *Device) {
			q, qt := cuda.DevicePtr(dev(tensor.F32, 1).Dev), cuda.DevicePtr(dev(tensor.F32, 1).Dev)
			if err := d.GELUCastTransposeFP8(q, qt, amax, dev(dt, 128, 192), dev(tensor.F32, 1), 128, 192); err != nil {
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
		if len(zeroed) != 1 || zeroed[0] != 4 {
			t.Errorf("%s: memsets %v, want one of 4 bytes (amax)", dt, zeroed)
		}
	}
	var refused error
	_, err := hooked(t, true, func(d *Device) {
		refused = d.GELUCastTransposeFP8(1, 1, dev(tensor.F32, 1), dev(tensor.BF16, 3, 4), dev(tensor.F32, 1), 4, 4)
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
			amax := poisoned(t, g, tensor.F32, 1)
			if err := g.GELUCastTransposeFP8(cuda.DevicePtr(q.Dev), cuda.DevicePtr(qt.Dev), amax, toGPU(t, g, hx), toGPU(t, g, hs), N, C); err != nil {
				t.Fatalf("%s (%d,%d): %v", dt, N, C, err)
			}
			name := fmt.Sprintf("gelu %s N %d C %d", dt, N, C)
			checkGELUFP8(t, name, fp8Download(t, g, q, 0, N*C), fp8Download(t, g, qt, 0, N*C), toHost(t, g, amax).F32()[0], hx.ToF32(), s, N, C)
		}
	}
}
