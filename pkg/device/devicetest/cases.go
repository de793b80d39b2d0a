package devicetest

// cases.go: the conformance cases, every op of device.Ops at each float
// dtype, at small shapes (detect runs them all): odd row counts, a channel
// count that is not a multiple of 4 beside one that is (the vectorised
// paths), mixed f32 residual streams, and head size 64 for attention (the
// flash kernels' size).

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// T is the tensor type of the ops.
type T = tensor.Tensor

// Cases returns every case, op by op, for f32, bf16 and f16.
func Cases() []Case {
	var out []Case
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		out = append(out, casesFor(dt)...)
	}
	return out
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
// undecayed vector and a gap left alone.
func layout() *tensor.Layout {
	l := &tensor.Layout{}
	l.Add("w", true, 37, 5)
	l.Add("b", false, 11)
	l.Total += 4
	return l
}

// state fills a step state as a training step leaves it before the update.
func state(t *T) {
	st := t.F32()
	clear(st)
	st[device.SlotScale], st[device.SlotGood], st[device.SlotOptSteps], st[device.SlotLR] = 1024, 2, 4, 1e-3
	device.StepScalars(st, 2.5, 40, stepCfg, hp) // finite: AdamWState updates
}

func casesFor(dt tensor.DType) []Case {
	o := &device.Ops
	F := tensor.F32
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
	// Row ops: N, C (one channel; past the fast backward's width too; 20000
	// narrow rows: more than every warp of a persistent grid holds in its
	// slots, the GPU's async layernorm kernels wrap them); on a 16-bit
	// device also with an f32 residual stream.
	for _, s := range [][]int{{17, 96}, {3, 37}, {5, 1}, {17, 1000}, {20000, 8}} {
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
	// Matmul: N, C, OC with each epilogue, with and without bias.
	for _, s := range [][]int{{34, 96, 40}, {5, 37, 11}} {
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
		add(Case{Name: name(&o.MatmulBackward, dt, s, ""), Contract: &o.MatmulBackward, DType: dt, Sizes: s,
			Call: none(func(d device.Device, t []*T) { d.MatmulBackward(t[0], t[1], t[2], t[3], t[4], t[5], N, C, OC) })})
		if dt != tensor.F32 {
			// The projections' form: dout is the fp32 residual gradient
			// (the GPU casts it and sums the bias in one pass).
			add(Case{Name: name(&o.MatmulBackward, dt, s, "f32 dout"), Contract: &o.MatmulBackward, DType: dt, Sizes: s,
				DTypes: map[int]tensor.DType{3: tensor.F32},
				Call:   none(func(d device.Device, t []*T) { d.MatmulBackward(t[0], t[1], t[2], t[3], t[4], t[5], N, C, OC) })})
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
		add(Case{Name: name(&o.MatmulBackwardGELU, dt, s, ""), Contract: &o.MatmulBackwardGELU, DType: dt, Sizes: s,
			Call: none(func(d device.Device, t []*T) {
				d.MatmulBackwardGELU(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C, OC)
			})})
	}
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
	// Cross-entropy: N, V, with and without the gradient.
	for _, s := range [][]int{{17, 50}, {4, 1003}} {
		N, V := s[0], s[1]
		for _, ds := range []float32{0.25, 0} {
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
	// AdamW: the working copy in dt (none too), the step state's form.
	l := layout()
	for _, work := range []bool{true, false} {
		note := "work " + dt.String()
		if !work {
			note = "no work"
		}
		s := []int{l.Total, hp.Step}
		add(Case{Name: name(&o.AdamWStep, dt, s[:1], note), Contract: &o.AdamWStep, DType: dt, Sizes: s, Omit: map[int]bool{1: !work},
			Call: none(func(d device.Device, t []*T) { d.AdamWStep(t[0], t[1], t[2], t[3], t[4], l, hp) })})
		add(Case{Name: name(&o.AdamWState, dt, s[:1], note), Contract: &o.AdamWState, DType: dt, Sizes: s[:1], Omit: map[int]bool{1: !work},
			Init: func(h []*T) { state(h[5]) },
			Call: func(d device.Device, t []*T) ([]float32, error) {
				st, err := stepper(d)
				if err == nil {
					st.AdamWState(t[0], t[1], t[2], t[3], t[4], l, hp, t[5])
				}
				return nil, err
			}})
	}
	// Cast between dt and f32 both ways (a plain copy when dt is f32).
	for _, n := range []int{1001, 4096} {
		s := []int{n}
		add(Case{Name: name(&o.Cast, dt, s, "from f32"), Contract: &o.Cast, DType: dt, Sizes: s, DTypes: map[int]tensor.DType{1: F},
			Call: none(func(d device.Device, t []*T) { d.Cast(t[0], t[1]) })})
		if dt != F {
			other := map[tensor.DType]tensor.DType{tensor.BF16: tensor.F16, tensor.F16: tensor.BF16}[dt]
			for _, to := range []tensor.DType{F, other} {
				add(Case{Name: name(&o.Cast, dt, s, "to "+to.String()), Contract: &o.Cast, DType: dt, Sizes: s, DTypes: map[int]tensor.DType{0: to},
					Call: none(func(d device.Device, t []*T) { d.Cast(t[0], t[1]) })})
			}
		}
	}
	if dt == F { // the gradient norm and the step update run on the fp32 gradients
		for _, n := range []int{1000, 70001} {
			s := []int{n}
			add(Case{Name: name(&o.GradNorm, dt, s, ""), Contract: &o.GradNorm, DType: dt, Sizes: s,
				Call: func(d device.Device, t []*T) ([]float32, error) {
					norm, finite := d.GradNorm(t[0], 0.5)
					return []float32{norm, b2f(finite)}, nil
				}})
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
	}
	return cs
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}
