package devicetest

// cases.go: the conformance cases, every op of device.Ops at each float
// dtype, at small shapes (Cases: detect runs them all): odd row counts, a
// channel count that is not a multiple of 4 beside one that is (the
// vectorised paths), mixed f32 residual streams, views off the vector
// alignment, in-place calls, head size 64 for attention (the flash
// kernels' size); and at the sizes of GPT-2 and past the kernels'
// persistent grids (Large: the GPU tests).

import (
	"fmt"
	"math"
	"reflect"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// T is the tensor type of the ops.
type T = tensor.Tensor

// shapes are the sizes of one set of cases, op family by op family.
type shapes struct {
	enc      bool    // the encoder's and attention's cases (Cases only)
	rows     [][]int // N, C: the row ops, Add and GELUBackward over N·C
	gelu     []int   // GELUBackward, also in place
	ew       []int   // Add and Cast, also one element into their buffers
	mm       [][]int // N, C, OC: the matmuls
	ce       [][]int // N, V
	norm     []int   // GradNorm and StepUpdate
	adam     *tensor.Layout
	specials bool // the cases of particular inputs (Cases only)
}

// small: every row width the fixed-width layernorm kernels take (128 to
// 1024) once beside the widths of the run-time-C paths.
var small = shapes{enc: true, rows: [][]int{{17, 96}, {3, 37}, {5, 1}, {17, 1000}, {1, 1}, {9, 128}, {5, 256}, {3, 512}, {2, 768}, {2, 1024}}, gelu: []int{4099},
	ew: []int{1, 1001, 4099}, mm: [][]int{{34, 96, 40}, {5, 37, 11}, {1, 1, 1}, {16, 64, 24}, {64, 128, 72}},
	ce: [][]int{{17, 50}, {4, 1003}, {1, 1}, {3, 8}, {33, 257}, {5, 4100}}, norm: []int{1, 17, 1000, 4096, 4097, 70001},
	adam: layout(), specials: true}

// large: GPT-2's rows (768, 1024: the widest of the fast paths; 1028 just
// over; 1601 past the register limit) and more rows than the backward's
// persistent grid holds warps (4099, 8192, 20000); 3·2^20 and 8·2^20 + 5
// elements (several vectors a thread of gelu_backward2's grid, a 5-element
// tail); GPT-2's matmuls; its vocabulary (fp32 rows longer than the
// register cache) and more rows than crossentropy_fused_l3's grid (280,
// 300), a row ending one vector into a group of its loads (4100 = 512·8 +
// 4); gradnorm_partial2's chunks of 4096 (a partial last one) and 9·2^20;
// AdamW segments over several chunks at odd offsets.
var large = shapes{rows: [][]int{{1, 768}, {3, 1024}, {7, 1028}, {64, 3}, {1024, 768}, {5, 1601}, {4099, 772}, {8192, 768}, {20000, 768}},
	gelu: []int{3 << 20, 8<<20 + 5}, ew: []int{1 << 20, 1<<20 + 1},
	mm: [][]int{{17, 1000, 17}, {1024, 768, 3072}, {33, 768, 1000}, {1024, 3072, 768}, {33, 1000, 768}, {16, 768, 2304}, {64, 3072, 768}, {64, 768, 3072}},
	ce: [][]int{{17, 1000}, {64, 50304}, {280, 4104}, {300, 1003}, {300, 50304}}, norm: []int{30*4096 + 5, 1<<20 + 3, 9 << 20},
	adam: bigLayout()}

// Cases returns every case, op by op, for f32, bf16 and f16.
func Cases() []Case { return set(small) }

// Large returns the cases at large sizes (seconds of CPU reference time),
// which the GPU tests run beside Cases.
func Large() []Case { return set(large) }

func set(sh shapes) []Case {
	var out []Case
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		out = append(out, casesFor(dt, sh)...)
	}
	if sh.enc { // after the others: their seeds (case indexes) stay as they were
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			out = append(out, decodeCases(dt)...)
		}
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} { // last, for the same reason
		out = append(out, optionalCases(dt, sh)...)
	}
	if sh.enc { // after all of them, for the same reason
		out = append(out, derived()...)
	}
	return out
}

// derived are the cases of the ops whose descriptor has Shapes, at every
// float dtype: the method named by the contract called with the case's
// tensors, then its sizes.
func derived() []Case {
	var cs []Case
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, c := range device.Contracts() {
			for _, s := range c.Shapes {
				cs = append(cs, Case{Name: name(c, dt, s, ""), Contract: c, DType: dt, Sizes: s, Call: byName(c, s)})
			}
		}
	}
	return cs
}

// byName calls the method c.Op of a device by reflection: the tensors in
// Params order, then the sizes s converted to its parameter types. A
// device without the method reports it unsupported.
func byName(c *device.Contract, s []int) func(device.Device, []*T) ([]float32, error) {
	return func(d device.Device, ts []*T) ([]float32, error) {
		m := reflect.ValueOf(d).MethodByName(c.Op)
		if !m.IsValid() {
			return nil, fmt.Errorf("%s has no method %s: %w", d.Name(), c.Op, device.ErrUnsupported)
		}
		f := m.Type()
		if f.NumIn() != len(ts)+len(s) {
			return nil, fmt.Errorf("devicetest: %s takes %d arguments, the contract %d tensors and %d sizes", c.Op, f.NumIn(), len(ts), len(s))
		}
		in := make([]reflect.Value, 0, f.NumIn())
		for _, t := range ts {
			in = append(in, reflect.ValueOf(t))
		}
		for i, v := range s {
			in = append(in, reflect.ValueOf(v).Convert(f.In(len(ts)+i)))
		}
		m.Call(in)
		return nil, nil
	}
}

// Decomposed returns c with its op run as the descriptor's decomposed
// composition (device.Contract.Decomposed) and true, or false when the op
// has none: run against the op on the reference, it checks that the
// composition both backends call computes the op.
func Decomposed(c Case) (Case, bool) {
	dec := c.Contract.Decomposed
	if dec == nil {
		return c, false
	}
	c.Name += " decomposed"
	c.Call = func(d device.Device, ts []*T) ([]float32, error) {
		dec(d, c.Sizes, ts)
		return nil, nil
	}
	return c, true
}

// optionalCases are the cases of the optional interfaces' ops: GELUer's
// GELU (into out and in place) over the GELUBackward sizes, and
// MomentsBF16's AdamWBF16 in both its forms (hp's step, and the step
// state's), with the working copy in dt and without.
func optionalCases(dt tensor.DType, sh shapes) []Case {
	var cs []Case
	for _, n := range sh.gelu {
		s := []int{n}
		for _, in := range []bool{false, true} {
			c := Case{Name: name(&device.GELUForward, dt, s, ""), Contract: &device.GELUForward, DType: dt, Sizes: s, Offset: n == 4099,
				Call: func(d device.Device, t []*T) ([]float32, error) {
					g, ok := d.(device.GELUer)
					if !ok {
						return nil, fmt.Errorf("%s is not a device.GELUer: %w", d.Name(), device.ErrUnsupported)
					}
					g.GELU(t[0], t[1], n)
					return nil, nil
				}}
			if in {
				c.Name, c.Alias = c.Name+" in place", map[int]int{0: 1}
			}
			cs = append(cs, c)
		}
	}
	l := sh.adam
	if l == nil {
		return cs
	}
	bf := map[int]tensor.DType{3: tensor.BF16, 4: tensor.BF16}
	for _, work := range []bool{true, false} {
		note := map[bool]string{true: "work " + dt.String(), false: "no work"}[work]
		for _, withState := range []bool{false, true} {
			h := hp
			h.Seed = 0x5eed42
			s := []int{l.Total, h.Step}
			c := Case{Name: name(&device.AdamWBF16, dt, s, note), Contract: &device.AdamWBF16, DType: dt, Sizes: s, DTypes: bf,
				Omit: map[int]bool{1: !work, 5: true}}
			if withState {
				h.Step = 0 // the state's count
				c.Name, c.Sizes, c.Omit = name(&device.AdamWBF16, dt, []int{l.Total, 0}, note+" step state"), []int{l.Total, 0}, map[int]bool{1: !work}
				c.Init = func(t []*T) { state(t[5]) }
			}
			c.Call = func(d device.Device, t []*T) ([]float32, error) {
				mb, ok := d.(device.MomentsBF16)
				if !ok {
					return nil, fmt.Errorf("%s is not a device.MomentsBF16: %w", d.Name(), device.ErrUnsupported)
				}
				mb.AdamWBF16(t[0], t[1], t[2], t[3], t[4], l, h, t[5])
				return nil, nil
			}
			cs = append(cs, c)
		}
	}
	return cs
}

func name(c *device.Contract, dt tensor.DType, s []int, note string) string {
	n := fmt.Sprintf("%s %s %v", c.Op, dt, s)
	if note != "" {
		n += " " + note
	}
	return n
}

func storer(d device.Device) (device.GradStorer, error) {
	s, ok := d.(device.GradStorer)
	if !ok {
		return nil, fmt.Errorf("%s is not a device.GradStorer: %w", d.Name(), device.ErrUnsupported)
	}
	return s, nil
}

func stepper(d device.Device) (device.Stepper, error) {
	s, ok := d.(device.Stepper)
	if !ok {
		return nil, fmt.Errorf("%s is not a device.Stepper: %w", d.Name(), device.ErrUnsupported)
	}
	return s, nil
}

// The AdamW settings and step configuration of the cases.
var (
	hp      = device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3, GradScale: 0.5}
	stepCfg = device.StepConfig{Scaler: true, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, ClipNorm: 1}
)

// layout is AdamW's parameter layout of the cases: a decayed matrix, an
// undecayed vector and a gap left alone (the work copy keeps its poison).
func layout() *tensor.Layout {
	l := &tensor.Layout{}
	l.Add("w", true, 37, 5)
	l.Add("b", false, 11)
	l.Total += 4
	return l
}

// bigLayout has segments of odd sizes and offsets (chunks start off the
// 4-element alignment), one over several chunks, and a gap.
func bigLayout() *tensor.Layout {
	l := &tensor.Layout{}
	l.Add("a", true, 1)
	l.Add("b", false, 17)
	l.Add("c", true, 768, 3)
	l.Add("d", false, 1000)
	l.Add("e", true, 3*768, 768)
	l.Total += 5
	l.Add("f", false, 5)
	return l
}

// state fills a step state as a training step leaves it before the update.
func state(t *T) {
	st := t.F32()
	clear(st)
	st[device.SlotScale], st[device.SlotGood], st[device.SlotOptSteps], st[device.SlotLR] = 1024, 2, 4, 1e-3
	device.StepScalars(st, 2.5, 40, stepCfg, hp) // finite: AdamWState updates
}

func casesFor(dt tensor.DType, sh shapes) []Case {
	o := &device.Ops
	F := tensor.F32
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }
	none := func(f func(d device.Device, t []*T)) func(device.Device, []*T) ([]float32, error) {
		return func(d device.Device, t []*T) ([]float32, error) { f(d, t); return nil, nil }
	}
	if sh.enc {
		cs = append(cs, encAttnCases(dt)...)
	}
	// Row ops: N, C (one channel; past the fast backward's width too); on a
	// 16-bit device also with an f32 residual stream.
	for _, s := range sh.rows {
		N, C := s[0], s[1]
		for _, mixed := range []bool{false, true} {
			if mixed && dt == F {
				continue
			}
			note, ln, res, add2, bwd := "", map[int]tensor.DType(nil), map[int]tensor.DType(nil), map[int]tensor.DType(nil), map[int]tensor.DType(nil)
			if mixed {
				note = "f32 residual"
				ln, res, add2, bwd = map[int]tensor.DType{3: F}, map[int]tensor.DType{0: F, 4: F}, map[int]tensor.DType{0: F, 1: F}, map[int]tensor.DType{0: F, 4: F}
			}
			add(Case{Name: name(&o.LayerNorm, dt, s, note), Contract: &o.LayerNorm, DType: dt, Sizes: s, DTypes: ln,
				Call: none(func(d device.Device, t []*T) { d.LayerNorm(t[0], t[1], t[2], t[3], t[4], t[5], N, C) })})
			add(Case{Name: name(&o.ResidualLayerNorm, dt, s, note), Contract: &o.ResidualLayerNorm, DType: dt, Sizes: s, DTypes: res,
				Call: none(func(d device.Device, t []*T) {
					d.ResidualLayerNorm(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C)
				})})
			add(Case{Name: name(&o.LayerNormBackward, dt, s, note), Contract: &o.LayerNormBackward, DType: dt, Sizes: s, DTypes: bwd,
				Init: lnStats, Same: true,
				Call: none(func(d device.Device, t []*T) {
					d.LayerNormBackward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C)
				})})
			n := []int{N * C}
			add(Case{Name: name(&o.Add, dt, n, note), Contract: &o.Add, DType: dt, Sizes: n, DTypes: add2,
				Call: none(func(d device.Device, t []*T) { d.Add(t[0], t[1], t[2], n[0]) })})
		}
		n := []int{N * C}
		add(Case{Name: name(&o.GELUBackward, dt, n, ""), Contract: &o.GELUBackward, DType: dt, Sizes: n,
			Call: none(func(d device.Device, t []*T) { d.GELUBackward(t[0], t[1], t[2], n[0]) })})
	}
	// GELUBackward into dinp and in place (dinp = dout, as the model calls
	// it), one element into its buffers at 4099 (the scalar path); Add and
	// Cast one element in too.
	for _, n := range sh.gelu {
		s := []int{n}
		for _, in := range []bool{false, true} {
			c := Case{Name: name(&o.GELUBackward, dt, s, ""), Contract: &o.GELUBackward, DType: dt, Sizes: s, Offset: n == 4099,
				Call: none(func(d device.Device, t []*T) { d.GELUBackward(t[0], t[1], t[2], n) })}
			if in {
				c.Name, c.Alias = c.Name+" in place", map[int]int{0: 2}
			}
			add(c)
		}
	}
	for _, n := range sh.ew {
		s := []int{n}
		for _, mixed := range []bool{false, true} {
			for _, off := range []bool{false, true} {
				if !mixed || dt != F {
					dts := map[bool]map[int]tensor.DType{true: {0: F, 1: F}}[mixed]
					add(Case{Name: name(&o.Add, dt, s, map[bool]string{true: "f32 residual"}[mixed]+map[bool]string{true: " offset"}[off]), Contract: &o.Add,
						DType: dt, Sizes: s, DTypes: dts, Offset: off, Call: none(func(d device.Device, t []*T) { d.Add(t[0], t[1], t[2], n) })})
				}
			}
		}
		// Cast between every pair of float dtypes (a plain copy within one).
		for _, to := range []tensor.DType{F, tensor.BF16, tensor.F16} {
			for _, off := range []bool{false, true} {
				add(Case{Name: name(&o.Cast, dt, s, "to "+to.String()+map[bool]string{true: " offset"}[off]), Contract: &o.Cast, DType: dt, Sizes: s,
					DTypes: map[int]tensor.DType{0: to}, Offset: off,
					Call: none(func(d device.Device, t []*T) { d.Cast(t[0], t[1]) })})
			}
		}
	}
	// Matmul: N, C, OC with each epilogue, with and without bias.
	for _, s := range sh.mm {
		N, C, OC := s[0], s[1], s[2]
		for _, act := range []device.Activation{device.None, device.GELU} {
			for _, bias := range []bool{true, false} {
				omit := map[int]bool{1: act == device.None, 4: !bias}
				note := map[device.Activation]string{device.None: "", device.GELU: "gelu"}[act]
				if !bias {
					note += " no bias"
				}
				sz := []int{N, C, OC, int(act)}
				add(Case{Name: name(&o.Matmul, dt, s, note), Contract: &o.Matmul, DType: dt, Sizes: sz, Omit: omit,
					Call: none(func(d device.Device, t []*T) { d.Matmul(t[0], t[1], t[2], t[3], t[4], N, C, OC, act) })})
			}
		}
		douts := []tensor.DType{dt}
		if dt != F {
			// The projections' form: dout is the fp32 residual gradient
			// (the GPU casts it and sums the bias in one pass).
			douts = append(douts, F)
		}
		for _, ddt := range douts {
			note, dts := "", map[int]tensor.DType{3: ddt}
			if ddt != dt {
				note = "f32 dout"
			}
			add(Case{Name: name(&o.MatmulBackward, dt, s, note), Contract: &o.MatmulBackward, DType: dt, Sizes: s, DTypes: dts,
				Call: none(func(d device.Device, t []*T) { d.MatmulBackward(t[0], t[1], t[2], t[3], t[4], t[5], N, C, OC) })})
			add(Case{Name: name(&o.MatmulBackwardGELU, dt, s, note), Contract: &o.MatmulBackwardGELU, DType: dt, Sizes: s,
				DTypes: map[int]tensor.DType{4: ddt},
				Call: none(func(d device.Device, t []*T) {
					d.MatmulBackwardGELU(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C, OC)
				})})
		}
		add(Case{Name: name(&o.MatmulBackward, dt, s, "no dinp, no dbias"), Contract: &o.MatmulBackward, DType: dt, Sizes: s,
			Omit: map[int]bool{0: true, 2: true},
			Call: none(func(d device.Device, t []*T) { d.MatmulBackward(nil, t[1], nil, t[3], t[4], t[5], N, C, OC) })})
		add(Case{Name: name(&o.MatmulBackwardStore, dt, s, ""), Contract: &o.MatmulBackwardStore, DType: dt, Sizes: s,
			Call: func(d device.Device, t []*T) ([]float32, error) {
				st, err := storer(d)
				if err == nil {
					st.MatmulBackwardStore(t[0], t[1], t[2], t[3], t[4], t[5], N, C, OC)
				}
				return nil, err
			}})
	}
	// Cross-entropy: N, V, with and without the gradient.
	for _, s := range sh.ce {
		N, V := s[0], s[1]
		for _, ds := range []float32{1 / float32(N), 0} {
			note := "loss and gradient"
			if ds == 0 {
				note = "loss only"
			}
			add(Case{Name: name(&o.CrossEntropy, dt, s, note), Contract: &o.CrossEntropy, DType: dt, Sizes: s,
				Call: none(func(d device.Device, t []*T) { d.CrossEntropy(t[0], t[1], t[2], N, V, ds) })})
		}
		add(Case{Name: name(&o.CrossEntropyScaled, dt, s, ""), Contract: &o.CrossEntropyScaled, DType: dt, Sizes: s,
			Init: func(h []*T) { state(h[3]) },
			Call: func(d device.Device, t []*T) ([]float32, error) {
				st, err := stepper(d)
				if err == nil {
					st.CrossEntropyScaled(t[0], t[1], t[2], t[3], N, V, 1/float32(N*1024))
				}
				return nil, err
			}})
	}
	// AdamW: the working copy in dt (none too), the step state's form; a
	// gradient scale and none at a late step.
	if l := sh.adam; l != nil {
		for _, work := range []bool{true, false} {
			note := "work " + dt.String()
			if !work {
				note = "no work"
			}
			for _, hp := range []device.AdamW{hp, {LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 4321}} {
				s := []int{l.Total, hp.Step}
				add(Case{Name: name(&o.AdamWStep, dt, s, note), Contract: &o.AdamWStep, DType: dt, Sizes: s, Omit: map[int]bool{1: !work},
					Call: none(func(d device.Device, t []*T) { d.AdamWStep(t[0], t[1], t[2], t[3], t[4], l, hp) })})
			}
			add(Case{Name: name(&o.AdamWState, dt, []int{l.Total}, note), Contract: &o.AdamWState, DType: dt, Sizes: []int{l.Total}, Omit: map[int]bool{1: !work},
				Init: func(h []*T) { state(h[5]) },
				Call: func(d device.Device, t []*T) ([]float32, error) {
					st, err := stepper(d)
					if err == nil {
						st.AdamWState(t[0], t[1], t[2], t[3], t[4], l, hp, t[5])
					}
					return nil, err
				}})
		}
	}
	if dt != F { // the gradient norm and the step update run on the fp32 gradients
		return cs
	}
	for _, n := range sh.norm {
		s := []int{n}
		for _, scale := range []float32{1, 1.0 / 1024, -0.5} {
			add(Case{Name: name(&o.GradNorm, dt, s, fmt.Sprint("scale ", scale)), Contract: &o.GradNorm, DType: dt, Sizes: s,
				Offset: n == 4097, Same: true, Call: gradNorm(scale)})
		}
		sz := []int{17, n}
		add(Case{Name: name(&o.StepUpdate, dt, sz, ""), Contract: &o.StepUpdate, DType: dt, Sizes: sz,
			Init: func(h []*T) { state(h[0]) },
			Call: func(d device.Device, t []*T) ([]float32, error) {
				st, err := stepper(d)
				if err == nil {
					st.StepUpdate(t[0], t[1], t[2], stepCfg, hp)
				}
				return nil, err
			}})
	}
	if sh.specials {
		cs = append(cs, specials()...)
	}
	return cs
}

func gradNorm(scale float32) func(d device.Device, t []*T) ([]float32, error) {
	return func(d device.Device, t []*T) ([]float32, error) {
		norm, finite := d.GradNorm(t[0], scale)
		return []float32{norm, b2f(finite)}, nil
	}
}

// lnStats sets LayerNormBackward's mean and rstd to inp's, as the forward
// leaves them.
func lnStats(h []*T) {
	C := h[5].Numel()
	x, mean, rstd := h[4].ToF32(), h[6].F32(), h[7].F32()
	for r := range mean {
		var m, v float64
		for _, a := range x[r*C : (r+1)*C] {
			m += float64(a) / float64(C)
		}
		for _, a := range x[r*C : (r+1)*C] {
			v += (float64(a) - m) * (float64(a) - m) / float64(C)
		}
		mean[r], rstd[r] = float32(m), float32(1/math.Sqrt(v+1e-5))
	}
}

// specials are the cases of particular inputs, f32 and 16-bit: a gradient
// norm over an Inf, a -Inf or a NaN (reported, as the CPU reports it);
// cross-entropy with a target logit 200 below its row's max (a finite
// loss: log(sum) - (x[t] - max), never -log of a probability that
// underflows to 0), and with masked (-inf) logits, also where every logit
// one thread of crossentropy_fused_l3 reads first is -inf (exp(-inf -
// -inf) must not make the sum NaN): nothing added to the softmax, a zero
// gradient.
func specials() []Case {
	o := &device.Ops
	var cs []Case
	for _, bad := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		s := []int{5000}
		cs = append(cs, Case{Name: name(&o.GradNorm, tensor.F32, s, fmt.Sprint("with ", bad)), Contract: &o.GradNorm, DType: tensor.F32, Sizes: s,
			Init: func(h []*T) { h[0].F32()[4321] = float32(bad) }, Call: gradNorm(1)})
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, far := range []bool{true, false} {
			N, V, note := 3, 4104, "masked"
			if far {
				N, V, note = 4, 1000, "far target"
			}
			cs = append(cs, Case{Name: name(&o.CrossEntropy, dt, []int{N, V}, note), Contract: &o.CrossEntropy, DType: dt, Sizes: []int{N, V}, Finite: true,
				Init: func(h []*T) {
					v := h[1].ToF32()
					for i := range N {
						if far {
							v[i*V+3], v[i*V+500+i], h[2].I32()[i] = 100, -100, int32(500+i)
							continue
						}
						h[2].I32()[i] = int32(100 + 37*i)
						for j := range V {
							if j%2048 < 8 || j >= 4096 {
								v[i*V+j] = float32(math.Inf(-1))
							}
						}
					}
					_ = h[1].SetF32(v)
				},
				Call: func(d device.Device, t []*T) ([]float32, error) {
					d.CrossEntropy(t[0], t[1], t[2], N, V, 1/float32(N))
					return nil, nil
				}})
		}
	}
	return cs
}

// encAttnCases are the encoder's and attention's cases.
func encAttnCases(dt tensor.DType) []Case {
	o := &device.Ops
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }
	none := func(f func(d device.Device, t []*T)) func(device.Device, []*T) ([]float32, error) {
		return func(d device.Device, t []*T) ([]float32, error) { f(d, t); return nil, nil }
	}
	// Encoder: B, T, C; V = 50 token rows, T+3 position rows.
	for _, s := range [][]int{{2, 17, 96}, {1, 5, 37}, {4, 100, 8}} {
		tables := map[int]int{1: 50 * s[2], 2: (s[1] + 3) * s[2]}
		add(Case{Name: name(&o.Encoder, dt, s, ""), Contract: &o.Encoder, DType: dt, Sizes: s, Numel: tables,
			Call: none(func(d device.Device, t []*T) { d.Encoder(t[0], t[1], t[2], t[3], s[0], s[1], s[2]) })})
		add(Case{Name: name(&o.EncoderBackward, dt, s, ""), Contract: &o.EncoderBackward, DType: dt, Sizes: s,
			Numel: map[int]int{0: 50 * s[2], 1: (s[1] + 3) * s[2]},
			Call:  none(func(d device.Device, t []*T) { d.EncoderBackward(t[0], t[1], t[2], t[3], s[0], s[1], s[2]) })})
	}
	// EncoderBackward on skewed tokens (as text is): a third of the 1024
	// positions one id, the rest 40 ids, in a vocabulary of 300 (two sort
	// passes): the frequent id's run crosses many segments.
	sk := []int{8, 128, 24}
	add(Case{Name: name(&o.EncoderBackward, dt, sk, "skewed"), Contract: &o.EncoderBackward, DType: dt, Sizes: sk,
		Numel: map[int]int{0: 300 * sk[2], 1: (sk[1] + 3) * sk[2]},
		Init: func(host []*T) {
			for i, v := range host[3].I32() {
				if i%3 == 0 {
					v = 257
				} else {
					v %= 40
				}
				host[3].I32()[i] = v
			}
		},
		Call: none(func(d device.Device, t []*T) { d.EncoderBackward(t[0], t[1], t[2], t[3], sk[0], sk[1], sk[2]) })})
	// Attention: B, T, C, NH at head sizes 64, 32 and 128 (the flash
	// kernels') and 24 (the cuBLAS path in every form).
	for _, s := range [][]int{{2, 17, 128, 2}, {1, 9, 64, 2}, {1, 9, 128, 1}, {1, 9, 48, 2}} {
		B, Tn, C, NH := s[0], s[1], s[2], s[3]
		add(Case{Name: name(&o.Attention, dt, s, ""), Contract: &o.Attention, DType: dt, Sizes: s,
			Call: none(func(d device.Device, t []*T) { d.Attention(t[0], t[1], t[2], B, Tn, C, NH) })})
		add(Case{Name: name(&o.AttentionBackward, dt, s, ""), Contract: &o.AttentionBackward, DType: dt, Sizes: s,
			Call: none(func(d device.Device, t []*T) {
				d.Attention(t[3], t[4], t[2], B, Tn, C, NH) // out and the state this device saves
				d.AttentionBackward(t[0], t[1], t[2], t[3], t[4], B, Tn, C, NH)
			})})
		add(Case{Name: name(&o.AttentionBackwardStore, dt, s, ""), Contract: &o.AttentionBackwardStore, DType: dt, Sizes: s,
			Call: func(d device.Device, t []*T) ([]float32, error) {
				st, err := storer(d)
				if err == nil {
					d.Attention(t[3], t[4], t[2], B, Tn, C, NH)
					st.AttentionBackwardStore(t[0], t[1], t[2], t[3], t[4], B, Tn, C, NH)
				}
				return nil, err
			}})
	}
	return cs
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// decodeCases are the decode ops' (device.Decoder) cases: the encoder at
// positions into the fp32 residual stream, the cache append of one token
// and of a prompt, and one query row's attention against caches of 300
// positions (two of attention_decode's chunks) at head sizes 64 and 24,
// with the lengths drawn anywhere in the cache. A device without the ops
// reports them unsupported.
func decodeCases(dt tensor.DType) []Case {
	o := &device.DecodeOps
	o2 := o
	var cs []Case
	dec := func(d device.Device) (device.Decoder, error) {
		x, ok := d.(device.Decoder)
		if !ok {
			return nil, fmt.Errorf("%s is not a device.Decoder: %w", d.Name(), device.ErrUnsupported)
		}
		return x, nil
	}
	for _, s := range [][]int{{3, 96}, {1, 37}} {
		N, C := s[0], s[1]
		cs = append(cs, Case{Name: name(&o.EncoderAt, dt, s, ""), Contract: &o.EncoderAt, DType: dt, Sizes: s,
			DTypes: map[int]tensor.DType{0: tensor.F32}, Numel: map[int]int{1: 50 * C, 2: 20 * C},
			Call: func(d device.Device, t []*T) ([]float32, error) {
				x, err := dec(d)
				if err == nil {
					x.EncoderAt(t[0], t[1], t[2], t[3], t[4], N, C)
				}
				return nil, err
			}})
	}
	for _, s := range [][]int{{3, 1, 96, 2, 9}, {1, 7, 48, 2, 7}} {
		B, Tn, C, NH, S := s[0], s[1], s[2], s[3], s[4]
		cs = append(cs, Case{Name: name(&o.KVAppend, dt, s, ""), Contract: &o.KVAppend, DType: dt, Sizes: s,
			Call: func(d device.Device, t []*T) ([]float32, error) {
				x, err := dec(d)
				if err == nil {
					x.KVAppend(t[0], t[1], t[2], t[3], B, Tn, C, NH, S)
				}
				return nil, err
			}})
	}
	// {66, 512, 8, 80}: 528 pairs, so one block a pair on up to 132 SMs
	// (the GPU's dec_attend_rows, its positions in two steps or more).
	for _, s := range [][]int{{3, 128, 2, 300}, {2, 48, 2, 5}, {1, 64, 1, 1}, {66, 512, 8, 80}} {
		B, C, NH, S := s[0], s[1], s[2], s[3]
		cs = append(cs, Case{Name: name(&o.AttentionDecode, dt, s, ""), Contract: &o.AttentionDecode, DType: dt, Sizes: s,
			Call: func(d device.Device, t []*T) ([]float32, error) {
				x, err := dec(d)
				if err == nil {
					x.AttentionDecode(t[0], t[1], t[2], t[3], t[4], B, C, NH, S)
				}
				return nil, err
			}})
	}
	// SampleHead: greedy and drawn (top-k and top-p) over V 300 at C 64,
	// from tables and row states of valid entries (the ids' next states).
	for _, o := range []device.Sampling{{}, {Temperature: 0.8, TopK: 40, TopP: 0.9}} {
		s := []int{3, 64, 300, 2}
		note := "greedy"
		if o.Temperature > 0 {
			note = "drawn"
		}
		cs = append(cs, Case{Name: name(&o2.SampleHead, dt, s, note), Contract: &o2.SampleHead, DType: dt, Sizes: s,
			Call: func(d device.Device, t []*T) ([]float32, error) {
				x, err := dec(d)
				if err == nil {
					x.SampleHead(t[0], t[1], t[2], t[3], t[4], t[5], s[0], s[1], s[2], s[3], o)
				}
				return nil, err
			}})
	}
	return cs
}
