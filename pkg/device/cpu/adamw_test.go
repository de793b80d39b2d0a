package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ntAdamWRef is one step of torch.optim.AdamW (decoupled weight decay,
// foreach=False) in float64 over the elements with in[i] set:
// p *= 1 - lr·wd (decay only); m.lerp_(g, 1-β1); v = β2·v + (1-β2)·g²;
// p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps), after g *= GradScale.
func ntAdamWRef(p, m, v, g []float64, in, decay []bool, hp device.AdamW) {
	lr, b1, b2, eps, wd := float64(hp.LR), float64(hp.Beta1), float64(hp.Beta2), float64(hp.Eps), float64(hp.WeightDecay)
	gs := float64(hp.GradScale)
	if gs == 0 {
		gs = 1
	}
	bc1 := 1 - math.Pow(b1, float64(hp.Step))
	bc2 := 1 - math.Pow(b2, float64(hp.Step))
	for i := range p {
		if !in[i] {
			continue
		}
		gi := g[i] * gs
		if decay[i] {
			p[i] *= 1 - lr*wd
		}
		m[i] += (1 - b1) * (gi - m[i])
		v[i] = b2*v[i] + (1-b2)*gi*gi
		p[i] -= lr / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + eps)
	}
}

// ntAdamLayout returns a layout with decayed and undecayed segments, a gap
// of 3 elements that no segment covers, and segments listed out of order.
func ntAdamLayout() (*tensor.Layout, []bool, []bool) {
	l := &tensor.Layout{Total: 1 + 37*5 + 5 + 3 + 1000 + 7}
	l.Segments = []tensor.Segment{
		{Name: "w2", Offset: 1 + 37*5 + 5 + 3, Shape: tensor.Shape{1000}, Decay: true},
		{Name: "scalar", Offset: 0, Shape: tensor.Shape{1}, Decay: false},
		{Name: "w1", Offset: 1, Shape: tensor.Shape{37, 5}, Decay: true},
		{Name: "b1", Offset: 1 + 37*5, Shape: tensor.Shape{5}, Decay: false},
		{Name: "ln", Offset: 1 + 37*5 + 5 + 3 + 1000, Shape: tensor.Shape{7}, Decay: false},
	}
	in, decay := make([]bool, l.Total), make([]bool, l.Total)
	for _, s := range l.Segments {
		for i := s.Offset; i < s.Offset+s.Numel(); i++ {
			in[i], decay[i] = true, s.Decay
		}
	}
	return l, in, decay
}

// TestAdamWReference runs three steps (changing lr, grad scale 0, 0.5, 1)
// against the float64 torch.optim.AdamW reference, with decay on some
// segments only, a working copy in bf16 or f16, and a gap left untouched.
func TestAdamWReference(t *testing.T) {
	layout, in, decay := ntAdamLayout()
	n := layout.Total
	for _, wdt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for _, f := range ntForms {
			r := ntRNG(8)
			d := ntDev(f.fused, 2)
			master, p64 := ntTensor(t, tensor.F32, ntNormal(r, n, 0.5, 0), n)
			m, v := tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)
			m64, v64 := make([]float64, n), make([]float64, n)
			work := tensor.New(wdt, n)
			ntPoison(work)
			gap := layout.Segments[3].Offset + 5 // first element of the gap
			keep := master.F32()[gap : gap+3 : gap+3]
			keepBits := []float32{keep[0], keep[1], keep[2]}
			for step, gs := range []float32{0, 0.5, 1} {
				grads, g64 := ntTensor(t, tensor.F32, ntNormal(r, n, 1, 0), n)
				hp := device.AdamW{LR: 3e-3 * float32(step+1), Beta1: 0.9, Beta2: 0.95, Eps: 1e-8,
					WeightDecay: 0.1, Step: step + 1, GradScale: gs}
				d.AdamWStep(master, work, grads, m, v, layout, hp)
				ntSync(t, d)
				ntAdamWRef(p64, m64, v64, g64, in, decay, hp)
			}
			name := fmt.Sprint(wdt, " ", f.name)
			// Three steps of about a dozen float32 roundings each on O(1)
			// values (the update is a ratio of two such values): scale 2.
			ntClose(t, name+" master", ntF64(master), p64, tensor.F32, 2)
			ntClose(t, name+" m", ntF64(m), m64, tensor.F32, 2)
			ntClose(t, name+" v", ntF64(v), v64, tensor.F32, 2)
			for i, want := range keepBits {
				if math.Float32bits(keep[i]) != math.Float32bits(want) {
					t.Errorf("%s: element %d outside every segment changed", name, gap+i)
				}
			}
			// The working copy is the master rounded (gap: never written).
			p, w := master.F32(), work.ToF32()
			for i := range p {
				want := tensor.Round(wdt, p[i])
				if in[i] && math.Float32bits(w[i]) != math.Float32bits(want) {
					t.Fatalf("%s: work[%d] = %v, want round(%v) = %v", name, i, w[i], p[i], want)
				}
				if !in[i] && !math.IsNaN(float64(w[i])) {
					t.Errorf("%s: work[%d] outside every segment was written", name, i)
				}
			}
		}
	}
}

// TestAdamWParity compares the two forms over a larger buffer of odd-sized
// segments, with and without a working copy.
func TestAdamWParity(t *testing.T) {
	l := &tensor.Layout{}
	for i, sz := range []int{768 * 65, 1, 768, 1000, 7, 50257, 3 * 768 * 17} {
		l.Add(fmt.Sprint("s", i), i%2 == 0, sz)
	}
	n := l.Total
	for _, wdt := range []tensor.DType{0, tensor.BF16, tensor.F32} {
		r := ntRNG(12)
		p0 := ntNormal(r, n, 0.2, 0)
		m0, v0 := ntNormal(r, n, 0.01, 0), ntNormal(r, n, 1e-3, 0)
		for i := range v0 {
			v0[i] = math.Abs(v0[i])
		}
		grads, _ := ntTensor(t, tensor.F32, ntNormal(r, n, 1, 0), n)
		hp := device.AdamW{LR: 6e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 7, GradScale: 0.25}
		var ps, ms, vs, ws [2]*tensor.Tensor
		for k, f := range ntForms {
			ps[k], _ = ntTensor(t, tensor.F32, p0, n)
			ms[k], _ = ntTensor(t, tensor.F32, m0, n)
			vs[k], _ = ntTensor(t, tensor.F32, v0, n)
			if wdt != 0 {
				ws[k] = tensor.New(wdt, n)
				ntPoison(ws[k])
			}
			d := ntDev(f.fused, 2)
			d.AdamWStep(ps[k], ws[k], grads, ms[k], vs[k], l, hp)
			ntSync(t, d)
		}
		// Same float32 steps in the same order: the F32 tolerance as is.
		ntCloseT(t, "master", ps[0], ps[1], tensor.F32, 1)
		ntCloseT(t, "m", ms[0], ms[1], tensor.F32, 1)
		ntCloseT(t, "v", vs[0], vs[1], tensor.F32, 1)
		if wdt != 0 {
			ntCloseT(t, "work", ws[0], ws[1], wdt, 1)
		}
	}
}

// BenchmarkAdamWFused and BenchmarkAdamWDecomposed time one step over 1M and
// 10M parameters laid out as GPT-2 blocks (decayed matrices, undecayed
// biases), without and with a bf16 working copy.
func BenchmarkAdamWFused(b *testing.B)      { ntBenchAdamW(b, true) }
func BenchmarkAdamWDecomposed(b *testing.B) { ntBenchAdamW(b, false) }

func ntBenchAdamW(b *testing.B, fused bool) {
	for _, n := range []int{1 << 20, 10 << 20} {
		for _, wdt := range []tensor.DType{0, tensor.BF16} {
			name := fmt.Sprintf("n%dM_work_none", n>>20)
			if wdt != 0 {
				name = fmt.Sprintf("n%dM_work_%s", n>>20, wdt)
			}
			b.Run(name, func(b *testing.B) {
				l := &tensor.Layout{}
				for i := 0; l.Total < n; i++ {
					sz := min(n-l.Total, 768*768)
					if i%2 == 1 {
						sz = min(sz, 768)
					}
					l.Add(fmt.Sprint("s", i), i%2 == 0, sz)
				}
				p, g, m, v := tensor.New(tensor.F32, n), tensor.New(tensor.F32, n), tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)
				gs := g.F32()
				for i := range gs {
					gs[i] = float32(i%7) - 3
				}
				var work *tensor.Tensor
				bytes := 7 * 4 * n // read p, g, m, v; write p, m, v
				if wdt != 0 {
					work = tensor.New(wdt, n)
					bytes += 2 * n
				}
				d := ntDev(fused, 0)
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				for i := range b.N {
					d.AdamWStep(p, work, g, m, v, l, device.AdamW{LR: 6e-4, Beta1: 0.9, Beta2: 0.95,
						Eps: 1e-8, WeightDecay: 0.1, Step: i + 1, GradScale: 0.5})
				}
				b.StopTimer()
				if err := d.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// TestAdamWBF16: with moments that start as bf16 values, AdamWBF16 gives
// AdamWStep's master weights and working copy bit for bit (the same fp32
// update), and stores each moment as one of the two bf16 neighbours of
// AdamWStep's fp32 moment; a gap is left alone; the step state's form with
// a non-finite step changes nothing.
func TestAdamWBF16(t *testing.T) {
	d := New(device.Options{Fused: true, Threads: 2})
	l, in, _ := ntAdamLayout()
	n := l.Total
	rng := tensor.NewRNG(5)
	p, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		p[i], g[i] = float32(rng.Norm()), float32(rng.Norm())
		m[i] = tensor.BF16ToF32(tensor.BF16FromF32(float32(rng.Norm() / 10)))
		v[i] = tensor.BF16ToF32(tensor.BF16FromF32(0.5 + rng.Float32()))
	}
	f32 := func(x []float32) *tensor.Tensor { t, _ := tensor.FromF32(append([]float32(nil), x...), n); return t }
	bf := func(x []float32) *tensor.Tensor { t := tensor.New(tensor.BF16, n); _ = t.SetF32(x); return t }
	hp := device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3, GradScale: 0.5, Seed: 11}
	p32, m32, v32, w32 := f32(p), f32(m), f32(v), tensor.New(tensor.BF16, n)
	d.AdamWStep(p32, w32, f32(g), m32, v32, l, hp)
	p16, m16, v16, w16 := f32(p), bf(m), bf(v), tensor.New(tensor.BF16, n)
	d.AdamWBF16(p16, w16, f32(g), m16, v16, l, hp, nil)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	neighbour := func(got uint16, want float32) bool {
		lo := math.Float32frombits(math.Float32bits(want) &^ 0xffff)
		return tensor.BF16ToF32(got) == lo || got == tensor.BF16FromF32(lo)+1
	}
	for i := range n {
		if p16.F32()[i] != p32.F32()[i] || w16.U16()[i] != w32.U16()[i] {
			t.Fatalf("element %d: master %v, work %#x; AdamWStep's %v, %#x", i, p16.F32()[i], w16.U16()[i], p32.F32()[i], w32.U16()[i])
		}
		mu, vu := m16.U16()[i], v16.U16()[i]
		if !in[i] {
			if tensor.BF16ToF32(mu) != m[i] || tensor.BF16ToF32(vu) != v[i] {
				t.Fatalf("gap element %d changed", i)
			}
			continue
		}
		if !neighbour(mu, m32.F32()[i]) || !neighbour(vu, v32.F32()[i]) {
			t.Fatalf("element %d: moments %v, %v are not bf16 neighbours of %v, %v", i,
				tensor.BF16ToF32(mu), tensor.BF16ToF32(vu), m32.F32()[i], v32.F32()[i])
		}
	}
	st := tensor.New(tensor.F32, device.StateLen) // SlotFinite 0: a skipped step
	before := append([]uint16(nil), m16.U16()...)
	d.AdamWBF16(p16, nil, f32(g), m16, v16, l, device.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, st)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, x := range before {
		if m16.U16()[i] != x {
			t.Fatalf("a skipped step changed m at %d", i)
		}
	}
}

// adamGoldenSum is the FNV-1a hash of the master, m and v bits after
// TestAdamWBF16Golden's step; kernels/emu/adamw/run.sh checks that
// adamw_bf16m, compiled for the host, gives the same.
const adamGoldenSum = 0xc62c9f580fa0441f

// TestAdamWBF16Golden: one AdamWBF16 step over inputs made of exact
// dyadic values (the same formula as kernels/emu/adamw/main.cpp: two
// segments, one decayed, a gap) hashes to adamGoldenSum, so the CUDA
// source and the CPU twin are held to the same bits without a GPU.
func TestAdamWBF16Golden(t *testing.T) {
	const n = 5000
	l := &tensor.Layout{Total: n, Segments: []tensor.Segment{
		{Name: "a", Offset: 0, Shape: tensor.Shape{3001}, Decay: true},
		{Name: "b", Offset: 3004, Shape: tensor.Shape{1996}},
	}}
	p, g, m, v := tensor.New(tensor.F32, n), tensor.New(tensor.F32, n), tensor.New(tensor.BF16, n), tensor.New(tensor.BF16, n)
	for i := range n {
		p.F32()[i] = float32((i*37)%201-100) / 128
		g.F32()[i] = float32((i*53)%157-78) / 64
		m.U16()[i] = tensor.BF16FromF32(float32((i*29)%101-50) / 1024)
		v.U16()[i] = tensor.BF16FromF32(float32((i*31)%89+1) / 256)
	}
	hp := device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3, GradScale: 0.5, Seed: 0x5eed42}
	d := New(device.Options{Fused: true, Threads: 2})
	d.AdamWBF16(p, nil, g, m, v, l, hp, nil)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	h := uint64(0xcbf29ce484222325)
	mix := func(x uint32) {
		for k := 0; k < 4; k++ {
			h = (h ^ uint64(x>>(8*k)&0xff)) * 0x100000001b3
		}
	}
	for i := range n {
		mix(math.Float32bits(p.F32()[i]))
		mix(uint32(m.U16()[i]))
		mix(uint32(v.U16()[i]))
	}
	c := hp.Consts()
	t.Logf("consts gs %#x decay %#x w1 %#x b2 %#x w2 %#x step %#x bc2 %#x eps %#x small %v", math.Float32bits(c.GS), math.Float32bits(c.Decay),
		math.Float32bits(c.W1), math.Float32bits(c.B2), math.Float32bits(c.W2), math.Float32bits(c.Step), math.Float32bits(c.BC2), math.Float32bits(c.Eps), c.Small)
	if h != adamGoldenSum {
		t.Errorf("hash %#x, want %#x (kernels/emu/adamw/run.sh holds the CUDA source to the same)", h, uint64(adamGoldenSum))
	}
}
