package gpu

// fp8transpose_test.go: TransposeFP8 (kernels/fp8transpose.cu): its
// launches on any machine, and on an sm_90 GPU its output against the
// CPU twin's, bit for bit.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// TestLaunchTransposeFP8 (any machine): the kernel matches its PTX
// signature, takes 16-byte loads only where C is a multiple of 16 and in
// is aligned and 16-byte stores only where N is and out is, launches
// nothing for an empty tensor, and bad arguments are refused with
// ErrFP8Args.
func TestLaunchTransposeFP8(t *testing.T) {
	sigs := signatures(t)
	for _, dt := range []tensor.DType{tensor.F8E4M3, tensor.F8E5M2} {
		for _, c := range []struct {
			N, C, inOff, outOff int
			vecIn, vecOut       int
		}{{37, 100, 0, 0, 0, 0}, {64, 96, 0, 0, 1, 1}, {48, 50, 0, 0, 0, 1}, {33, 96, 0, 0, 1, 0},
			{64, 96, 8, 0, 0, 1}, {64, 96, 0, 1, 1, 0}, {16384, 50304, 0, 0, 1, 1}} {
			name := fmt.Sprintf("%s N %d C %d off %d/%d", dt, c.N, c.C, c.inOff, c.outOff)
			in, out := dev(dt, c.N, c.C), dev(dt, c.C, c.N)
			in.Dev += uintptr(c.inOff)
			out.Dev += uintptr(c.outOff)
			got, err := hooked(t, true, func(d *Device) { d.TransposeFP8(out, in, c.N, c.C) })
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			names := checkSigs(t, name, sigs, got)
			if len(names) != 1 || names[0] != kernTransposeFP8 || got[0].dt != tensor.F32 {
				t.Fatalf("%s: launches %v, want %s/f32", name, names, kernTransposeFP8)
			}
			a := got[0].args
			if a[2] != c.N || a[3] != c.C || a[4] != c.vecIn || a[5] != c.vecOut {
				t.Errorf("%s: args %v, want N %d, C %d, vec (%d,%d)", name, a, c.N, c.C, c.vecIn, c.vecOut)
			}
		}
	}
	if got, err := hooked(t, true, func(d *Device) {
		d.TransposeFP8(dev(tensor.F8E5M2, 0), dev(tensor.F8E5M2, 0), 0, 96)
	}); err != nil || len(got) != 0 {
		t.Errorf("N 0: launches %v, %v; want none", got, err)
	}
	e5, e4 := tensor.F8E5M2, tensor.F8E4M3
	for _, c := range []struct {
		name    string
		out, in *tensor.Tensor
	}{{"e4m3 into e5m2", dev(e5, 8, 4), dev(e4, 4, 8)}, {"in bf16", dev(e5, 8, 4), dev(tensor.BF16, 4, 8)},
		{"out short", dev(e5, 8, 3), dev(e5, 4, 8)}, {"out nil", nil, dev(e5, 4, 8)},
		{"in on the host", dev(e5, 8, 4), tensor.New(e5, 4, 8)}} {
		got, err := hooked(t, true, func(d *Device) { d.TransposeFP8(c.out, c.in, 4, 8) })
		if !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: %v, launches %v; want ErrFP8Args and none", c.name, err, got)
		}
	}
}

// TestGPUTransposeFP8 (sm_90): out is the CPU twin's bit for bit, every
// code copied (NaNs too), on shapes that take the 16-byte paths, the byte
// paths and partial tiles, from a misaligned in and into a misaligned out
// (views one byte in).
func TestGPUTransposeFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "TransposeFP8 needs sm_90 (druto's FP8 rule) on %s", g.Name())
	}
	rng := testRNG(t)
	ref := cpu.New(device.Options{Fused: true})
	for _, dt := range []tensor.DType{tensor.F8E4M3, tensor.F8E5M2} {
		for _, sh := range [][2]int{{1, 1}, {1, 17}, {17, 1}, {37, 100}, {64, 96}, {48, 50}, {33, 96}, {130, 1024}, {1024, 50304}} {
			for _, off := range []int{0, 1} {
				N, C := sh[0], sh[1]
				name := fmt.Sprintf("%s (%d,%d) off %d", dt, N, C, off)
				hin := tensor.New(dt, off+N*C)
				for i := range hin.U8() {
					hin.U8()[i] = uint8(rng.Intn(256))
				}
				din := toGPU(t, g, hin)
				dout := toGPU(t, g, tensor.New(dt, off+N*C))
				g.TransposeFP8(dout.MustView(off, C, N), din.MustView(off, N, C), N, C)
				if err := g.Sync(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := tensor.New(dt, C, N)
				ref.TransposeFP8(want, hin.MustView(off, N, C), N, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				got := toHost(t, g, dout).U8()[off:]
				for i, w := range want.U8() {
					if got[i] != w {
						t.Fatalf("%s: out[%d] %#x, want %#x", name, i, got[i], w)
					}
				}
			}
		}
	}
}

// TestTransposeFP8EmulatorMatchesCPU runs kernels/fp8transpose.cu compiled
// for the host (kernels/emu/fp8transpose, -DDRUTO_EMU) against
// pkg/device/cpu's TransposeFP8, bit for bit, with the vector paths the
// launcher takes for the shape (blocks in order) and with none (blocks in
// reverse), on shapes with partial tiles. Needs g++ (not cgo).
func TestTransposeFP8EmulatorMatchesCPU(t *testing.T) {
	bin := emulatorOf(t, "fp8transpose", tensor.F32, []tensor.DType{tensor.F32})
	runEmu(t, bin, nil, "selftest")
	rng := testRNG(t)
	for _, sh := range [][2]int{{1, 1}, {3, 17}, {37, 100}, {64, 96}, {48, 50}, {33, 96}, {130, 208}, {80, 1000}} {
		N, C := sh[0], sh[1]
		in := make([]uint8, N*C)
		for i := range in {
			in[i] = uint8(rng.Intn(256))
		}
		want := make([]uint8, N*C)
		cpu.TransposeFP8(want, in, N, C)
		for _, r := range emuRuns(N, C) {
			out := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(C), fmt.Sprint(r[0]), fmt.Sprint(r[1]), fmt.Sprint(r[2]))
			if !bytes.Equal(out, want) {
				t.Errorf("(%d,%d) vec (%d,%d) reverse %d: out differs from the CPU's", N, C, r[0], r[1], r[2])
			}
		}
	}
}
