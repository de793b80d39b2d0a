package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

var fp8Formats = []tensor.FP8Format{tensor.E4M3, tensor.E5M2}

// fp8Shapes: partial tiles and the scalar paths (1, 17, 33, 100, 1000),
// whole tiles and both vector paths (64, 128 × 192), one vector path each
// (200 × 48: rows; 96 × 1000: columns).
var fp8Shapes = [][2]int{{1, 1}, {1, 17}, {17, 1}, {33, 100}, {100, 33}, {64, 64}, {128, 192}, {200, 48}, {96, 1000}}

// fp8Scale is a scale under which some values of fp8Input saturate and
// some flush to zero.
func fp8Scale(f tensor.FP8Format) float32 {
	if f == tensor.E5M2 {
		return 1536
	}
	return 37.5
}

// fp8Input returns N·C values spread over 2^-4 .. 2^4 times N(0,1) and, when
// specials is set, ±0, ±Inf, NaN, float subnormals, FP8 subnormals after
// scaling and values past max at random places; rounded to dt.
func fp8Input(rng *tensor.RNG, dt tensor.DType, N, C int, specials bool) *tensor.Tensor {
	v := make([]float32, N*C)
	for i := range v {
		v[i] = float32(rng.Norm() * math.Ldexp(1, int(rng.Uint64()%9)-4))
	}
	if specials {
		for _, s := range []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
			float32(math.NaN()), 1e-40, -3e-6, 2.5e-3, 6e4, -1e5} {
			v[rng.Uint64()%uint64(len(v))] = s
		}
	}
	h := tensor.New(dt, N, C)
	if err := h.SetF32(v); err != nil {
		panic(err)
	}
	return h
}

// checkFP8 compares q, qt and amax (the pair: max and underflows) with the
// CPU twin on x (N,C).
func checkFP8(t *testing.T, name string, q, qt []byte, amax [2]float32, x []float32, scale float32, f tensor.FP8Format, N, C int) {
	t.Helper()
	wq, wqt := make([]byte, N*C), make([]byte, N*C)
	wamax, wunder := cpu.CastTransposeFP8(wq, wqt, x, scale, f, N, C)
	compareFP8(t, name, q, qt, amax, wq, wqt, wamax, wunder, x, f, N, C)
}

// emuAmax reads the amax pair an emulator wrote at b (two f32 words).
func emuAmax(b []byte) [2]float32 {
	return [2]float32{math.Float32frombits(binary.LittleEndian.Uint32(b)), math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))}
}

// compareFP8 compares q, qt and the amax pair with the twin's wq, wqt,
// wamax and underflow count wunder (the same codes make the same count);
// x (N,C) are the kernel's inputs (for the messages).
func compareFP8(t *testing.T, name string, q, qt []byte, pair [2]float32, wq, wqt []byte, wamax float32, wunder int, x []float32, f tensor.FP8Format, N, C int) {
	t.Helper()
	bad := 0
	for i := range wq {
		if !cpu.SameFP8(q[i], wq[i], f) || !cpu.SameFP8(qt[i], wqt[i], f) {
			if bad++; bad <= 5 {
				r, c := i/C, i%C
				t.Errorf("%s: q[%d,%d] %#02x (x %g), want %#02x; qt[%d,%d] %#02x, want %#02x", name, r, c, q[i], x[i], wq[i], i/N, i%N, qt[i], wqt[i])
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
	// amax: the same bits, or NaN for NaN (the GPU's f16 widening, cvt.f32.f16,
	// need not keep a NaN's payload as tensor.F16ToF32 does)
	amax := pair[0]
	if math.Float32bits(amax) != math.Float32bits(wamax) && !(amax != amax && wamax != wamax) {
		t.Errorf("%s: amax %g (%#08x), want %g (%#08x)", name, amax, math.Float32bits(amax), wamax, math.Float32bits(wamax))
	}
	if u := math.Float32bits(pair[1]); u != uint32(wunder) {
		t.Errorf("%s: %d underflows, the twin %d", name, u, wunder)
	}
}

// TestLaunchCastTransposeFP8 (any machine): the launch matches the kernel's
// PTX signature, picks the kernel of the format and the vector paths the
// alignment allows, zeroes amax first, and refuses bad arguments.
func TestLaunchCastTransposeFP8(t *testing.T) {
	sigs := signatures(t)
	for _, dt := range floatDTypes {
		for _, f := range fp8Formats {
			for _, c := range []struct {
				N, C, off      int // off: q misaligned by off bytes
				vecRow, vecCol int
			}{{33, 100, 0, 0, 0}, {128, 192, 0, 1, 1}, {200, 48, 0, 1, 0}, {96, 1000, 0, 0, 1}, {128, 192, 1, 0, 1}} {
				name := fmt.Sprintf("%s %s N %d C %d off %d", dt, f, c.N, c.C, c.off)
				var zeroed []int
				memsetHook = func(p cuda.DevicePtr, n int) { zeroed = append(zeroed, n) }
				amax := dev(tensor.F32, 2)
				got, err := hooked(t, true, func(d *Device) {
					q := cuda.DevicePtr(dev(tensor.F32, 1).Dev) + cuda.DevicePtr(c.off)
					qt := cuda.DevicePtr(dev(tensor.F32, 1).Dev)
					if err := d.castTransposeFP8P(q, qt, amax, dev(dt, c.N, c.C), dev(tensor.F32, 1), f, c.N, c.C); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				})
				memsetHook = nil
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				names := checkSigs(t, name, sigs, got)
				if len(names) != 1 || names[0] != "cast_transpose_"+f.String() || got[0].dt != dt {
					t.Fatalf("%s: launches %v, want cast_transpose_%s/%s", name, names, f, dt)
				}
				a := got[0].args
				if a[2] != cuda.DevicePtr(amax.Dev) || a[5] != c.N || a[6] != c.C || a[7] != c.vecRow || a[8] != c.vecCol {
					t.Errorf("%s: args %v, want amax %#x, N %d, C %d, vec (%d,%d)", name, a, amax.Dev, c.N, c.C, c.vecRow, c.vecCol)
				}
				if len(zeroed) != 0 {
					t.Errorf("%s: memsets %v, want none (the kernels add to amax)", name, zeroed)
				}
			}
		}
	}
	F := tensor.F32
	q, qt := cuda.DevicePtr(dev(F, 1).Dev), cuda.DevicePtr(dev(F, 1).Dev)
	for _, c := range []struct {
		name string
		call func(d *Device) error
	}{
		{"amax f16", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(tensor.F16, 2), dev(F, 4, 8), dev(F, 1), tensor.E4M3, 4, 8)
		}},
		{"amax of one word", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 1), dev(F, 4, 8), dev(F, 1), tensor.E4M3, 4, 8)
		}},
		{"x short", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 2), dev(F, 4, 7), dev(F, 1), tensor.E4M3, 4, 8)
		}},
		{"x i32", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 2), dev(tensor.I32, 4, 8), dev(F, 1), tensor.E4M3, 4, 8)
		}},
		{"scale 2", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 2), dev(F, 4, 8), dev(F, 2), tensor.E5M2, 4, 8)
		}},
		{"nil qt", func(d *Device) error {
			return d.castTransposeFP8P(q, 0, dev(F, 2), dev(F, 4, 8), dev(F, 1), tensor.E5M2, 4, 8)
		}},
		{"format 0", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 2), dev(F, 4, 8), dev(F, 1), 0, 4, 8)
		}},
		{"host x", func(d *Device) error {
			return d.castTransposeFP8P(q, qt, dev(F, 2), tensor.New(F, 4, 8), dev(F, 1), tensor.E4M3, 4, 8)
		}},
	} {
		var ret error
		got, err := hooked(t, true, func(d *Device) { ret = c.call(d) })
		if !errors.Is(ret, ErrFP8Args) || !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: returned %v, recorded %v, %d launches; want ErrFP8Args and none", c.name, ret, err, len(got))
		}
	}
	got, err := hooked(t, true, func(d *Device) {
		if err := d.castTransposeFP8P(0, 0, dev(F, 2), dev(F, 0, 8), dev(F, 1), tensor.E4M3, 0, 8); err != nil {
			t.Error(err)
		}
	})
	if err != nil || len(got) != 0 {
		t.Errorf("N 0: %v, %d launches; want none", err, len(got))
	}
}

// fp8Buf is a device buffer of n bytes (an I32 tensor of the pool) filled
// with the byte poison, and its host download.
func fp8Buf(t *testing.T, g *Device, n int, poison byte) *tensor.Tensor {
	t.Helper()
	d, err := g.Alloc(tensor.I32, (n+3)/4+4) // +4 words: room for a misaligned view
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(d) })
	if err := g.Stream().Memset8(cuda.DevicePtr(d.Dev), poison, uint64(d.Bytes())); err != nil {
		t.Fatal(err)
	}
	return d
}

func fp8Download(t *testing.T, g *Device, d *tensor.Tensor, off, n int) []byte {
	t.Helper()
	return toHost(t, g, d).Raw()[off : off+n]
}

// TestGPUCastTransposeFP8: the kernel against the CPU twin bit for bit
// (NaNs as NaNs), every dtype and format, the shapes of the emulator, a
// GPT-2-sized one, aligned and misaligned (the scalar paths), outputs
// poisoned and amax poisoned before each run. Needs sm_90.
func TestGPUCastTransposeFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		F := tensor.F32
		err := g.castTransposeFP8P(1, 1, toGPU(t, g, tensor.New(F, 1)), toGPU(t, g, tensor.New(F, 1, 1)), toGPU(t, g, tensor.New(F, 1)), tensor.E4M3, 1, 1)
		if !errors.Is(err, ErrArch) {
			t.Errorf("on sm_%d%d: %v, want ErrArch", major, minor, err)
		}
		_ = g.Sync()
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (cast_transpose needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	F := tensor.F32
	for _, dt := range floatDTypes {
		for _, f := range fp8Formats {
			for _, sh := range append(append([][2]int(nil), fp8Shapes...), [2]int{1000, 1000}, [2]int{8192, 768}) {
				N, C := sh[0], sh[1]
				for _, misaligned := range []bool{false, true} {
					name := fmt.Sprintf("%s %s N %d C %d misaligned %v", dt, f, N, C, misaligned)
					hx := fp8Input(rng, dt, N, C, true)
					s := fp8Scale(f)
					hs, _ := tensor.FromF32([]float32{s}, 1)
					off := 0
					var x *tensor.Tensor
					if misaligned { // x one element in, q and qt one byte in
						off = 1
						big := randHost(rng, dt, 0, 1, N*C+1)
						raw := big.Raw()
						copy(raw[dt.Size():], hx.Raw())
						x = toGPU(t, g, big).MustView(1, N, C)
					} else {
						x = toGPU(t, g, hx)
					}
					q, qt := fp8Buf(t, g, N*C, 0xa5), fp8Buf(t, g, N*C, 0x5a)
					amax := toGPU(t, g, tensor.New(F, 2))
					if err := g.castTransposeFP8P(cuda.DevicePtr(q.Dev)+cuda.DevicePtr(off), cuda.DevicePtr(qt.Dev)+cuda.DevicePtr(off),
						amax, x, toGPU(t, g, hs), f, N, C); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ha := [2]float32(toHost(t, g, amax).F32())
					checkFP8(t, name, fp8Download(t, g, q, off, N*C), fp8Download(t, g, qt, off, N*C), ha, hx.ToF32(), s, f, N, C)
				}
			}
		}
	}
}

// BenchmarkGPUCastTransposeFP8 times cast_transpose_e4m3 at GPT-2 124M's
// activation and MLP shapes (B·T = 8192 rows) for bf16 and f32 input with
// CUDA events (cuda.Context.Median of 20) and reports GB/s (read x,
// write q and qt) against a device-to-device copy of the same bytes read
// and written, timed the same way in the same run.
func BenchmarkGPUCastTransposeFP8(b *testing.B) {
	fx.once.Do(fx.setup)
	if fx.err != nil {
		testreq.Skip(b, "DRUTO_REQUIRE_GPU", "no usable GPU: %v", fx.err)
	}
	g := fx.fused
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(b, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (cast_transpose needs sm_90)", g.Name())
	}
	time1 := func(fn func() error) (float64, error) { // ms, the median of 20 event-timed runs
		d, err := g.ctx.Median(g.stream, 20, fn)
		return float64(d) / float64(time.Millisecond), err
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F32} {
		for _, sh := range [][2]int{{8192, 768}, {8192, 3072}} {
			N, C := sh[0], sh[1]
			x, err := g.Alloc(dt, N, C)
			if err != nil {
				b.Fatal(err)
			}
			qs, _ := g.Alloc(tensor.I32, N*C/2) // q and qt, N·C bytes each
			amax, _ := g.Alloc(tensor.F32, 2)
			scale, _ := g.Alloc(tensor.F32, 1)
			n := int64(N * C)
			moved := n*int64(dt.Size()) + 2*n
			cp, _ := g.Alloc(tensor.I32, int(moved/2/4)) // the copy's target: half the bytes moved
			q := cuda.DevicePtr(qs.Dev)
			qt := q + cuda.DevicePtr(N*C)
			b.Run(fmt.Sprintf("%s_%dx%d", dt, N, C), func(b *testing.B) {
				for range b.N {
					ms, err := time1(func() error { return g.castTransposeFP8P(q, qt, amax, x, scale, tensor.E4M3, N, C) })
					if err != nil {
						b.Fatal(err)
					}
					// the copy reads and writes the same bytes: half of them each way
					cms, err := time1(func() error { return g.stream.CopyDtoD(cuda.DevicePtr(cp.Dev), cuda.DevicePtr(x.Dev), uint64(moved/2)) })
					if err != nil {
						b.Fatal(err)
					}
					gbps, cgbps := float64(moved)/ms/1e6, float64(moved)/cms/1e6
					b.ReportMetric(ms*1e3, "us")
					b.ReportMetric(gbps, "GB/s")
					b.ReportMetric(100*gbps/cgbps, "%copy")
					b.Logf("cast_transpose_e4m3/%s (%d,%d): %.1f µs, %.0f GB/s; copy of the same bytes %.1f µs, %.0f GB/s (%.0f%%)",
						dt, N, C, ms*1e3, gbps, cms*1e3, cgbps, 100*gbps/cgbps)
				}
			})
			if err := g.Sync(); err != nil {
				b.Fatal(err)
			}
			for _, t := range []*tensor.Tensor{x, qs, amax, scale, cp} {
				g.Free(t)
			}
		}
	}
}

// emuBuild is one host emulator of kernels/emu, built once per test
// binary for each of its dtypes.
type emuBuild struct {
	once sync.Once
	dir  string
	err  error
}

var (
	emuMu     sync.Mutex
	emuBuilds = map[string]*emuBuild{}
)

// emulator returns the path of the fp8 emulator (kernels/emu/fp8) built
// for dt, skipping when no C++ compiler is found.
func emulator(t *testing.T, dt tensor.DType) string { return emulatorOf(t, "fp8", dt, floatDTypes) }

// emulatorOf returns the path of kernels/emu/<name> built for dt (with
// -DDTYPE), building it for every dtype of dts on first use; it skips
// when no C++ compiler or no emulator source is found.
func emulatorOf(t *testing.T, name string, dt tensor.DType, dts []tensor.DType) string {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		testreq.Skip(t, "DRUTO_CC_TESTS", "no C++ compiler (g++) to build kernels/emu/%s: %v", name, err)
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "..", "kernels", "emu", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "main.cpp")); err != nil {
		testreq.Skip(t, "DRUTO_CC_TESTS", "no emulator source here (a test binary away from its repository): %v", err)
	}
	emuMu.Lock()
	e := emuBuilds[name]
	if e == nil {
		e = &emuBuild{}
		emuBuilds[name] = e
	}
	emuMu.Unlock()
	e.once.Do(func() {
		if e.dir, e.err = os.MkdirTemp("", "druto-emu-"+name); e.err != nil {
			return
		}
		var wg sync.WaitGroup
		errs := make([]error, len(dts))
		for i, d := range dts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// -O1: a quarter of -O2's compile time, fast enough for these shapes
				cmd := exec.Command(gxx, "-std=c++20", "-O1", "-pthread", "-DDRUTO_EMU", "-DDTYPE=DRUTO_"+strings.ToUpper(d.String()),
					"-I../..", "-include", "../flash/emu.h", "main.cpp", "-o", filepath.Join(e.dir, "emu_"+d.String()))
				cmd.Dir = src
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("g++ %s %s: %v\n%s", name, d, err, out)
				}
			}()
		}
		wg.Wait()
		e.err = errors.Join(errs...)
	})
	if e.err != nil {
		t.Fatal(e.err)
	}
	return filepath.Join(e.dir, "emu_"+dt.String())
}

// emuCastInput is the stdin of the emulator's cast modes: the scale, then
// x's bytes.
func emuCastInput(s float32, x *tensor.Tensor) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, math.Float32bits(s)), x.Raw()...)
}

// emuRuns are the (vecRow, vecCol, reverse) runs of a cast-transpose on
// the emulator: the vector paths the launcher takes for (N, C), blocks in
// order, then no vector path, blocks in reverse.
func emuRuns(N, C int) [][3]int {
	vr, vc := 0, 0
	if C%16 == 0 {
		vr = 1
	}
	if N%16 == 0 {
		vc = 1
	}
	return [][3]int{{vr, vc, 0}, {0, 0, 1}}
}

func runEmu(t *testing.T, bin string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
	}
	return out
}

// TestFP8EmulatorMatchesCPU runs kernels/fp8.cu compiled for the host
// (kernels/emu/fp8, -DDRUTO_EMU, the PTX cvt written in C++) against
// pkg/tensor's conversions: the conversion alone on every FP8 value, the
// midpoints between neighbours and their float neighbours, values past max,
// specials and a float32 sweep; then both kernels on the shapes of
// fp8Shapes for every dtype, with the vector paths the launcher would take
// and with none, blocks in order and in reverse, against the CPU twin.
// Needs g++ (not cgo): the kernel source runs on any machine.
func TestFP8EmulatorMatchesCPU(t *testing.T) {
	bin := emulator(t, tensor.F32)
	for _, f := range fp8Formats {
		var xs []float32
		for c := range 256 {
			v := f.ToF32(uint8(c))
			xs = append(xs, v)
			if n := f.ToF32(uint8(c + 1)); c < 255 && !math.IsNaN(float64(v)) && !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) && c != 127 {
				mid := float32((float64(v) + float64(n)) / 2)
				xs = append(xs, mid, math.Nextafter32(mid, float32(math.Inf(1))), math.Nextafter32(mid, float32(math.Inf(-1))))
			}
		}
		for _, m := range []float32{f.Max(), f.Max() * 1.0625, f.Max() * 1.125, f.Max() * 1.2, math.MaxFloat32, float32(math.Inf(1)), float32(math.NaN())} {
			xs = append(xs, m, -m, math.Nextafter32(m, 0), -math.Nextafter32(m, 0))
		}
		for u := uint64(0); u < 1<<32; u += 4099 {
			xs = append(xs, math.Float32frombits(uint32(u)))
		}
		in := make([]byte, 4*len(xs))
		for i, x := range xs {
			binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(x))
		}
		out := runEmu(t, bin, in, "cvt", f.String())
		if len(out) != len(xs) {
			t.Fatalf("cvt %s: %d bytes for %d values", f, len(out), len(xs))
		}
		bad := 0
		for i, x := range xs {
			if want := f.FromF32(x); !cpu.SameFP8(out[i], want, f) {
				if bad++; bad <= 5 {
					t.Errorf("cvt %s: %g (%#08x): emulated %#02x, tensor %#02x", f, x, math.Float32bits(x), out[i], want)
				}
			}
		}
		t.Logf("cvt %s: %d values, %d mismatches", f, len(xs), bad)
	}
	rng := tensor.NewRNG(38)
	for _, dt := range floatDTypes {
		bin := emulator(t, dt)
		for _, f := range fp8Formats {
			for _, sh := range fp8Shapes {
				N, C := sh[0], sh[1]
				hx := fp8Input(rng, dt, N, C, true)
				s := fp8Scale(f)
				in := emuCastInput(s, hx)
				for _, run := range emuRuns(N, C) {
					out := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(C), f.String(), fmt.Sprint(run[0]), fmt.Sprint(run[1]), fmt.Sprint(run[2]))
					if len(out) != 2*N*C+8 {
						t.Fatalf("%s %s (%d,%d): %d bytes out, want %d", dt, f, N, C, len(out), 2*N*C+8)
					}
					amax := emuAmax(out[2*N*C:])
					name := fmt.Sprintf("emulated %s %s N %d C %d vec (%d,%d) reverse %d", dt, f, N, C, run[0], run[1], run[2])
					checkFP8(t, name, out[:N*C], out[N*C:2*N*C], amax, hx.ToF32(), s, f, N, C)
				}
			}
		}
	}
}
