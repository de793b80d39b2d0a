package device

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestContractCheck: each kind of broken argument is an error naming the
// op and the argument, wrapping ErrShape for sizes and counts and
// ErrUnsupported for dtypes and activations; good arguments pass.
func TestContractCheck(t *testing.T) {
	f := func(n ...int) *T { return tensor.New(tensor.F32, n...) }
	x, w, out := f(4, 3), f(5, 3), f(4, 5)
	m, s := f(4), f(4)
	qkv, aout := f(1, 4, 12), f(1, 4, 4)
	cases := []struct {
		name string
		err  error
		is   error
		want string
	}{
		{"matmul ok", Ops.Matmul.Check([]int{4, 3, 5, int(None)}, out, nil, x, w, nil), nil, ""},
		{"short out", Ops.Matmul.Check([]int{4, 3, 5, int(None)}, f(4, 4), nil, x, w, nil), tensor.ErrShape, "Matmul: out"},
		{"gelu without pre", Ops.Matmul.Check([]int{4, 3, 5, int(GELU)}, out, nil, x, w, nil), nil, "GELU needs pre"},
		{"pre without gelu", Ops.Matmul.Check([]int{4, 3, 5, int(None)}, out, f(4, 5), x, w, nil), nil, "pre must be nil"},
		{"unknown act", Ops.Matmul.Check([]int{4, 3, 5, 9}, out, nil, x, w, nil), ErrUnsupported, "activation 9"},
		{"short bias", Ops.Matmul.Check([]int{4, 3, 5, int(None)}, out, nil, x, w, f(4)), tensor.ErrShape, "bias"},
		{"int weight", Ops.Matmul.Check([]int{4, 3, 5, int(None)}, out, nil, x, tensor.New(tensor.I32, 5, 3), nil), ErrUnsupported, "weight is i32"},
		{"C = 0", Ops.Matmul.Check([]int{4, 0, 5, int(None)}, f(4, 5), nil, f(0), f(0), nil), tensor.ErrShape, "C=0"},
		{"negative N", Ops.LayerNorm.Check([]int{-1, 3}, x, m, s, x, f(3), f(3)), tensor.ErrShape, "N=-1"},
		{"nil dweight", Ops.MatmulBackward.Check([]int{4, 3, 5}, nil, nil, nil, out, x, w), tensor.ErrShape, "dweight is nil"},
		{"short dinp", Ops.MatmulBackward.Check([]int{4, 3, 5}, f(3), f(5, 3), nil, out, x, w), tensor.ErrShape, "dinp"},
		{"wrong out size", Ops.LayerNorm.Check([]int{4, 3}, f(4, 4), m, s, x, f(3), f(3)), tensor.ErrShape, "out"},
		{"bf16 mean", Ops.LayerNorm.Check([]int{4, 3}, x, tensor.New(tensor.BF16, 4), s, x, f(3), f(3)), ErrUnsupported, "mean is bf16"},
		{"nil add input", Ops.Add.Check([]int{12}, x, x, nil), tensor.ErrShape, "b is nil"},
		{"C % NH", Ops.Attention.Check([]int{1, 4, 4, 3}, aout, f(1), qkv), tensor.ErrShape, "not a multiple of NH"},
		{"short dqkv", Ops.AttentionBackward.Check([]int{1, 4, 4, 2}, f(5), aout, qkv, nil, f(2)), tensor.ErrShape, "dqkv"},
		{"i32 grads", Ops.GradNorm.Check([]int{4}, tensor.New(tensor.I32, 4)), ErrUnsupported, "grads is i32"},
		{"token table rows", Ops.Encoder.Check([]int{1, 2, 3}, f(6), f(7), f(9), tensor.New(tensor.I32, 2)), tensor.ErrShape, "token table"},
		{"position rows < T", Ops.Encoder.Check([]int{1, 4, 3}, f(12), f(9), f(9), tensor.New(tensor.I32, 4)), tensor.ErrShape, "position table"},
		{"short state", Ops.StepUpdate.Check([]int{2, 3}, f(StateLen-1), f(2), f(3)), tensor.ErrShape, "state"},
		{"sizes count", Ops.Add.Check([]int{1, 2}, x, x, x), nil, "2 sizes"},
	}
	for _, c := range cases {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: %v", c.name, c.err)
		case c.want != "" && (c.err == nil || !strings.Contains(c.err.Error(), c.want)):
			t.Errorf("%s: %v, want an error containing %q", c.name, c.err, c.want)
		case c.is != nil && !errors.Is(c.err, c.is):
			t.Errorf("%s: %v does not wrap %v", c.name, c.err, c.is)
		}
	}
}

// TestClassFixed: F32, I32 and BF16 each fix the one dtype they admit;
// Float and Wide admit every float dtype and fix none.
func TestClassFixed(t *testing.T) {
	dts := []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, tensor.I32}
	for _, c := range []Class{Float, Wide, F32, I32, BF16} {
		f, fixed := c.Fixed()
		n := 0
		for _, dt := range dts {
			if c.Has(dt) {
				n++
				if fixed && dt != f {
					t.Errorf("%s: fixes %s but has %s", c, f, dt)
				}
			}
		}
		if fixed != (n == 1) || (!fixed && n != 3) {
			t.Errorf("%s: fixed %v (%s), has %d of %v", c, fixed, f, n, dts)
		}
	}
}

// TestAdamWArgs: bad steps and layouts are errors; a good layout gives its
// segments sorted by offset, empty ones left out, and the contract's sizes.
func TestAdamWArgs(t *testing.T) {
	const n = 10
	good := &tensor.Layout{}
	good.Add("b", false, 4)
	good.Add("empty", true, 0)
	good.Add("a", true, 6)
	hp := AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Step: 1}
	overlap := &tensor.Layout{Total: n, Segments: []tensor.Segment{
		{Name: "a", Offset: 0, Shape: tensor.Shape{6}}, {Name: "b", Offset: 5, Shape: tensor.Shape{5}}}}
	outside := &tensor.Layout{Total: n, Segments: []tensor.Segment{{Name: "a", Offset: 5, Shape: tensor.Shape{6}}}}
	for name, l := range map[string]*tensor.Layout{"overlapping segments": overlap, "segment outside": outside, "nil layout": nil} {
		if _, _, err := AdamWArgs(&Ops.AdamWStep, l, hp); !errors.Is(err, tensor.ErrShape) {
			t.Errorf("%s: %v", name, err)
		}
	}
	spans, sizes, err := AdamWArgs(&Ops.AdamWStep, good, hp)
	if err != nil || len(spans) != 2 || spans[0] != (Span{0, 4, false}) || spans[1] != (Span{4, 10, true}) || len(sizes) != 2 || sizes[0] != n {
		t.Fatalf("spans %v sizes %v err %v", spans, sizes, err)
	}
	p := tensor.New(tensor.F32, n)
	if err := Ops.AdamWStep.Check([]int{n, 0}, p, nil, p, p, p); err == nil || !strings.Contains(err.Error(), "step=0") {
		t.Errorf("step 0: %v", err)
	}
	if _, sizes, _ := AdamWArgs(&Ops.AdamWState, good, AdamW{}); len(sizes) != 1 {
		t.Errorf("AdamWState sizes %v: the step comes from the state", sizes)
	}
}

// TestRoundingRule: the norm bound of 16-bit outputs lies between one
// rounding's worst error (2u: two devices one ulp apart) and a 2% error,
// for each 16-bit dtype; f32 has none (its element-wise rule holds it);
// ProbFloor is 2u times the largest |v| of its input.
func TestRoundingRule(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		if nt := NormTol(dt); !(nt > 2*Unit(dt) && nt < 0.02) {
			t.Errorf("%s: NormTol %g, want in (2u = %g, 0.02)", dt, nt, 2*Unit(dt))
		}
		if u := Unit(dt); u != dt.Eps()/2 {
			t.Errorf("%s: Unit %g, want half of Eps %g", dt, u, dt.Eps())
		}
	}
	if NormTol(tensor.F32) != 0 || Unit(tensor.F32) != 0x1p-24 || Unit(tensor.I32) != 0 {
		t.Errorf("f32: NormTol %g Unit %g; i32 Unit %g", NormTol(tensor.F32), Unit(tensor.F32), Unit(tensor.I32))
	}
	v := tensor.New(tensor.BF16, 4)
	if err := v.SetF32([]float32{0.5, -3, 2, float32(math.Inf(1))}); err != nil {
		t.Fatal(err)
	}
	if got := ProbFloor(1)(tensor.BF16, nil, []*T{nil, v}); got != 2*0x1p-8*3 {
		t.Errorf("ProbFloor = %g, want 2u·3 (an infinity left out)", got)
	}
}

// TestLogitsClose: in fp32 the element-wise rule at scale 8; in 16 bits
// a rounding's error everywhere passes, and a wholesale error (the norm
// bound), one element beyond 8u of the largest logit, a NaN or a short
// slice fail.
func TestLogitsClose(t *testing.T) {
	want := make([]float32, 1000)
	for i := range want {
		want[i] = float32(i%13) - 6 // the largest |logit| is 6
	}
	off := func(f func(i int, w float32) float32) []float32 {
		got := make([]float32, len(want))
		for i, w := range want {
			got[i] = f(i, w)
		}
		return got
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		u := float32(Unit(dt))
		if err := LogitsClose(off(func(_ int, w float32) float32 { return w * (1 + u) }), want, dt); err != nil {
			t.Errorf("%s: a rounding's error: %v", dt, err)
		}
		at := func(v float32) func(int, float32) float32 { // v at element 500
			return func(i int, w float32) float32 {
				if i == 500 {
					return v
				}
				return w
			}
		}
		bad := map[string][]float32{
			"10% everywhere": off(func(_ int, w float32) float32 { return w * 1.1 }),
			"one element":    off(at(want[500] + 0.3)), // 5% of the largest: 8u is 3.1% in bf16
			"a NaN":          off(at(float32(math.NaN()))),
			"short":          want[:999],
		}
		for name, got := range bad {
			if err := LogitsClose(got, want, dt); err == nil {
				t.Errorf("%s: %s passes", dt, name)
			}
		}
	}
}
