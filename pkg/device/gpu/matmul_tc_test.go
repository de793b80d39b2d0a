package gpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/tensor"
)

// TestTCPlan (any machine): matmul_rows_tc's plan for GPT-2's decode
// shapes on 132 SMs fits its shared memory and its limits, fills the GPU,
// and is a function of the sizes and the SM count only; logged for the
// benchmarks' record.
func TestTCPlan(t *testing.T) {
	for _, sms := range []int{40, 108, 132} {
		for _, N := range []int{9, 16, 32, 33, 64} {
			for _, s := range tcShapes {
				C, OC := s[0], s[1]
				p := tcPlan(N, C, OC, sms)
				tiles, chunks := p.grid(C, OC)
				if sms == 132 && (N == 16 || N == 64) {
					t.Logf("N %2d C %4d OC %4d: ct %2d kc %4d: %3d tiles × %2d chunks = %4d blocks, %5d B smem, %.2f µs (model)", N, C, OC, p.ct(), p.kc(), tiles, chunks, tiles*chunks, p.smem(N), float64(tcCost(p, N, C, OC, sms))/1e6)
				}
				if p.span == 0 || p.span > tcSpanMax || p.span%32 != 0 || p.lmt < 0 || p.lmt > 2 || p.smem(N) > tcSmemMax {
					t.Errorf("sms %d N %d C %d OC %d: plan %+v", sms, N, C, OC, p)
				}
				if p != tcPlan(N, C, OC, sms) {
					t.Errorf("sms %d N %d C %d OC %d: two plans", sms, N, C, OC)
				}
			}
		}
	}
}

// tcShapes are (C, OC) of GPT-2's linear layers at widths 768, 1024, 1280
// and 1600: qkv, attn_proj, fc, fc_proj.
var tcShapes = func() [][2]int {
	var out [][2]int
	for _, c := range []int{768, 1024, 1280, 1600} {
		out = append(out, [2]int{c, 3 * c}, [2]int{c, c}, [2]int{c, 4 * c}, [2]int{4 * c, c})
	}
	return out
}()

// tcCases are Matmul conformance cases at the rows matmul_rows_tc takes:
// GPT-2's four layers at each width (OC cut to keep the emulator brief
// where short), each epilogue with and without a bias, odd rows, odd
// column counts and a C that is not a multiple of the K chunks.
func tcCases(dt tensor.DType, short bool) []devicetest.Case {
	type mm struct{ N, C, OC int }
	var ms []mm
	for i, s := range tcShapes {
		C, OC := s[0], s[1]
		N := []int{9, 16, 33, 64}[i%4]
		if short && OC > 200 {
			OC = 40 + i%3 // partial column tiles
		}
		ms = append(ms, mm{N, C, OC})
	}
	ms = append(ms, mm{16, 96, 40}, mm{64, 128, 17}, mm{17, 1000, 17}, mm{64, 3072, 771}, mm{10, 8, 3})
	var cs []devicetest.Case
	for i, m := range ms {
		act := []device.Activation{device.None, device.GELU}[i%2]
		bias := i%3 != 2
		N, C, OC := m.N, m.C, m.OC
		cs = append(cs, devicetest.Case{
			Name:     fmt.Sprintf("Matmul %s (%d,%d,%d) act %d bias %v", dt, N, C, OC, act, bias),
			Contract: &device.Ops.Matmul, DType: dt, Sizes: []int{N, C, OC, int(act)},
			Omit: map[int]bool{1: act == device.None, 4: !bias},
			Call: func(d device.Device, t []*tensor.Tensor) ([]float32, error) {
				d.Matmul(t[0], t[1], t[2], t[3], t[4], N, C, OC, act)
				return nil, nil
			},
		})
	}
	return cs
}

// emuTC is the CPU device with Matmul run by the host emulator of
// matmul_rows_tc (kernels/emu/matmul_tc) at the plan tcPlan gives on sms
// SMs (or, with alt, the plan after it in tcPlans: another tile and chunk),
// blocks in order or reversed; the emulator runs each launch twice (the
// other block order the second time) and fails when the bits differ.
type emuTC struct {
	device.Device
	t        *testing.T
	bin      string
	sms, rev int
	alt      bool
}

func (e emuTC) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	e.t.Helper()
	p := tcPlan(N, C, OC, e.sms)
	if e.alt {
		ps := tcPlans(N)
		for i := range ps {
			if ps[i] == p {
				p = ps[(i+1)%len(ps)]
				break
			}
		}
	}
	in := append(append([]byte(nil), inp.Raw()...), weight.Raw()...)
	b := 0
	if bias != nil {
		in, b = append(in, bias.Raw()...), 1
	}
	gelu := 0
	if act == device.GELU {
		gelu = 1
	}
	got := runEmu(e.t, e.bin, in, "io", fmt.Sprint(N), fmt.Sprint(C), fmt.Sprint(OC), fmt.Sprint(gelu), fmt.Sprint(b), fmt.Sprint(p.lmt), fmt.Sprint(p.span), fmt.Sprint(e.rev))
	n := len(out.Raw())
	if len(got) != n*(1+gelu) {
		e.t.Fatalf("emulator: %d bytes, want %d", len(got), n*(1+gelu))
	}
	copy(out.Raw(), got[:n])
	if gelu == 1 {
		copy(pre.Raw(), got[n:])
	}
}

// TestMatmulTCEmulatorMatchesCPU (any machine with g++): matmul_rows_tc on
// the host (kernels/emu/matmul_tc: the kernel's C++ on host threads, its
// mma emulated from the PTX ISA's fragment layouts) against the CPU
// device's Matmul under the conformance harness's rule (devicetest.Run:
// the Matmul contract's tolerance, outputs NaN-poisoned), bf16 and f16,
// at the plans for 132 and 40 SMs and another plan beside each, blocks in
// order and reversed, and every launch twice (the same bits: the counters
// return to zero, the K chunks' sums do not depend on the block order).
// GPT-2's wide layers are cut to about 40 columns unless DRUTO_EMU_FULL=1
// (the full widths take about ten minutes on a 2-core machine, and the
// kernel is off by default: TCEnv).
func TestMatmulTCEmulatorMatchesCPU(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true})
	rng := testRNG(t)
	dts := []tensor.DType{tensor.BF16, tensor.F16}
	for _, dt := range dts {
		bin := emulatorOf(t, "matmul_tc", dt, dts)
		for i, c := range tcCases(dt, testing.Short() || os.Getenv("DRUTO_EMU_FULL") != "1") {
			e := emuTC{Device: ref, t: t, bin: bin, sms: []int{132, 40}[i%2], rev: i % 2, alt: i%4 >= 2}
			r := devicetest.Run(e, ref, c, rng.Uint64())
			t.Logf("%s (sms %d alt %v rev %d): pass %v relerr %.3g", c.Name, e.sms, e.alt, e.rev, r.Pass, r.MaxRelErr)
			if !r.Pass {
				t.Errorf("%s: %s", c.Name, r.Error)
			}
		}
	}
}

// TestLaunchMatmulTC (any machine): the fused 16-bit Matmul launches
// matmul_rows_tc at 9-64 rows with the plan's arguments and scratch, and
// not for fp32, 8 or 65 rows, a C that is not a multiple of 8, an
// unaligned input, the decomposed form or noTC; tcFits needs the kernel
// built (sm_80+).
func TestLaunchMatmulTC(t *testing.T) {
	sigs := signatures(t)
	type run struct {
		dt          tensor.DType
		N, C, OC    int
		act         device.Activation
		fused, noTC bool
		off         int // bytes inp is moved by
		want        string
	}
	bf, f := tensor.BF16, tensor.F32
	for _, r := range []run{
		{bf, 64, 3072, 768, device.None, true, false, 0, kernRowsTC},
		{tensor.F16, 16, 768, 3072, device.GELU, true, false, 0, kernRowsTC},
		{bf, 9, 768, 2304, device.None, true, false, 0, kernRowsTC},
		{bf, 8, 768, 2304, device.None, true, false, 0, "matmul_rows"},
		{bf, 65, 768, 2304, device.None, true, false, 0, ""},
		{f, 16, 768, 2304, device.None, true, false, 0, ""},
		{bf, 16, 100, 64, device.None, true, false, 0, ""},
		{bf, 16, 768, 64, device.None, true, false, 2, ""},
		{bf, 16, 768, 64, device.None, false, false, 0, ""},
		{bf, 16, 768, 64, device.None, true, true, 0, ""},
	} {
		name := fmt.Sprintf("%+v", r)
		got, err := hooked(t, r.fused, func(d *Device) {
			d.noTC = r.noTC
			inp := dev(r.dt, r.N, r.C)
			inp.Dev += uintptr(r.off)
			var pre *tensor.Tensor
			if r.act == device.GELU {
				pre = dev(r.dt, r.N, r.OC)
			}
			d.Matmul(dev(r.dt, r.N, r.OC), pre, inp, dev(r.dt, r.OC, r.C), dev(r.dt, r.OC), r.N, r.C, r.OC, r.act)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		names := checkSigs(t, name, sigs, got)
		tc := 0
		for _, n := range names {
			if n == kernRowsTC {
				tc++
			}
		}
		switch {
		case r.want == kernRowsTC && (len(got) != 1 || tc != 1):
			t.Errorf("%s: launches %v, want matmul_rows_tc alone", name, names)
		case r.want == "matmul_rows" && (len(names) != 1 || names[0] != "matmul_rows"):
			t.Errorf("%s: launches %v, want matmul_rows", name, names)
		case r.want == "" && tc > 0:
			t.Errorf("%s: launches %v, want no matmul_rows_tc", name, names)
		}
		if r.want != kernRowsTC || len(got) != 1 {
			continue
		}
		p := tcPlan(r.N, r.C, r.OC, 132)
		_, chunks := p.grid(r.C, r.OC)
		a := got[0].args
		if a[7] != r.N || a[8] != r.C || a[9] != r.OC || a[10] != int(r.act) || a[11] != p.lmt || a[12] != p.span {
			t.Errorf("%s: args %v, want sizes, gelu and the plan %+v", name, a, p)
		}
		if scratch := a[2] != cuda.DevicePtr(0) && a[3] != cuda.DevicePtr(0); scratch != (chunks > 1) {
			t.Errorf("%s: part, done %v %v with %d chunks", name, a[2], a[3], chunks)
		}
	}
	// without a launch hook, only a device that built the kernel takes it
	d := &Device{fused: true, funcs: map[kernelKey]*cuda.Function{}}
	x, w := dev(bf, 16, 768), dev(bf, 64, 768)
	if d.tcFits(x, w, 16, 768) {
		t.Error("tcFits without matmul_rows_tc built (an sm_75 GPU)")
	}
	d.funcs[kernelKey{kernRowsTC, bf}] = &cuda.Function{}
	if !d.tcFits(x, w, 16, 768) {
		t.Error("tcFits false with matmul_rows_tc built")
	}
}

// TestGPUMatmulTC: the fused Matmul on the GPU at the rows matmul_rows_tc
// takes (tcCases at GPT-2's full widths) against the CPU device under the
// conformance rule, each case run twice for the same bits (deterministic
// K-chunk sums); it checks that the kernel ran (sm_80+) and, with noTC,
// that cuBLASLt's results pass the same cases.
func TestGPUMatmulTC(t *testing.T) {
	g := gpuDev(t, true)
	ref := cpu.New(device.Options{Fused: true})
	rng := testRNG(t)
	if major, _ := g.Capability(); major < 8 {
		t.Logf("%s is older than sm_80: matmul_rows_tc is not built; the cases run on cuBLASLt", g.Name())
	}
	for _, noTC := range []bool{false, true} {
		g.noTC = noTC
		for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
			for _, c := range tcCases(dt, false) {
				c.Same = true
				g.trace = map[kernelKey]bool{}
				r := devicetest.Run(g, ref, c, rng.Uint64())
				ran := g.trace[kernelKey{kernRowsTC, dt}]
				g.trace = nil
				t.Logf("noTC %v %s: pass %v relerr %.3g tc %v", noTC, c.Name, r.Pass, r.MaxRelErr, ran)
				if !r.Pass {
					t.Errorf("noTC %v %s: %s", noTC, c.Name, r.Error)
				}
				major, _ := g.Capability()
				if want := !noTC && major >= 8 && c.Sizes[1]%8 == 0; ran != want {
					t.Errorf("noTC %v %s: matmul_rows_tc ran %v, want %v", noTC, c.Name, ran, want)
				}
			}
		}
	}
	g.noTC = false
}
