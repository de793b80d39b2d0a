package gpu

// crossentropy_fp8_test.go: CrossEntropyFP8 (kernels/crossentropy_fp8.cu):
// its launches on any machine, and on an sm_90 GPU its losses and
// gradient against CrossEntropy's on the same device and its e5m2 copy,
// amax and underflows against the CPU twin.

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

// TestLaunchCrossEntropyFP8 (any machine): both kernels match their PTX
// signatures, the TMA form is taken where it may run (tmaSmem) and the l3
// form elsewhere, the kernel's store argument 1 with storeGrad and 0
// without, and bad arguments are refused with ErrFP8Args (the decomposed
// device with ErrUnsupported), storeGrad either way.
func TestLaunchCrossEntropyFP8(t *testing.T) {
	sigs := signatures(t)
	const N, V = 37, 96
	F := tensor.F32
	for _, dt := range floatDTypes {
		for _, tma := range []bool{false, true} {
			for _, state := range []*tensor.Tensor{nil, dev(F, device.StateLen)} {
				for _, storeGrad := range []bool{true, false} {
					got, err := hooked(t, true, func(d *Device) {
						if tma {
							d.tmaSmem = map[kernelKey]int{{kernCEF8TMA, dt}: 227 << 10}
						}
						d.CrossEntropyFP8(dev(F, N), dev(dt, N, V), dev(tensor.F8E5M2, N, V), dev(F, 2), dev(tensor.I32, N), dev(F, 1), state, N, V, 1/float32(N), storeGrad)
					})
					name := fmt.Sprintf("CrossEntropyFP8 %s tma %v storeGrad %v", dt, tma, storeGrad)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					names := checkSigs(t, name, sigs, got)
					want := map[bool]string{false: kernCEF8, true: kernCEF8TMA}[tma]
					if len(names) != 1 || names[0] != want || got[0].dt != dt {
						t.Fatalf("%s: launches %v, want %s/%s", name, names, want, dt)
					}
					if a := got[0].args; len(a) != 11 || a[10] != b2i(storeGrad) {
						t.Errorf("%s: the store argument %v, want %d", name, a[len(a)-1], b2i(storeGrad))
					}
				}
			}
		}
	}
	bf := tensor.BF16
	good := func() []*tensor.Tensor {
		return []*tensor.Tensor{dev(F, N), dev(bf, N, V), dev(tensor.F8E5M2, N, V), dev(F, 2), dev(tensor.I32, N), dev(F, 1), nil}
	}
	misaligned := func() *tensor.Tensor { q := dev(tensor.F8E5M2, N, V); q.Dev += 8; return q }
	for _, c := range []struct {
		name string
		i    int // the argument replaced
		t    *tensor.Tensor
		V    int
	}{{"q e4m3", 2, dev(tensor.F8E4M3, N, V), V}, {"q short", 2, dev(tensor.F8E5M2, N, V-1), V}, {"q misaligned", 2, misaligned(), V},
		{"amax of one", 3, dev(F, 1), V}, {"scale bf16", 5, dev(bf, 1), V}, {"losses bf16", 0, dev(bf, N), V},
		{"targets f32", 4, dev(F, N), V}, {"state short", 6, dev(F, device.StateLen-1), V}, {"V 88", 1, dev(bf, N, 88), 88},
		{"amax on the host", 3, tensor.New(F, 2), V}} {
		a := good()
		a[c.i] = c.t
		if c.V != V {
			a[2] = dev(tensor.F8E5M2, N, c.V)
		}
		for _, storeGrad := range []bool{true, false} {
			got, err := hooked(t, true, func(d *Device) {
				d.CrossEntropyFP8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], N, c.V, 1, storeGrad)
			})
			if !errors.Is(err, ErrFP8Args) || len(got) != 0 {
				t.Errorf("%s storeGrad %v: %v, %d launches, want ErrFP8Args and none", c.name, storeGrad, err, len(got))
			}
		}
	}
	a := good()
	if _, err := hooked(t, false, func(d *Device) { d.CrossEntropyFP8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], N, V, 1, true) }); !errors.Is(err, device.ErrUnsupported) {
		t.Errorf("the decomposed device: %v, want ErrUnsupported", err)
	}
}

// TestGPUCrossEntropyFP8: on an sm_90 GPU, for every dtype, several (N, V)
// (GPT-2's vocabulary with more rows than SMs among them), both kernel
// forms where the TMA one runs, with and without the device loss scale
// (state), at a scale that flushes almost nothing (the seed's,
// 57344/dscale) and one that flushes most values (2^-14): the losses and the
// gradient over the logits are CrossEntropy's (CrossEntropyScaled's) on
// the same device bit for bit, outputs poisoned; q is within one E5M2
// rounding of the CPU twin's codes (the kernel's ex2.approx and the
// CPU's exp differ by float ulps) at no more than 1% of the values; amax
// (added to a pending pair) within 1e-5 of the twin's, relative, and the
// underflows within 1% (and 8) of its count. With storeGrad false the
// logits are left as they were (bit for bit) and the losses, q and amax
// are storeGrad true's bit for bit. dscale 0 leaves q, amax and the
// logits untouched.
func TestGPUCrossEntropyFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 conversion on %s (CrossEntropyFP8 needs sm_90)", g.Name())
	}
	rng := testRNG(t)
	ref := cpu.New(device.Options{Fused: true})
	F := tensor.F32
	shapes := [][2]int{{1, 16}, {37, 96}, {130, 1024}, {g.sms() + 5, 50304}}
	for _, dt := range floatDTypes {
		for _, sh := range shapes {
			N, V := sh[0], sh[1]
			if dt == F && V > 1024 {
				continue // fp32 rows of GPT-2's vocabulary: the bf16 case covers the shape
			}
			x := randHost(rng, dt, 0, 2, N, V)
			tg := make([]int32, N)
			for i := range tg {
				tg[i] = int32(rng.Intn(V))
			}
			tg[0] = int32(V - 1)
			targets, _ := tensor.FromI32(tg, N)
			td := toGPU(t, g, targets)
			dscale := 1 / float32(N)
			for _, noTMA := range []bool{false, true} {
				if noTMA && g.tmaSmem[kernelKey{kernCEF8TMA, dt}] == 0 {
					continue // the l3 form ran already
				}
				for _, withState := range []bool{false, true} {
					for _, s := range []float32{tensor.E5M2.Max() / dscale, 1.0 / 16384} {
						name := fmt.Sprintf("%s N %d V %d noTMA %v state %v scale %g", dt, N, V, noTMA, withState, s)
						checkCrossEntropyFP8(t, g, ref, name, x, targets, td, N, V, dscale, s, withState, noTMA)
					}
				}
			}
		}
	}
}

// checkCrossEntropyFP8 runs one case of TestGPUCrossEntropyFP8.
func checkCrossEntropyFP8(t *testing.T, g *Device, ref *cpu.Device, name string, x, targets, td *tensor.Tensor, N, V int, dscale, s float32, withState, noTMA bool) {
	t.Helper()
	F := tensor.F32
	g.noTMA = noTMA
	defer func() { g.noTMA = false }()
	var st, hst *tensor.Tensor
	if withState {
		hst = tensor.New(F, device.StateLen)
		hst.F32()[device.SlotScale] = 2
		st = toGPU(t, g, hst)
	}
	hs, _ := tensor.FromF32([]float32{s}, 1)
	pend := []float32{1e-30, math.Float32frombits(5)} // a pending amax and 5 underflows
	hamax, _ := tensor.FromF32(pend, 2)

	// CrossEntropy (CrossEntropyScaled) on this device: the losses and gradient to match
	xb, lb := toGPU(t, g, x), poisoned(t, g, F, N)
	if withState {
		g.CrossEntropyScaled(lb, xb, td, st, N, V, dscale)
	} else {
		g.CrossEntropy(lb, xb, td, N, V, dscale)
	}
	wl, wg := toHost(t, g, lb).F32(), toHost(t, g, xb).Raw()

	xd, ld, q, amax := toGPU(t, g, x), poisoned(t, g, F, N), e5m2Buf(t, g, N, V), toGPU(t, g, hamax)
	g.CrossEntropyFP8(ld, xd, q, amax, td, toGPU(t, g, hs), st, N, V, dscale, true)
	gl, gg, gq, ga := toHost(t, g, ld).F32(), toHost(t, g, xd).Raw(), toHost(t, g, q).Raw(), toHost(t, g, amax).F32()

	// storeGrad false: the same losses, q and amax; the logits as they were
	nx, nl, nq, na := toGPU(t, g, x), poisoned(t, g, F, N), e5m2Buf(t, g, N, V), toGPU(t, g, hamax)
	g.CrossEntropyFP8(nl, nx, nq, na, td, toGPU(t, g, hs), st, N, V, dscale, false)
	if string(toHost(t, g, nx).Raw()) != string(x.Raw()) {
		t.Errorf("%s, storeGrad false: the logits were written", name)
	}
	if string(toHost(t, g, nl).Raw()) != string(toHost(t, g, ld).Raw()) || string(toHost(t, g, nq).Raw()) != string(gq) ||
		string(toHost(t, g, na).Raw()) != string(toHost(t, g, amax).Raw()) {
		t.Errorf("%s, storeGrad false: the losses, q or amax differ from storeGrad true's", name)
	}

	for i := range N {
		if math.Float32bits(gl[i]) != math.Float32bits(wl[i]) {
			t.Errorf("%s: loss %d is %v, CrossEntropy's %v", name, i, gl[i], wl[i])
			break
		}
	}
	for i := range gg {
		if gg[i] != wg[i] {
			t.Errorf("%s: the gradient differs from CrossEntropy's at byte %d", name, i)
			break
		}
	}

	// the CPU twin on the same logits
	rx, rl, rq := tensor.New(x.DType, N, V), tensor.New(F, N), tensor.New(tensor.F8E5M2, N, V)
	copy(rx.Raw(), x.Raw())
	ramax, _ := tensor.FromF32(append([]float32(nil), pend...), 2)
	ref.CrossEntropyFP8(rl, rx, rq, ramax, targets, hs, hst, N, V, dscale, true)
	if err := ref.Sync(); err != nil {
		t.Fatal(err)
	}
	far, differ := 0, 0
	for i, b := range rq.Raw() {
		if gq[i] == b {
			continue
		}
		differ++
		if !nearE5M2(gq[i], b) {
			if far++; far <= 3 {
				t.Errorf("%s: q[%d,%d] %#02x, the twin's %#02x", name, i/V, i%V, gq[i], b)
			}
		}
	}
	if far > 3 || differ > (N*V)/100 {
		t.Errorf("%s: %d codes differ from the twin's (%d by more than a rounding) of %d", name, differ, far, N*V)
	}
	wa := ramax.F32()
	if d := math.Abs(float64(ga[0]-wa[0])) / float64(wa[0]); !(d <= 1e-5) {
		t.Errorf("%s: amax %g, the twin's %g", name, ga[0], wa[0])
	}
	gu, wu := int64(math.Float32bits(ga[1])), int64(math.Float32bits(wa[1]))
	if d := gu - wu; d < -8-wu/100 || d > 8+wu/100 {
		t.Errorf("%s: %d underflows, the twin's %d", name, gu, wu)
	}

	// dscale 0: the losses only
	q0, a0 := e5m2Buf(t, g, N, V), toGPU(t, g, hamax)
	l0, x0 := poisoned(t, g, F, N), toGPU(t, g, x)
	g.CrossEntropyFP8(l0, x0, q0, a0, td, toGPU(t, g, hs), st, N, V, 0, withState)
	if string(toHost(t, g, x0).Raw()) != string(x.Raw()) {
		t.Errorf("%s, dscale 0: the logits were written", name)
	}
	for i, b := range toHost(t, g, q0).Raw() {
		if b != 0xa5 {
			t.Fatalf("%s, dscale 0: q[%d] written (%#02x)", name, i, b)
		}
	}
	if a := toHost(t, g, a0).F32(); math.Float32bits(a[0]) != math.Float32bits(pend[0]) || a[1] != pend[1] {
		t.Errorf("%s, dscale 0: amax %v, want %v untouched", name, a, pend)
	}
	if l := toHost(t, g, l0).F32(); math.Float32bits(l[0]) != math.Float32bits(wl[0]) {
		t.Errorf("%s, dscale 0: loss 0 %v, want %v", name, l[0], wl[0])
	}
}

// e5m2Buf allocates an (N, V) E5M2 device tensor of 0xa5 bytes (a
// finite code no run of the tests writes everywhere), freed when the
// test ends.
func e5m2Buf(t *testing.T, g *Device, N, V int) *tensor.Tensor {
	t.Helper()
	d, err := g.Alloc(tensor.F8E5M2, N, V)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(d) })
	if err := g.Stream().Memset8(cuda.DevicePtr(d.Dev), 0xa5, uint64(d.Bytes())); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCrossEntropyFP8EmulatorMatchesCPU (any machine with g++): the host
// emulator of crossentropy_fp8_l3 (kernels/emu/crossentropy_fp8: the
// kernel's C++ on host threads, a persistent grid of fewer blocks than
// rows, blocks in order and reversed) against the CPU twin, every dtype,
// with masked (-Inf) logits, with and without the loss scale at
// dscale_mul, at a scale that flushes almost nothing (and saturates the
// largest values with the loss scale 2) and one that flushes most values
// (2^-14), and with dscale 0: the losses within 1e-5 (the host's
// exp2f against the twin's exp), the gradient over the logits within an
// ulp of T, q within one E5M2 rounding of the twin's at no more than 1%
// of the values, amax (added to a pending pair) within 1e-5 and the
// underflows within 1% (and 2); with dscale 0 q and amax as they were.
// Each shape runs again with the kernel's store 0 (storeGrad false) at
// both scales, with and without the loss scale: the logits come out as
// they went in, and the losses, q and amax are those of store 1 bit for
// bit.
func TestCrossEntropyFP8EmulatorMatchesCPU(t *testing.T) {
	rng := testRNG(t)
	ref := cpu.New(device.Options{Fused: true})
	F := tensor.F32
	for _, dt := range floatDTypes {
		bin := emulatorOf(t, "crossentropy_fp8", dt, floatDTypes)
		for _, c := range []struct{ N, V, grid, rev int }{{3, 16, 1, 0}, {5, 96, 2, 1}, {7, 1024, 3, 0}} {
			N, V := c.N, c.V
			x := randHost(rng, dt, 0, 2, N, V)
			xv := x.ToF32()
			for j := 0; j < V; j += 3 {
				xv[j] = float32(math.Inf(-1)) // row 0: a third of the vocabulary masked
			}
			if err := x.SetF32(xv); err != nil {
				t.Fatal(err)
			}
			tg := make([]int32, N)
			for i := range tg {
				tg[i] = int32(rng.Intn(V))
			}
			tg[0], tg[N-1] = 1, int32(V-1)
			targets, _ := tensor.FromI32(tg, N)
			big, tiny := tensor.E5M2.Max()*float32(N)/2, float32(1)/16384
			for ri, r := range []struct{ mul, dscale, s float32 }{
				{0, 1 / float32(N), big}, {2, 1 / float32(N), tiny}, {0, 1 / float32(N), tiny}, {2, 0, big}} {
				mul, dscale, s := r.mul, r.dscale, r.s
				name := fmt.Sprintf("%s N %d V %d mul %g dscale %g scale %g", dt, N, V, mul, dscale, s)
				pend := []float32{1e-30, math.Float32frombits(5)}
				in := make([]byte, 0, 20+4*N+len(x.Raw()))
				for _, v := range []float32{s, dscale, mul, pend[0], pend[1]} {
					in = binary.LittleEndian.AppendUint32(in, math.Float32bits(v))
				}
				in = append(append(in, targets.Raw()...), x.Raw()...)
				out := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(V), fmt.Sprint(c.grid), fmt.Sprint(c.rev), "1")
				es := dt.Size()
				if len(out) != 4*N+N*V*es+N*V+8 {
					t.Fatalf("%s: %d bytes out", name, len(out))
				}
				// store 0 (the first two runs): every output but the logits as
				// store 1's, the logits untouched
				if lo, hi := 4*N, 4*N+N*V*es; ri < 2 {
					ns := runEmu(t, bin, in, "io", fmt.Sprint(N), fmt.Sprint(V), fmt.Sprint(c.grid), fmt.Sprint(c.rev), "0")
					if len(ns) != len(out) {
						t.Fatalf("%s, store 0: %d bytes out, store 1 %d", name, len(ns), len(out))
					}
					if string(ns[lo:hi]) != string(x.Raw()) {
						t.Errorf("%s, store 0: the logits were written", name)
					}
					if string(ns[:lo]) != string(out[:lo]) || string(ns[hi:]) != string(out[hi:]) {
						t.Errorf("%s, store 0: the losses, q or amax differ from store 1's", name)
					}
				}
				el := tensor.New(F, N)
				copy(el.Raw(), out[:4*N])
				eg := tensor.New(dt, N, V)
				copy(eg.Raw(), out[4*N:4*N+N*V*es])
				eq := out[4*N+N*V*es : 4*N+N*V*es+N*V]
				ea := [2]float32{math.Float32frombits(binary.LittleEndian.Uint32(out[len(out)-8:])), math.Float32frombits(binary.LittleEndian.Uint32(out[len(out)-4:]))}

				var st *tensor.Tensor
				if mul != 0 {
					st = tensor.New(F, device.StateLen)
					st.F32()[device.SlotScale] = mul
				}
				rx, rl, rq := tensor.New(dt, N, V), tensor.New(F, N), tensor.New(tensor.F8E5M2, N, V)
				copy(rx.Raw(), x.Raw())
				for i := range rq.Raw() {
					rq.Raw()[i] = 0xa5
				}
				ramax, _ := tensor.FromF32(append([]float32(nil), pend...), 2)
				hs, _ := tensor.FromF32([]float32{s}, 1)
				ref.CrossEntropyFP8(rl, rx, rq, ramax, targets, hs, st, N, V, dscale, true)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				for i, l := range el.F32() {
					if w := rl.F32()[i]; math.Abs(float64(l-w)) > 1e-5*math.Max(1, math.Abs(float64(w))) {
						t.Errorf("%s: loss %d %v, the twin's %v", name, i, l, w)
					}
				}
				rel := map[tensor.DType]float64{F: 1e-5, tensor.BF16: 1.0 / 128, tensor.F16: 1.0 / 1024}[dt]
				bad := 0
				for i, g := range eg.ToF32() {
					w := rx.ToF32()[i]
					if math.Abs(float64(g-w)) > rel*math.Abs(float64(w))+1e-7 {
						if bad++; bad <= 3 {
							t.Errorf("%s: gradient [%d,%d] %g, the twin's %g", name, i/V, i%V, g, w)
						}
					}
				}
				differ := 0
				for i, b := range rq.Raw() {
					if eq[i] != b {
						differ++
						if !nearE5M2(eq[i], b) {
							t.Fatalf("%s: q[%d,%d] %#02x, the twin's %#02x", name, i/V, i%V, eq[i], b)
						}
					}
				}
				if differ > 2+N*V/100 {
					t.Errorf("%s: %d of %d codes one rounding from the twin's", name, differ, N*V)
				}
				wa := ramax.F32()
				if d := math.Abs(float64(ea[0]-wa[0])) / float64(wa[0]); !(d <= 1e-5) {
					t.Errorf("%s: amax %g, the twin's %g", name, ea[0], wa[0])
				}
				gu, wu := int64(math.Float32bits(ea[1])), int64(math.Float32bits(wa[1]))
				if d := gu - wu; d < -2-wu/100 || d > 2+wu/100 {
					t.Errorf("%s: %d underflows, the twin's %d", name, gu, wu)
				}
				if dscale == 0 && (ea != [2]float32(pend) || string(eq) != string(rq.Raw()) || eq[0] != 0xa5) {
					t.Errorf("%s: dscale 0 wrote q or amax", name)
				}
				if dscale != 0 && s == tiny && wu < int64(N*V)/2 {
					t.Errorf("%s: the twin flushed %d of %d values at the scale 2^-14 (the case is meant to flush most)", name, wu-5, N*V)
				}
			}
		}
	}
}
