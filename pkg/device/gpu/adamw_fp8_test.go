package gpu

// adamw_fp8_test.go: AdamWStateFP8 (kernels/adamw_fp8.cu): the kernel
// compiled for the host against the CPU twin, the launches on any machine,
// and on an sm_90 GPU the whole op against the CPU twin, bit for bit.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// af8Weight is one weight of an AdamWStateFP8 case: its shape, whether its
// segment decays and the scale it is cast with.
type af8Weight struct {
	rows, cols int
	decay      bool
	scale      float32
}

// af8Case is the host side of one AdamWStateFP8 call: the layout (each
// weight a segment, with a 4-element segment after the first and a
// 5-element one at the end; the weight after the one of 17×50 starts at an
// offset that is not a multiple of 4), the buffers, the step state and the
// weights' FP8 tensors.
type af8Case struct {
	ws                  []af8Weight
	layout              *tensor.Layout
	master, grads, m, v *tensor.Tensor // F32
	work                *tensor.Tensor // dt
	state               *tensor.Tensor
	hp                  device.AdamW
	q, qt, amax, scale  []*tensor.Tensor
	offs                []int
}

// af8Weights are the weights of the cases: the vector paths, partial
// tiles, odd widths and offsets (the element path); scales that keep most values, saturate many (1e4:
// |w|·s past 448 from 0.045) or flush many (0.01).
var af8Weights = []af8Weight{{64, 96, true, 448 / 0.2}, {37, 100, false, 1e4}, {130, 208, true, 1}, {33, 96, true, 0.01}, {16, 48, false, 3000},
	{17, 50, true, 448 / 0.2}, {20, 64, false, 448 / 0.2}}

// newAF8Case returns a case of fresh values in dt, at AdamW step 3 (finite:
// the step's gradients were finite, else the state says skip).
func newAF8Case(rng *tensor.RNG, dt tensor.DType, ws []af8Weight, finite bool) *af8Case {
	c := &af8Case{ws: ws, layout: &tensor.Layout{}}
	for i, w := range ws {
		c.offs = append(c.offs, c.layout.Add(fmt.Sprintf("w%d", i), w.decay, w.rows, w.cols))
		if i == 0 {
			c.layout.Add("b0", false, 4)
		}
	}
	c.layout.Add("tail", false, 5)
	n := c.layout.Total
	c.master = randHost(rng, tensor.F32, 0, 0.05, n)
	c.grads = randHost(rng, tensor.F32, 0, 0.01, n)
	c.m = randHost(rng, tensor.F32, 0, 0.001, n)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(1e-6 * (0.1 + rng.Float64()))
	}
	c.v, _ = tensor.FromF32(v, n)
	c.work = tensor.New(dt, n)
	if err := c.work.SetF32(c.master.F32()); err != nil {
		panic(err)
	}
	c.hp = device.AdamW{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3}
	k := c.hp.Consts()
	st := make([]float32, device.StateLen)
	st[device.SlotGradScale], st[device.SlotDecay], st[device.SlotStep], st[device.SlotBC2] = 0.5, k.Decay, k.Step, k.BC2
	st[device.SlotDoDecay] = 1
	if finite {
		st[device.SlotFinite] = 1
	}
	c.state, _ = tensor.FromF32(st, len(st))
	for i, w := range ws {
		c.q = append(c.q, tensor.New(tensor.F8E4M3, w.rows, w.cols))
		c.qt = append(c.qt, tensor.New(tensor.F8E4M3, w.cols, w.rows))
		a, _ := tensor.FromF32([]float32{0.01 * float32(i), math.Float32frombits(uint32(7 * i))}, 2) // pending before
		s, _ := tensor.FromF32([]float32{w.scale}, 1)
		c.amax, c.scale = append(c.amax, a), append(c.scale, s)
	}
	return c
}

// weights returns the case's device.FP8Weight list over the given tensors
// (the host's, or device copies).
func (c *af8Case) weights(q, qt, amax, scale []*tensor.Tensor) []device.FP8Weight {
	w := make([]device.FP8Weight, len(c.ws))
	for i, x := range c.ws {
		w[i] = device.FP8Weight{Offset: c.offs[i], Rows: x.rows, Cols: x.cols, Q: q[i], QT: qt[i], Amax: amax[i], Scale: scale[i]}
	}
	return w
}

// cloneHost returns a copy of host tensor h.
func cloneHost(h *tensor.Tensor) *tensor.Tensor {
	c := tensor.New(h.DType, h.Shape...)
	copy(c.Raw(), h.Raw())
	return c
}

// cloneAll returns copies of the host tensors.
func cloneAll(ts []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(ts))
	for i, t := range ts {
		out[i] = cloneHost(t)
	}
	return out
}

// want runs the CPU twin on copies of the case and returns master, m, v,
// work, and each weight's q, qt and amax after.
func (c *af8Case) want(t *testing.T) (master, m, v, work *tensor.Tensor, q, qt, amax []*tensor.Tensor) {
	t.Helper()
	ref := cpu.New(device.Options{Fused: true})
	master, m, v, work = cloneHost(c.master), cloneHost(c.m), cloneHost(c.v), cloneHost(c.work)
	q, qt, amax = cloneAll(c.q), cloneAll(c.qt), cloneAll(c.amax)
	ref.AdamWStateFP8(master, work, c.grads, m, v, c.layout, c.hp, c.state, c.weights(q, qt, amax, c.scale))
	if err := ref.Sync(); err != nil {
		t.Fatal(err)
	}
	return master, m, v, work, q, qt, amax
}

// sameBits reports whether two host tensors hold the same bytes.
func sameBits(a, b *tensor.Tensor) bool { return bytes.Equal(a.Raw(), b.Raw()) }

// TestAdamWFP8EmulatorMatchesCPU runs kernels/adamw_fp8.cu compiled for
// the host (kernels/emu/adamw_fp8, -DDRUTO_EMU) against pkg/device/cpu's
// AdamWStateFP8, bit for bit over the weights' elements (the kernel's
// share of the op): master, m, v, the working copy, q, qt and amax, for
// every working dtype, a finite step and a skipped one, with the vector
// paths the launcher takes (blocks in order) and with none (blocks in
// reverse). Needs g++ (not cgo).
func TestAdamWFP8EmulatorMatchesCPU(t *testing.T) {
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		bin := emulatorOf(t, "adamw_fp8", dt, floatDTypes)
		for _, finite := range []bool{true, false} {
			c := newAF8Case(rng, dt, af8Weights, finite)
			wm, wmo, wv, wwork, wq, wqt, wamax := c.want(t)
			n := c.layout.Total
			for _, rev := range []int{0, 1} {
				name := fmt.Sprintf("%s finite %v reverse %d", dt, finite, rev)
				var in []byte
				for i, w := range c.ws {
					vr, vc := 0, 0
					if rev == 0 { // the launcher's rule (host buffers are 16-byte aligned)
						if c.offs[i]%4 == 0 && w.cols%4 == 0 {
							vr = 1
						}
						if w.rows%16 == 0 {
							vc = 1
						}
					}
					for _, h := range []int{c.offs[i], w.rows, w.cols, int(b2i(w.decay)), vr, vc} {
						in = binary.LittleEndian.AppendUint32(in, uint32(h))
					}
					in = append(in, c.scale[i].Raw()...)
					in = append(in, c.amax[i].Raw()...)
				}
				in = append(in, c.state.Raw()...)
				k := c.hp.Consts()
				for _, f := range []float32{k.W1, k.B2, k.W2, k.Eps} {
					in = binary.LittleEndian.AppendUint32(in, math.Float32bits(f))
				}
				in = binary.LittleEndian.AppendUint32(in, uint32(b2i(k.Small)))
				for _, x := range []*tensor.Tensor{c.master, c.grads, c.m, c.v, c.work} {
					in = append(in, x.Raw()...)
				}
				out := runEmu(t, bin, in, "io", fmt.Sprint(len(c.ws)), fmt.Sprint(n), fmt.Sprint(rev))
				take := func(k int) []byte {
					b := out[:k]
					out = out[k:]
					return b
				}
				gm, gmo, gv, gwork := take(4*n), take(4*n), take(4*n), take(n*dt.Size())
				for i, w := range c.ws {
					lo, hi := c.offs[i], c.offs[i]+w.rows*w.cols
					for _, x := range []struct {
						what      string
						got, want []byte
						size      int
					}{{"master", gm, wm.Raw(), 4}, {"m", gmo, wmo.Raw(), 4}, {"v", gv, wv.Raw(), 4}, {"work", gwork, wwork.Raw(), dt.Size()}} {
						if !bytes.Equal(x.got[lo*x.size:hi*x.size], x.want[lo*x.size:hi*x.size]) {
							t.Errorf("%s: weight %d's %s differs from the CPU's", name, i, x.what)
						}
					}
					if g := take(w.rows * w.cols); !bytes.Equal(g, wq[i].Raw()) {
						t.Errorf("%s: weight %d's q differs from the CPU's", name, i)
					}
					if g := take(w.rows * w.cols); !bytes.Equal(g, wqt[i].Raw()) {
						t.Errorf("%s: weight %d's qt differs from the CPU's", name, i)
					}
					if g := take(8); !bytes.Equal(g, wamax[i].Raw()) {
						t.Errorf("%s: weight %d's amax %v, the CPU's %v", name, i, g, wamax[i].Raw())
					}
				}
				if len(out) != 0 {
					t.Errorf("%s: %d bytes left over", name, len(out))
				}
			}
		}
	}
}

// TestSpansWithout: the chunks AdamWStateFP8 leaves to adamw_fused_state2
// are the layout's elements outside every weight, each with its segment's
// decay.
func TestSpansWithout(t *testing.T) {
	spans := []adamSpan{{Lo: 0, Hi: 10, Decay: true}, {Lo: 10, Hi: 13}, {Lo: 13, Hi: 40, Decay: true}}
	w := []device.FP8Weight{{Offset: 20, Rows: 2, Cols: 5}, {Offset: 0, Rows: 2, Cols: 5}, {Offset: 14, Rows: 1, Cols: 3}}
	got := spansWithout(spans, w)
	want := []adamSpan{{Lo: 10, Hi: 13}, {Lo: 13, Hi: 14, Decay: true}, {Lo: 17, Hi: 20, Decay: true}, {Lo: 30, Hi: 40, Decay: true}}
	if !slices.Equal(got, want) {
		t.Errorf("spansWithout = %v, want %v", got, want)
	}
}

// TestLaunchAdamWStateFP8 (any machine): the two kernels match their PTX
// signatures; adamw_fused_state2 runs over the chunks outside the weights
// and adamw_fp8_e4m3 over every weight's tiles, with the weights' records
// as adamw_fp8.cu reads them; bad weights are refused with ErrFP8Args and
// launch nothing.
func TestLaunchAdamWStateFP8(t *testing.T) {
	sigs := signatures(t)
	c := newAF8Case(tensor.NewRNG(1), tensor.BF16, af8Weights, true)
	n := c.layout.Total
	F := tensor.F32
	master, grads, m, v, work, state := dev(F, n), dev(F, n), dev(F, n), dev(F, n), dev(tensor.BF16, n), dev(F, device.StateLen)
	var q, qt, amax, scale []*tensor.Tensor
	tiles := 0
	for _, w := range c.ws {
		q, qt = append(q, dev(tensor.F8E4M3, w.rows, w.cols)), append(qt, dev(tensor.F8E4M3, w.cols, w.rows))
		amax, scale = append(amax, dev(F, 2)), append(scale, dev(F, 1))
		tiles += blocks(w.rows, af8Tile) * blocks(w.cols, af8Tile)
	}
	ws := c.weights(q, qt, amax, scale)
	var recs []byte
	got, err := hooked(t, true, func(d *Device) {
		d.AdamWStateFP8(master, work, grads, m, v, c.layout, c.hp, state, ws)
		spans, _, _ := device.AdamWArgs(&device.Ops.AdamWState, c.layout, c.hp)
		dec, _ := device.FP8WeightSpans(spans, ws)
		recs, _ = d.af8Records(master, work, grads, m, v, tensor.BF16, ws, dec)
	})
	if err != nil {
		t.Fatal(err)
	}
	names := checkSigs(t, "AdamWStateFP8", sigs, got)
	if !slices.Equal(names, []string{"adamw_fused_state2", "adamw_fp8_e4m3"}) || got[1].dt != tensor.BF16 {
		t.Fatalf("launches %v, want adamw_fused_state2 and adamw_fp8_e4m3 (bf16)", names)
	}
	if a := got[1].args; a[6] != len(ws) || a[7] != cuda.DevicePtr(state.Dev) {
		t.Errorf("adamw_fp8_e4m3 args %v: want %d weights and the state", a, len(ws))
	}
	// Each record: off; rows | cols<<32; q; qt; amax; scale; tile0 | dec<<32; vec_row | vec_col<<32.
	if len(recs) != 8*af8Words*len(ws) {
		t.Fatalf("%d bytes of records, want %d", len(recs), 8*af8Words*len(ws))
	}
	tile0 := 0
	for i, w := range c.ws {
		r := recs[8*af8Words*i:]
		word := func(k int) uint64 { return binary.LittleEndian.Uint64(r[8*k:]) }
		lo := func(k int) int { return int(uint32(word(k))) }
		hi := func(k int) int { return int(uint32(word(k) >> 32)) }
		vr := 0
		if c.offs[i]%4 == 0 && w.cols%4 == 0 {
			vr = 1
		}
		vc := 0
		if w.rows%16 == 0 {
			vc = 1
		}
		if int(word(0)) != c.offs[i] || lo(1) != w.rows || hi(1) != w.cols || word(2) != uint64(q[i].Dev) || word(3) != uint64(qt[i].Dev) ||
			word(4) != uint64(amax[i].Dev) || word(5) != uint64(scale[i].Dev) || lo(6) != tile0 || hi(6) != int(b2i(w.decay)) || lo(7) != vr || hi(7) != vc {
			t.Errorf("weight %d: record %x", i, r[:8*af8Words])
		}
		tile0 += blocks(w.rows, af8Tile) * blocks(w.cols, af8Tile)
	}
	bad := func(name string, f func([]device.FP8Weight) []device.FP8Weight) {
		w := f(slices.Clone(ws))
		got, err := hooked(t, true, func(d *Device) { d.AdamWStateFP8(master, work, grads, m, v, c.layout, c.hp, state, w) })
		if !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: %v, launches %v; want ErrFP8Args and none", name, err, got)
		}
	}
	bad("overlapping", func(w []device.FP8Weight) []device.FP8Weight { return append(w, w[0]) })
	bad("across two segments", func(w []device.FP8Weight) []device.FP8Weight { w[0].Offset++; return w })
	bad("q short", func(w []device.FP8Weight) []device.FP8Weight { w[1].Q = dev(tensor.F8E4M3, 3); return w })
	bad("q e5m2", func(w []device.FP8Weight) []device.FP8Weight { w[1].Q = dev(tensor.F8E5M2, 37, 100); return w })
	bad("scale on the host", func(w []device.FP8Weight) []device.FP8Weight { w[2].Scale = tensor.New(F, 1); return w })
	got, err = hooked(t, true, func(d *Device) { d.AdamWStateFP8(master, nil, grads, m, v, c.layout, c.hp, state, ws) })
	if !errors.Is(err, ErrFP8Args) || len(got) != 0 {
		t.Errorf("no working copy: %v, launches %v; want ErrFP8Args and none", err, got)
	}
}

// TestGPUAdamWStateFP8 (sm_90): the whole op on the GPU (the chunks
// outside the weights, then the weights' tiles) against the CPU twin, bit
// for bit over every element, for every working dtype, a finite step and
// a skipped one.
func TestGPUAdamWStateFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "AdamWStateFP8 needs sm_90 (druto's FP8 rule) on %s", g.Name())
	}
	rng := testRNG(t)
	for _, dt := range floatDTypes {
		for _, finite := range []bool{true, false} {
			name := fmt.Sprintf("%s finite %v", dt, finite)
			c := newAF8Case(rng, dt, af8Weights, finite)
			wm, wmo, wv, wwork, wq, wqt, wamax := c.want(t)
			up := func(ts []*tensor.Tensor) []*tensor.Tensor {
				out := make([]*tensor.Tensor, len(ts))
				for i, x := range ts {
					out[i] = toGPU(t, g, x)
				}
				return out
			}
			master, grads, m, v, work, state := toGPU(t, g, c.master), toGPU(t, g, c.grads), toGPU(t, g, c.m), toGPU(t, g, c.v), toGPU(t, g, c.work), toGPU(t, g, c.state)
			q, qt, amax, scale := up(c.q), up(c.qt), up(c.amax), up(c.scale)
			g.AdamWStateFP8(master, work, grads, m, v, c.layout, c.hp, state, c.weights(q, qt, amax, scale))
			if err := g.Sync(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, x := range []struct {
				what      string
				got, want *tensor.Tensor
			}{{"master", master, wm}, {"m", m, wmo}, {"v", v, wv}, {"work", work, wwork}} {
				if !sameBits(toHost(t, g, x.got), x.want) {
					t.Errorf("%s: %s differs from the CPU's", name, x.what)
				}
			}
			for i := range c.ws {
				if !sameBits(toHost(t, g, q[i]), wq[i]) || !sameBits(toHost(t, g, qt[i]), wqt[i]) {
					t.Errorf("%s: weight %d's FP8 copies differ from the CPU's", name, i)
				}
				if h := toHost(t, g, amax[i]); !sameBits(h, wamax[i]) {
					t.Errorf("%s: weight %d's amax %v, the CPU's %v", name, i, h.F32(), wamax[i].F32())
				}
			}
		}
	}
}
