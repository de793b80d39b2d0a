package device

// contract.go: every op's argument contract, declared once. A backend
// checks an op's arguments with its Contract (Check) and then only what is
// its own (where a tensor lives, which dtype combinations it implements);
// package devicetest runs any Device's ops against the CPU twin from the
// same declarations.

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/druto/druto/pkg/tensor"
)

// Class is the dtypes a tensor argument may have.
type Class uint8

// The dtype classes of op arguments.
const (
	Float Class = iota // f32, bf16 or f16 (the op's compute type in tests)
	Wide               // any float; f32 in training and tests (fp32 gradients and sums)
	F32                // f32 only
	I32                // i32 only (tokens, targets)
	BF16               // bf16 only (AdamW's moments stored in bf16)
)

// Has reports whether dt belongs to the class.
func (c Class) Has(dt tensor.DType) bool {
	if f, ok := c.Fixed(); ok {
		return dt == f
	}
	return dt.Float()
}

// Fixed returns the one dtype of a class of one (F32, I32, BF16) and true:
// an argument of such a class keeps its dtype under every precision policy
// and in every test (AdamWBF16's bf16 moments stay bf16 where a test runs
// the op in fp32). Float and Wide give false.
func (c Class) Fixed() (tensor.DType, bool) {
	switch c {
	case F32:
		return tensor.F32, true
	case I32:
		return tensor.I32, true
	case BF16:
		return tensor.BF16, true
	}
	return 0, false
}

// String names the class in error messages.
func (c Class) String() string {
	return [...]string{"a float dtype", "a float dtype", "f32", "i32", "bf16"}[c]
}

// Role says how an op uses a tensor argument.
type Role uint8

// The roles of op arguments.
const (
	In    Role = iota // read only
	Out               // written (its old contents are never read)
	Acc               // read and written: accumulated into, or overwritten in place
	State             // Attention's saved state, shaped by Device.AttentionState
)

// Gen says what values a test fills an input with.
type Gen uint8

// Input distributions (package devicetest).
const (
	Normal   Gen = iota // standard normal
	Positive            // uniform in [0.5, 2) (rstd, second moments)
	Index               // integers in [0, Contract.IndexMax) (tokens, targets)
	Small               // normal with standard deviation 1/4 (GEMM operands: sums of O(1))
	// Dyadic values k/den, |k| <= 8, exact in every float dtype: GEMMs of
	// them (and accumulations into them) are exact in fp32 whatever their
	// summation order, so a wrong transpose cannot hide in the tolerance.
	Dyadic4  // k/4 (pre-activations over GELU's curved part)
	Dyadic16 // k/16 (activations, output gradients, accumulated gradients)
	Dyadic64 // k/64 (weights)
)

// Param is one tensor argument of an op.
type Param struct {
	Name  string
	Class Class
	Role  Role
	Opt   bool // may be nil
	Gen   Gen
	// Numel is the element count from the op's sizes; nil leaves the count
	// to the contract's Rule (tables of any number of rows).
	Numel func(s []int) int
	// Tol, when set, is this output's tolerance scale instead of the
	// contract's. An output is held to its own dtype's tolerance, or the
	// compute dtype's when Rounded (an fp32 sum of values rounded to it).
	// RelNorm also bounds ||got-want||/||want|| by the dtype's rtol: a long
	// sum's element-wise scale cannot hide a wholesale error.
	Tol              func(dt tensor.DType, s []int) float64
	Rounded, RelNorm bool
	// Floor, when set, is an absolute tolerance added to every element's,
	// from the scale of the call's inputs ts (ProbFloor, lnBwdFloor): the
	// error an op's rounding steps can leave that the output's own size
	// does not bound. Every output at a 16-bit dtype is also held to
	// ||got-want||/||want|| <= the dtype's rtol (NormTol): a wholesale 2%
	// error fails whatever the element-wise floor and scale allow.
	Floor func(dt tensor.DType, s []int, ts []*T) float64
}

// Contract is one op's descriptor, the one place an op is declared beside
// its method: its integer sizes (a name ending in "+" must be at least 1),
// its tensor arguments in call order, the tolerance its outputs meet
// against the CPU reference, any further rule, and what the rest of the
// module derives from it: the interface that declares the method, the
// profiler's class of its time (pkg/bench), the sizes of conformance cases
// package devicetest derives for it, and its decomposed composition.
// Contracts lists them all.
type Contract struct {
	Op     string
	Sizes  []string
	Params []Param
	// Tol is the scale of tensor.Close's tolerance for the op's compute
	// dtype dt at sizes s (1: the dtype's rounding; more for long sums whose
	// order differs between devices, for tanhf's ulps, for intermediates
	// one device rounds to dt and the other not: see Unit for the rule).
	Tol func(dt tensor.DType, s []int) float64
	// Rule checks what the declarations above cannot; nil when none.
	Rule func(s []int, ts []*T) error
	// IndexMax is the exclusive bound of Index inputs at sizes s (the rows
	// of the table they index: Encoder's vocabulary, CrossEntropy's V).
	IndexMax func(s []int, ts []*T) int

	// Iface names the interface whose method Op is: "" for Device, else an
	// optional one ("GradStorer", "Stepper", "GELUer", "MomentsBF16",
	// "Decoder").
	Iface string
	// Class is the profiler's class of the op's time (pkg/bench), e.g.
	// "layernorm"; "gemm" is named there by the product's shape (sizes
	// N, C, OC first). Empty: the op is not part of a training step.
	Class string
	// FLOPs, when set, is the op's useful arithmetic at sizes s, for ops
	// whose time is measured against the matmul peak; without it the
	// profiler counts the op's bytes (Traffic).
	FLOPs func(s []int, ts []*T) float64
	// Shapes, when set, are sizes at which package devicetest derives the
	// op's conformance cases itself, at every float dtype: it calls the
	// method named Op with the tensors in Params order, then the sizes
	// (converted to the method's parameter types). An op of that
	// signature needs no hand-written case.
	Shapes [][]int
	// Decomposed, when set, runs the op on d as the sequence of other
	// Device ops that its fused form replaces (s and ts as Check takes
	// them): the decomposed form, written once above the backends, which
	// both call.
	Decomposed func(d Device, s []int, ts []*T)
}

// Traffic is the bytes an op moves by its arguments' roles: each input
// read once, each output written once, each accumulated tensor read and
// written (nil tensors count nothing); ts in Params order.
func (c *Contract) Traffic(ts []*T) float64 {
	var n float64
	for i, t := range ts {
		if t == nil || i >= len(c.Params) {
			continue
		}
		b := float64(t.Bytes())
		if c.Params[i].Role == Acc {
			b *= 2
		}
		n += b
	}
	return n
}

// Check returns an error naming the op and the argument when sizes or
// tensors break the contract: a negative size, a missing tensor, a dtype
// outside its class, a wrong element count, or the op's Rule.
func (c *Contract) Check(s []int, ts ...*T) error {
	if len(s) != len(c.Sizes) || len(ts) != len(c.Params) {
		return fmt.Errorf("%s: %d sizes and %d tensors, want %d and %d", c.Op, len(s), len(ts), len(c.Sizes), len(c.Params))
	}
	for i, v := range s {
		if v < 0 || (v == 0 && strings.HasSuffix(c.Sizes[i], "+")) {
			return fmt.Errorf("%s: %s=%d (sizes %s = %v): %w", c.Op, strings.TrimSuffix(c.Sizes[i], "+"), v, strings.Join(c.Sizes, ","), s, tensor.ErrShape)
		}
	}
	for i, p := range c.Params {
		t := ts[i]
		switch {
		case t == nil && p.Opt:
		case t == nil:
			return fmt.Errorf("%s: %s is nil: %w", c.Op, p.Name, tensor.ErrShape)
		case !p.Class.Has(t.DType):
			return fmt.Errorf("%s: %s is %s, want %s: %w", c.Op, p.Name, t.DType, p.Class, ErrUnsupported)
		case p.Numel != nil && t.Numel() != p.Numel(s):
			return fmt.Errorf("%s: %s is %s%v, want %d elements: %w", c.Op, p.Name, t.DType, t.Shape, p.Numel(s), tensor.ErrShape)
		}
	}
	if c.Rule != nil {
		if err := c.Rule(s, ts); err != nil {
			return fmt.Errorf("%s: %w", c.Op, err)
		}
	}
	return nil
}

// Numel is t's element count, 0 for nil: the size of an op whose sizes
// are its tensors' (Check then reports the nil tensor).
func Numel(t *T) int {
	if t == nil {
		return 0
	}
	return t.Numel()
}

// Contracts lists every op's descriptor: Device's, GradStorer's and
// Stepper's (the fields of Ops, in their order), then those of the
// optional interfaces GELUer (GELUForward) and MomentsBF16 (AdamWBF16),
// then Decoder's (the fields of DecodeOps). Every method of those
// interfaces is an op listed here, but for Plumbing.
func Contracts() []*Contract { return contracts() }

var contracts = sync.OnceValue(func() []*Contract {
	var cs []*Contract
	fields := func(v reflect.Value) {
		for i := range v.NumField() {
			cs = append(cs, v.Field(i).Addr().Interface().(*Contract))
		}
	}
	fields(reflect.ValueOf(&Ops).Elem())
	cs = append(cs, &GELUForward, &AdamWBF16)
	fields(reflect.ValueOf(&DecodeOps).Elem())
	return cs
})

// Lookup returns the descriptor of the op named op, nil for none.
func Lookup(op string) *Contract {
	for _, c := range Contracts() {
		if c.Op == op {
			return c
		}
	}
	return nil
}

// Plumbing are the methods of Device (and Decoder) that are not ops and
// have no descriptor: naming, memory, transfers, synchronisation and
// readiness (a profiler times Zero, Upload and Download as they are, with
// no contract to derive from).
var Plumbing = []string{"Name", "Fused", "Alloc", "Free", "Upload", "Download", "Zero", "Sync", "AttentionState", "DecodeReady"}

// Size helpers of the declarations below.
func prod(idx ...int) func(s []int) int {
	return func(s []int) int {
		n := 1
		for _, i := range idx {
			n *= s[i]
		}
		return n
	}
}

func times(k int, idx ...int) func(s []int) int {
	p := prod(idx...)
	return func(s []int) int { return k * p(s) }
}

func one(tensor.DType, []int) float64 { return 1 }

// gemmFLOPs is the work of k/2 products of (N,C)·(C,OC), sizes N, C, OC first.
func gemmFLOPs(k float64) func(s []int, _ []*T) float64 {
	return func(s []int, _ []*T) float64 { return k * float64(s[0]) * float64(s[1]) * float64(s[2]) }
}

// attnFLOPs is k times causal attention's useful forward work (sizes B,
// T, C): 2·B·NH·T²·hs, the two products over the lower triangle; the
// backward is 2.5 times that.
func attnFLOPs(k float64) func(s []int, _ []*T) float64 {
	return func(s []int, _ []*T) float64 {
		return k * 2 * float64(s[0]) * float64(s[1]) * float64(s[1]) * float64(s[2])
	}
}

// sumTol is the tolerance scale of a result that sums k = s[i] terms in an
// order that differs between devices (√k/8, at least 1).
func sumTol(i int) func(tensor.DType, []int) float64 {
	return func(_ tensor.DType, s []int) float64 { return sumScale(s[i]) }
}

func sumScale(k int) float64 {
	r := 1.0
	for r*r*64 < float64(k) {
		r *= 1.25
	}
	return max(1, r)
}

// Tolerance rule of the 16-bit outputs (the helpers below are what a new
// op's contract calls). Two devices that take the same 16-bit inputs,
// accumulate in fp32 in different orders and round the result to the
// dtype once each can land one ulp apart (2u, u the unit roundoff), which
// scale 1 covers: tensor.Tolerance's rtol is two ulps (4u). Each further
// rounding of an intermediate to the dtype on one device and not the
// other (the GPU's epilogues, cuBLASLt's split-K partial sums) adds its
// own 2u: scale ⌈k/2⌉ for k of them. A rounding of the weights of an
// average (attention's p) is absolute, at the scale of what is averaged:
// ProbFloor. And whatever the element-wise rule, NormTol bounds the
// relative error of the whole output: the kernels' measured norm errors
// are below one ulp, and a 2% error is more than two (bf16's rtol is
// 1.56%, f16's 0.2%).

// Unit is dt's unit roundoff u (half an ulp at 1): 2^-24 for f32, 2^-8 for
// bf16, 2^-11 for f16; 0 for other dtypes.
func Unit(dt tensor.DType) float64 {
	switch dt {
	case tensor.F32:
		return 0x1p-24
	case tensor.BF16:
		return 0x1p-8
	case tensor.F16:
		return 0x1p-11
	}
	return 0
}

// NormTol is the bound on ||got-want||/||want|| of an output held to
// dtype dt at 16 bits (0 for f32, whose outputs the element-wise rule
// alone holds): tensor.Tolerance's rtol, two ulps.
func NormTol(dt tensor.DType) float64 {
	if dt != tensor.BF16 && dt != tensor.F16 {
		return 0
	}
	_, rtol := tensor.Tolerance(dt)
	return rtol
}

// MaxAbs is the largest |x| of t's finite elements (0 for nil).
func MaxAbs(t *T) float64 {
	if t == nil || !t.DType.Float() {
		return 0
	}
	m := 0.0
	for _, x := range t.ToF32() {
		if f := math.Abs(float64(x)); f > m && !math.IsInf(f, 0) {
			m = f
		}
	}
	return m
}

// ProbFloor is the floor of a weighted average Σ p_j·v_j (Σ p_j = 1) whose
// weights each device rounds to dt (attention's probabilities, rounded
// before p·v, at different running maxima in the flash kernels): each
// weight off by u on each side moves the average by at most
// 2u·Σ p_j·|v_j| <= 2u·max|v|, v being ts[i] (qkv, or a KV cache).
func ProbFloor(i int) func(dt tensor.DType, s []int, ts []*T) float64 {
	return func(dt tensor.DType, _ []int, ts []*T) float64 { return 2 * Unit(dt) * MaxAbs(ts[i]) }
}

// LogitsClose reports whether a model's logits on one device (got) agree
// with another's (want) when activations are stored in dt, and if not,
// where: element by element at scale 8 in fp32. In 16 bits the devices
// round the activations at other points (a fused kernel keeps fp32 inside,
// the CPU twins round at each op), and those roundings pass through every
// layer, so the rule is ||got-want||/||want|| <= 4·rtol of dt, and each
// element within 8u of the largest |want| (a near-zero logit carries the
// rounding of the large terms it sums).
func LogitsClose(got, want []float32, dt tensor.DType) error {
	if dt == tensor.F32 {
		return tensor.CloseF32(got, want, dt, 8)
	}
	_, rtol := tensor.Tolerance(dt)
	if e := tensor.RelErr(got, want); e > 4*rtol {
		return fmt.Errorf("relative error %.3g > 4·rtol(%s) = %.3g", e, dt, 4*rtol)
	}
	top := 0.0
	for _, w := range want {
		top = max(top, math.Abs(float64(w)))
	}
	bound := 8 * Unit(dt) * top
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= bound) {
			return fmt.Errorf("element %d: got %g want %g, off by %.3g > 8 units of the largest logit %.3g (%.3g)", i, got[i], want[i], d, top, bound)
		}
	}
	return nil
}

// floor sets q's Floor.
func floor(q Param, f func(tensor.DType, []int, []*T) float64) Param {
	q.Floor = f
	return q
}

func p(name string, c Class, r Role, n func(s []int) int) Param {
	return Param{Name: name, Class: c, Role: r, Numel: n}
}

func opt(q Param) Param { q.Opt = true; return q }
func gen(q Param, g Gen) Param {
	q.Gen = g
	return q
}
func tol(q Param, f func(tensor.DType, []int) float64) Param {
	q.Tol = f
	return q
}

// by16 is a tolerance scale of a for fp32, b for 16-bit dtypes.
func by16(a, b float64) func(tensor.DType, []int) float64 {
	return func(dt tensor.DType, _ []int) float64 {
		if dt == tensor.F32 {
			return a
		}
		return b
	}
}

// The dyadic GEMM operands (Dyadic16 inputs and gradients, Dyadic64 weights).
func dy(q Param) Param  { return gen(q, Dyadic16) }
func dyW(q Param) Param { return gen(q, Dyadic64) }

// rows checks that t holds whole rows of C elements, at least min of them.
func rows(name string, t *T, C, min int) error {
	if t.Numel()%C != 0 || t.Numel()/C < min {
		return fmt.Errorf("%s is %s%v, want rows of C=%d (at least %d): %w", name, t.DType, t.Shape, C, min, tensor.ErrShape)
	}
	return nil
}

// encoderRule checks the token table (V,C) and the position table
// (maxT,C), maxT >= T, at ts[i] and ts[i+1].
func encoderRule(i int) func(s []int, ts []*T) error {
	return func(s []int, ts []*T) error {
		if err := rows("token table", ts[i], s[2], 1); err != nil {
			return err
		}
		return rows("position table", ts[i+1], s[2], s[1])
	}
}

// ceTol: the loss is the log of an exp sum over V, whose relative error
// (2e-6 for the GPU's exp2f of an FMA) is the loss's absolute one.
func ceTol(_ tensor.DType, s []int) float64 { return max(2, math.Sqrt(float64(s[1]))/8) }

// ceGradTol: the gradient is one softmax element: the exp's 2e-6 in fp32.
var ceGradTol = by16(2, 1)

// rowSum is the scale of fp32 sums over N rows in different orders, with
// the bound on the relative error of the whole.
func rowSum(q Param) Param {
	q.RelNorm = true
	return tol(q, func(_ tensor.DType, s []int) float64 { return max(1, float64(s[0])/16) })
}

func rounded(q Param) Param { q.Rounded = true; return q }

func attnRule(s []int, _ []*T) error {
	if s[2]%s[3] != 0 {
		return fmt.Errorf("C=%d is not a multiple of NH=%d: %w", s[2], s[3], tensor.ErrShape)
	}
	return nil
}

// attnTol: in fp32 the scores sum over the head size and the outputs over
// T keys. In 16 bits both devices round p to the dtype before p·v (the
// flash kernels at their running maximum, the CPU after normalising), the
// output once: scale 1 for the output's rounding and ProbFloor for p's.
func attnTol(dt tensor.DType, s []int) float64 {
	if dt != tensor.F32 {
		return 1
	}
	return 2 * sumScale(max(s[1], s[2]/s[3]))
}

// attnBwdTol: each device differentiates its own forward. In 16 bits dqkv
// takes p (rounded to the dtype, 2u apart between devices), the rounded
// output o through D = Σ dout·o, and the dtype's rounding of dqkv itself:
// dq and dk are sums of p·(dp - D) whose terms cancel, so an element's
// error is at the scale of the whole output (RelNorm: the absolute
// tolerance at its RMS), four such roundings on each side (scale 8); the
// norm bound (NormTol) holds the whole to two ulps.
func attnBwdTol(dt tensor.DType, s []int) float64 {
	if dt != tensor.F32 {
		return 8
	}
	return attnTol(dt, s)
}

// lnBwdFloor is LayerNormBackward's dinp floor: the fp32 rounding (4
// roundings of terms up to |dout·weight|, and of xhat = (x-mean)·rstd)
// multiplied by rstd, which is 1/√eps = 316 at C = 1.
func lnBwdFloor(_ tensor.DType, _ []int, ts []*T) float64 {
	return 4 * 0x1p-23 * MaxAbs(ts[7]) * MaxAbs(ts[3]) * max(1, MaxAbs(ts[5]))
}

func relNorm(q Param) Param { q.RelNorm = true; return q }

// Span is one segment of a parameter layout as AdamW walks it: elements
// [Lo,Hi), weight-decayed or not.
type Span struct {
	Lo, Hi int
	Decay  bool
}

// AdamWArgs checks the layout AdamWStep and AdamWState take beside their
// tensors and returns its non-empty segments sorted by offset: an error
// when the layout is nil or segments overlap or leave the buffer. With the
// layout it returns the sizes of op's contract (Ops.AdamWStep: the total
// and hp.Step, which must be at least 1: bias correction is 1-based;
// Ops.AdamWState: the total).
func AdamWArgs(op *Contract, layout *tensor.Layout, hp AdamW) ([]Span, []int, error) {
	if layout == nil {
		return nil, nil, fmt.Errorf("%s: nil layout: %w", op.Op, tensor.ErrShape)
	}
	sizes := []int{layout.Total}
	if len(op.Sizes) == 2 {
		sizes = append(sizes, hp.Step)
	}
	spans := make([]Span, 0, len(layout.Segments))
	for _, s := range layout.Segments {
		if n := s.Numel(); n > 0 {
			spans = append(spans, Span{s.Offset, s.Offset + n, s.Decay})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].Lo < spans[j].Lo })
	for i, s := range spans {
		if s.Lo < 0 || s.Hi > layout.Total || (i > 0 && s.Lo < spans[i-1].Hi) {
			return nil, nil, fmt.Errorf("%s: segment [%d,%d) overlaps another or leaves the buffer of %d: %w",
				op.Op, s.Lo, s.Hi, layout.Total, tensor.ErrShape)
		}
	}
	return spans, sizes, nil
}
