// Package devicetest runs any device.Device's ops against a reference
// device (the CPU twin) from the op contracts of package device
// (device.Ops): each Case fills the op's inputs with the same random
// values on both devices, poisons every output with NaN (all-ones bytes,
// a NaN in every float dtype) so that an element an op fails to write
// cannot pass, runs the op and compares each output with the reference's
// under the contract's tolerance: element by element (with the output's
// absolute floor, device.Param.Floor) and, for every 16-bit output and
// every long sum, by the relative error of the whole (device.NormTol), so
// that a 2% error of an output fails. The GPU tests, `druto detect` (through
// gpu.Device.SelfTest) and this package's own tests, which run the CPU
// device against itself, use it.
package devicetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Case is one call of one op at one compute dtype and set of sizes.
type Case struct {
	Name     string // e.g. "LayerNorm bf16 (17,96)"
	Contract *device.Contract
	DType    tensor.DType // the dtype of the contract's Float arguments
	Sizes    []int        // the contract's sizes
	// DTypes overrides the dtype of some arguments (by index): a 16-bit op
	// on an f32 residual stream, a cast between dtypes.
	DTypes map[int]tensor.DType
	// Numel gives the element count of arguments whose contract leaves it
	// open (the encoder's tables); Omit lists arguments passed as nil.
	Numel map[int]int
	Omit  map[int]bool
	// Alias passes argument i as argument Alias[i]'s tensor (in place).
	Alias map[int]int
	// Offset allocates every tensor one element into a larger buffer (off
	// the vector alignment: the kernels' scalar paths).
	Offset bool
	// Same runs the op twice on the device: the outputs must be the same
	// bits (deterministic). Finite: every output must be finite.
	Same, Finite bool
	// Init adjusts the host inputs after the random fill (a step state).
	Init func(host []*tensor.Tensor)
	// Call runs the op on d; it returns the op's scalar results, if any
	// (GradNorm's), which are compared too, or an error wrapping
	// device.ErrUnsupported when d lacks the op (a Stepper op).
	Call func(d device.Device, ts []*tensor.Tensor) ([]float32, error)
}

// Result is one case's verdict.
type Result struct {
	Case      string  `json:"case"`
	Pass      bool    `json:"pass"`
	MaxRelErr float64 `json:"max_rel_err"` // the largest tensor.RelErr over the outputs (MaxFloat64 for NaN)
	// Unsupported says the device reported device.ErrUnsupported: the op
	// has no path for this combination there (callers fall back), which is
	// not a failure.
	Unsupported bool   `json:"unsupported,omitempty"`
	Error       string `json:"error,omitempty"` // why it failed, or what is unsupported
}

// Run runs c on dev and on ref with the same inputs drawn from seed and
// compares the outputs.
func Run(dev, ref device.Device, c Case, seed uint64) Result { return run(dev, ref, c, c, seed) }

// run is Run with the reference running its own form of the case, rc (the
// negative controls run a broken copy of an op on dev only).
func run(dev, ref device.Device, c, rc Case, seed uint64) Result {
	r := Result{Case: c.Name}
	host, err := inputs(c, seed)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	want, wantS, err := onDevice(ref, rc, host)
	if err != nil {
		r.Error = "reference: " + err.Error()
		return r
	}
	got, gotS, err := onDevice(dev, c, host)
	if err == nil && c.Same {
		again, againS, err2 := onDevice(dev, c, host)
		if err = err2; err == nil && (!sameBits(got, again) || fmt.Sprint(gotS) != fmt.Sprint(againS)) {
			err = errors.New("two runs of the same inputs gave different bits")
		}
	}
	if errors.Is(err, device.ErrUnsupported) {
		r.Pass, r.Unsupported, r.Error = true, true, err.Error()
		return r
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	return judge(r, c, host, got, gotS, want, wantS)
}

// judge compares c's outputs got (and scalar results gotS) with the
// reference's under the contract's tolerances, host being the inputs.
func judge(r Result, c Case, host, got []*tensor.Tensor, gotS []float32, want []*tensor.Tensor, wantS []float32) Result {
	var errs []error
	compare := func(name string, g, w []float32, dt tensor.DType, tol float64, norm bool, floor float64) {
		e := tensor.RelErr(finitePairs(g, w))
		if math.IsNaN(e) || math.IsInf(e, 0) {
			e = math.MaxFloat64
		}
		r.MaxRelErr = max(r.MaxRelErr, e)
		abs := 1.0
		if norm {
			// a long sum (RelNorm): its elements' absolute tolerance at
			// the scale of the whole output (its RMS), which bounds what
			// was summed where an element's terms cancel
			abs = rms(w)
		}
		// the norm bound: a long sum's (RelNorm) at its dtype's rtol, and
		// every 16-bit output's (device.NormTol), so that a wholesale
		// error (2%) fails where the element-wise rule is loose
		_, rtol := tensor.Tolerance(dt)
		if !norm {
			rtol = device.NormTol(dt)
		}
		err := tensor.CloseFloorF32(g, w, dt, tol, abs, floor)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (relative error %.3g)", name, err, e))
		} else if c.Finite && !finite(g) {
			errs = append(errs, fmt.Errorf("%s: not finite", name))
		} else if rtol > 0 && e > rtol {
			errs = append(errs, fmt.Errorf("%s: relative error %.3g over %.3g", name, e, rtol))
		}
	}
	for i, p := range c.Contract.Params {
		if want[i] == nil {
			continue
		}
		tol, dt := c.Contract.Tol, c.DTypeOf(i) // an output's own dtype
		if p.Tol != nil {
			tol = p.Tol
		}
		if p.Rounded {
			dt = c.DType
		}
		floor := 0.0
		if p.Floor != nil {
			floor = p.Floor(c.DType, c.Sizes, host)
		}
		compare(p.Name, got[i].ToF32(), want[i].ToF32(), dt, tol(c.DType, c.Sizes), p.RelNorm, floor)
	}
	if len(wantS) > 0 {
		compare("result", gotS, wantS, c.DType, c.Contract.Tol(c.DType, c.Sizes), false, 0)
	}
	r.Pass = len(errs) == 0
	if err := errors.Join(errs...); err != nil {
		r.Error = err.Error()
	}
	return r
}

// rms is the root mean square of v's finite elements (0 for none).
func rms(v []float32) float64 {
	s, n := 0.0, 0
	for _, x := range v {
		if f := float64(x); !math.IsNaN(f) && !math.IsInf(f, 0) {
			s += f * f
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return math.Sqrt(s / float64(n))
}

// finitePairs leaves out the elements where both sides hold the same
// non-finite value (an overflow the contract expects on both devices): the
// tolerance check passes them, and they would make the relative error
// NaN. Other non-finite elements stay and make it infinite.
func finitePairs(g, w []float32) ([]float32, []float32) {
	if len(g) != len(w) {
		return g, w
	}
	same := func(a, b float32) bool {
		fa, fb := float64(a), float64(b)
		return (math.IsNaN(fa) && math.IsNaN(fb)) || (math.IsInf(fa, 0) && a == b)
	}
	for i := range g {
		if same(g[i], w[i]) {
			var gs, ws []float32
			for j := range g {
				if !same(g[j], w[j]) {
					gs, ws = append(gs, g[j]), append(ws, w[j])
				}
			}
			return gs, ws
		}
	}
	return g, w
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// sameBits reports whether two runs' outputs hold the same bytes.
func sameBits(a, b []*tensor.Tensor) bool {
	for i := range a {
		if a[i] != nil && string(a[i].Raw()) != string(b[i].Raw()) {
			return false
		}
	}
	return true
}

// DTypeOf returns argument i's dtype in c.
func (c Case) DTypeOf(i int) tensor.DType {
	if dt, ok := c.DTypes[i]; ok {
		return dt
	}
	cl := c.Contract.Params[i].Class
	if dt, ok := cl.Fixed(); ok {
		return dt
	}
	if cl == device.Wide {
		return tensor.F32
	}
	return c.DType
}

// NumelOf returns argument i's element count in c, -1 when the contract
// and c leave it open (Attention's state, shaped by each device).
func (c Case) NumelOf(i int) int {
	if n, ok := c.Numel[i]; ok {
		return n
	}
	if p := c.Contract.Params[i]; p.Numel != nil {
		return p.Numel(c.Sizes)
	}
	return -1
}

// inputs makes the host tensors of c: random inputs, NaN outputs, nil for
// omitted arguments and Attention's state (which each device shapes).
func inputs(c Case, seed uint64) ([]*tensor.Tensor, error) {
	ps := c.Contract.Params
	host := make([]*tensor.Tensor, len(ps))
	for i, p := range ps {
		if _, alias := c.Alias[i]; alias || c.Omit[i] || p.Role == device.State {
			continue
		}
		n := c.NumelOf(i)
		if n < 0 {
			return nil, fmt.Errorf("devicetest: %s: no element count for %s", c.Name, p.Name)
		}
		t := tensor.New(c.DTypeOf(i), n)
		host[i] = t
		if p.Role == device.Out {
			poison(t)
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		if t.DType == tensor.I32 {
			hi := c.Contract.IndexMax(c.Sizes, host)
			v := t.I32()
			for k := range v {
				v[k] = int32(rng.IntN(hi))
			}
			continue
		}
		v := make([]float32, n)
		for k := range v {
			switch p.Gen {
			case device.Positive:
				v[k] = float32(0.5 + 1.5*rng.Float64())
			case device.Small:
				v[k] = float32(rng.NormFloat64() / 4)
			case device.Dyadic4, device.Dyadic16, device.Dyadic64:
				v[k] = float32(rng.IntN(17)-8) / []float32{4, 16, 64}[p.Gen-device.Dyadic4]
			default:
				v[k] = float32(rng.NormFloat64())
			}
		}
		if err := t.SetF32(v); err != nil {
			return nil, err
		}
	}
	if c.Init != nil {
		c.Init(host)
	}
	return host, nil
}

// poison fills t with all-ones bytes: NaN in f32, bf16 and f16.
func poison(t *tensor.Tensor) {
	for i := range t.Raw() {
		t.Raw()[i] = 0xff
	}
}

// onDevice copies host to d (Attention's state allocated as d shapes it
// and poisoned), runs the case and returns the outputs and accumulators
// downloaded (nil for inputs) and the scalar results.
func onDevice(d device.Device, c Case, host []*tensor.Tensor) (outs []*tensor.Tensor, scalars []float32, err error) {
	ps := c.Contract.Params
	ts, bases := make([]*tensor.Tensor, len(ps)), make([]*tensor.Tensor, len(ps))
	defer func() {
		for _, t := range bases {
			if t != nil {
				d.Free(t)
			}
		}
	}()
	for i, p := range ps {
		h := host[i]
		if p.Role == device.State {
			s := c.Sizes // B, T, C, NH
			st := d.AttentionState(c.DType, s[0], s[1], s[2], s[3])
			h = tensor.New(st.DType, st.Shape...)
			poison(h)
		}
		if h == nil {
			continue
		}
		off := map[bool]int{true: 1}[c.Offset]
		if bases[i], err = d.Alloc(h.DType, off+h.Numel()); err != nil {
			return nil, nil, err
		}
		ts[i] = bases[i].MustView(off, h.Shape...)
		d.Upload(ts[i], h)
	}
	for i, j := range c.Alias {
		ts[i] = ts[j]
	}
	if err := d.Sync(); err != nil {
		return nil, nil, fmt.Errorf("upload: %w", err)
	}
	scalars, err = c.Call(d, ts)
	if err := errors.Join(err, d.Sync()); err != nil {
		return nil, nil, err
	}
	outs = make([]*tensor.Tensor, len(ps))
	for i, p := range ps {
		if ts[i] == nil || (p.Role != device.Out && p.Role != device.Acc) {
			continue
		}
		outs[i] = tensor.New(ts[i].DType, ts[i].Shape...)
		d.Download(outs[i], ts[i])
	}
	return outs, scalars, d.Sync()
}
