package devicetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// TestCPUConformance runs every case on the CPU device against itself,
// in both forms (each against the reference of its own form, as detect
// runs the GPU), so that CI exercises the harness: every case must pass.
func TestCPUConformance(t *testing.T) {
	for _, fused := range []bool{true, false} {
		ref := cpu.New(device.Options{Fused: fused, Threads: 1})
		dev := cpu.New(device.Options{Fused: fused, Threads: 2})
		for i, c := range Cases() {
			r := Run(dev, ref, c, uint64(i))
			if !r.Pass || r.Unsupported {
				t.Errorf("fused=%v %s: %+v", fused, c.Name, r)
			}
			// detect prints the largest relative error: a passing case
			// must give a finite one (not MaxFloat64 from a NaN).
			if r.MaxRelErr > 1 {
				t.Errorf("fused=%v %s: max relative error %g for a passing case", fused, c.Name, r.MaxRelErr)
			}
		}
	}
}

// TestEveryOpHasCases: every contract of device.Ops has cases at every
// float dtype it runs at.
func TestEveryOpHasCases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases() {
		seen[c.Contract.Op] = true
	}
	for _, c := range device.Contracts() {
		if !seen[c.Op] {
			t.Errorf("no case for %s", c.Op)
		}
	}
}

// TestDecomposedCompositions: each descriptor's decomposed composition,
// run on the CPU device in both forms, computes its op (the fused CPU
// reference) within the op's contract.
func TestDecomposedCompositions(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true, Threads: 2})
	n := 0
	for i, c := range Cases() {
		dc, ok := Decomposed(c)
		if !ok {
			continue
		}
		for _, fused := range []bool{true, false} {
			dev := cpu.New(device.Options{Fused: fused, Threads: 2})
			if r := run(dev, ref, dc, c, uint64(i)); !r.Pass || r.Unsupported {
				t.Errorf("fused=%v %s: %+v", fused, dc.Name, r)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no op has a decomposed composition")
	}
}

// badDevice wraps the CPU device and breaks one op: it leaves LayerNorm's
// rstd unwritten, and moves one element of Matmul's output.
type badDevice struct{ device.Device }

func (b badDevice) LayerNorm(out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	tmp := tensor.New(tensor.F32, N)
	b.Device.LayerNorm(out, mean, tmp, inp, weight, bias, N, C)
}

func (b badDevice) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	b.Device.Matmul(out, pre, inp, weight, bias, N, C, OC, act)
	v := out.ToF32()
	v[len(v)/2] = v[len(v)/2]*1.01 + 1e-3
	_ = out.SetF32(v)
}

// TestRunCatchesUnwritten: an unwritten (poisoned) output and a wrong
// element fail their cases, naming the output; the other ops still pass; a
// device without Stepper reports those ops unsupported, not failed.
func TestRunCatchesUnwritten(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true, Threads: 2})
	bad := badDevice{cpu.New(device.Options{Fused: true, Threads: 2})}
	n := 0
	for i, c := range Cases() {
		if c.DType != tensor.F32 {
			continue
		}
		r := Run(bad, ref, c, uint64(i))
		switch c.Contract.Op {
		case "LayerNorm":
			if r.Pass || !strings.Contains(r.Error, "rstd") {
				t.Errorf("%s: %+v, want a failure naming rstd", c.Name, r)
			}
		case "Matmul":
			if r.Pass || !strings.Contains(r.Error, "out") {
				t.Errorf("%s: %+v, want a failure naming out", c.Name, r)
			}
		case "CrossEntropyScaled", "StepUpdate", "AdamWState":
			if !r.Pass || !r.Unsupported {
				t.Errorf("%s: %+v, want unsupported", c.Name, r)
			}
		default:
			if !r.Pass {
				t.Errorf("%s: %+v", c.Name, r)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("only %d passing f32 cases", n)
	}
}

// TestEveryOpChecksItsContract: on the CPU device, every op with any one
// argument one element too long, or a required one nil, records an error
// wrapping ErrShape (no panic, nothing written past the tensor). GradNorm
// and StepUpdate take their sizes from their tensors: any length is theirs.
func TestEveryOpChecksItsContract(t *testing.T) {
	d := cpu.New(device.Options{Fused: true, Threads: 2})
	for i, c := range Cases() {
		if c.DType != tensor.F32 {
			continue
		}
		host, err := inputs(c, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for j, p := range c.Contract.Params {
			if p.Role == device.State {
				s := c.Sizes
				st := d.AttentionState(c.DType, s[0], s[1], s[2], s[3])
				host[j] = tensor.New(st.DType, st.Shape...)
			}
		}
		for j, p := range c.Contract.Params {
			for _, long := range []bool{true, false} {
				if host[j] == nil || (long && (p.Numel == nil || c.Contract == &device.Ops.GradNorm || c.Contract == &device.Ops.StepUpdate)) || (!long && p.Opt) {
					continue
				}
				bad := append([]*tensor.Tensor(nil), host...)
				bad[j] = nil
				if long {
					bad[j] = tensor.New(host[j].DType, host[j].Numel()+1)
				}
				_, err := c.Call(d, bad)
				if err := errors.Join(err, d.Sync()); !errors.Is(err, tensor.ErrShape) {
					t.Errorf("%s with a long (%v) or nil %s: %v", c.Name, long, p.Name, err)
				}
			}
		}
	}
}

// A mutation breaks one output of an op as a wrong kernel would; it
// reports false when it leaves the values as they were (nothing to catch:
// a 2% error of zeros, the transpose of a single row).
type mutation struct {
	name string
	f    func(v []float32, cols int)
}

var mutations = []mutation{
	{"2% error", func(v []float32, _ int) {
		for i := range v {
			v[i] *= 1.02
		}
	}},
	// rows × cols read as cols × rows; a vector reversed
	{"transposed", func(v []float32, cols int) {
		rows := len(v) / cols
		if cols == 1 || rows == 1 {
			slices.Reverse(v)
			return
		}
		src := slices.Clone(v)
		for r := range rows {
			for c := range cols {
				v[c*rows+r] = src[r*cols+c]
			}
		}
	}},
	// every row takes the next one's values (the last keeps its own)
	{"off-by-one row", func(v []float32, cols int) { copy(v, v[cols:]) }},
	{"NaN", func(v []float32, _ int) { v[len(v)/2] = float32(math.NaN()) }},
}

// cols is the row width of an output of n elements: the largest of the
// case's sizes that divides n into more than one row, 1 (a vector) if
// none does.
func cols(c Case, n int) int {
	w := 1
	for _, s := range c.Sizes {
		if s > 1 && s < n && n%s == 0 {
			w = max(w, s)
		}
	}
	return w
}

// mutate returns c with its call followed by m applied to output i (or to
// the scalar results when i < 0), on the device: a copy of the op that is
// wrong in one way. It records in applied whether m changed anything.
func mutate(c Case, i int, m mutation, applied *bool) Case {
	call := c.Call
	c.Call = func(d device.Device, ts []*tensor.Tensor) ([]float32, error) {
		sc, err := call(d, ts)
		if err != nil {
			return sc, err
		}
		if i < 0 {
			v := slices.Clone(sc)
			m.f(v, 1) // the results are a vector
			*applied = fmt.Sprint(v) != fmt.Sprint(sc)
			return v, nil
		}
		h := tensor.New(ts[i].DType, ts[i].Shape...)
		d.Download(h, ts[i])
		if err := d.Sync(); err != nil {
			return nil, err
		}
		before := string(h.Raw())
		v := h.ToF32()
		m.f(v, cols(c, len(v)))
		if err := h.SetF32(v); err != nil {
			return nil, err
		}
		*applied = string(h.Raw()) != before
		d.Upload(ts[i], h)
		return sc, nil
	}
	return c
}

// TestRunCatches is the negative control of every op at every dtype: each
// mutation (a 2% error, a transposed output, an off-by-one row, a NaN)
// applied to each output of each case must fail the case, and each
// mutation must have been applied (changed something) to every op at
// every dtype it has cases for.
func TestRunCatches(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true, Threads: 1})
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	caught := map[string]bool{} // op dtype mutation
	ops := map[string]bool{}    // op dtype
	for i, c := range Cases() {
		key := c.Contract.Op + " " + c.DType.String()
		ops[key] = true
		var outs []int
		for j, p := range c.Contract.Params {
			// float outputs (an index output is compared exactly already)
			if (p.Role == device.Out || p.Role == device.Acc) && !c.Omit[j] && p.Class != device.I32 {
				outs = append(outs, j)
			}
		}
		if c.Contract == &device.Ops.GradNorm {
			outs = append(outs, -1) // its results
		}
		for _, j := range outs {
			for _, m := range mutations {
				applied := false
				r := run(dev, ref, mutate(c, j, m, &applied), c, uint64(i))
				if !applied {
					continue
				}
				out := "result"
				if j >= 0 {
					out = c.Contract.Params[j].Name
				}
				if r.Pass {
					t.Errorf("%s: %s of %s passed (max relative error %.3g)", c.Name, m.name, out, r.MaxRelErr)
				}
				caught[key+" "+m.name] = true
			}
		}
	}
	for key := range ops {
		for _, m := range mutations {
			if !caught[key+" "+m.name] {
				t.Errorf("%s: no case where %s changed an output", key, m.name)
			}
		}
	}
}

// TestIssueMutations: the mutations that passed the former tolerances
// fail now: the bf16 and f16 Attention output times 1.02, and 0.45 added
// to every element of LayerNormBackward's dinp at C = 1, applied to a copy
// of the op in every such case; the unmutated cases pass.
func TestIssueMutations(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true, Threads: 1})
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	scale := mutation{"×1.02", func(v []float32, _ int) {
		for i := range v {
			v[i] *= 1.02
		}
	}}
	shift := mutation{"+0.45", func(v []float32, _ int) {
		for i := range v {
			v[i] += 0.45
		}
	}}
	n := map[string]int{}
	for i, c := range Cases() {
		var m mutation
		switch {
		case c.DType == tensor.F32:
			continue
		case c.Contract == &device.Ops.Attention:
			m = scale
		case c.Contract == &device.Ops.LayerNormBackward && c.Sizes[1] == 1:
			m = shift
		default:
			continue
		}
		if r := Run(dev, ref, c, uint64(i)); !r.Pass {
			t.Fatalf("%s unmutated: %+v", c.Name, r)
		}
		applied := false
		r := run(dev, ref, mutate(c, 0, m, &applied), c, uint64(i))
		if !applied || r.Pass {
			t.Errorf("%s with %s on %s: applied %v, %+v", c.Name, m.name, c.Contract.Params[0].Name, applied, r)
			continue
		}
		t.Logf("%s %s: %s", c.Name, m.name, r.Error)
		n[c.Contract.Op+" "+c.DType.String()]++
	}
	for _, k := range []string{"Attention bf16", "Attention f16", "LayerNormBackward bf16", "LayerNormBackward f16"} {
		if n[k] == 0 {
			t.Errorf("no %s case mutated", k)
		}
	}
}

// widened is c with every float argument in f32, but those whose class
// fixes their dtype (device.Class.Fixed: AdamWBF16's bf16 moments): the
// op as a kernel that takes the 16-bit inputs, computes in fp32 and rounds
// each output once.
func widened(c Case, host []*tensor.Tensor) (Case, []*tensor.Tensor) {
	w := c
	w.DType, w.DTypes = tensor.F32, map[int]tensor.DType{}
	hw := make([]*tensor.Tensor, len(host))
	for i, h := range host {
		if _, fixed := c.Contract.Params[i].Class.Fixed(); h == nil || fixed || !h.DType.Float() {
			hw[i] = h
			continue
		}
		hw[i] = tensor.New(tensor.F32, h.Shape...)
		_ = hw[i].SetF32(h.ToF32())
	}
	if c.Contract == &device.Ops.ResidualLayerNorm {
		// Its contract normalises the residual as stored (res, an output
		// in its dtype): the fp32 kernel rounds res once, then normalises
		// those values.
		resDT, N, C := c.DTypeOf(0), c.Sizes[0], c.Sizes[1]
		w.Call = func(d device.Device, t []*tensor.Tensor) ([]float32, error) {
			d.Add(t[0], t[4], t[5], N*C)
			h := tensor.New(tensor.F32, t[0].Shape...)
			d.Download(h, t[0])
			if err := d.Sync(); err != nil {
				return nil, err
			}
			r := tensor.New(resDT, h.Shape...)
			if err := r.SetF32(h.ToF32()); err != nil {
				return nil, err
			}
			if err := h.SetF32(r.ToF32()); err != nil {
				return nil, err
			}
			d.Upload(t[0], h)
			d.LayerNorm(t[1], t[2], t[3], t[0], t[6], t[7], N, C)
			return nil, nil
		}
	}
	return w, hw
}

// TestTolerancesAdmitFP32Kernels: the 16-bit tolerances pass a device that
// computes every op in fp32 from the same 16-bit inputs (sums in another
// order than the reference's 16-bit path, no rounding of intermediates,
// attention's p unrounded) and rounds each output to its dtype once, as
// the GPU kernels do: the tolerances are not tuned to the CPU's own
// rounding steps.
func TestTolerancesAdmitFP32Kernels(t *testing.T) {
	ref := cpu.New(device.Options{Fused: true, Threads: 1})
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	n := 0
	for i, c := range Cases() {
		if c.DType == tensor.F32 || intOutput(c) { // chosen ids (SampleHead) have no rounding to admit
			continue
		}
		host, err := inputs(c, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		want, wantS, err := onDevice(ref, c, host)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		w, hw := widened(c, host)
		got32, gotS, err := onDevice(dev, w, hw)
		if err != nil {
			t.Fatalf("%s widened: %v", c.Name, err)
		}
		got := make([]*tensor.Tensor, len(got32))
		for j, g := range got32 {
			if g == nil {
				continue
			}
			got[j] = tensor.New(c.DTypeOf(j), g.Shape...)
			if err := got[j].SetF32(g.ToF32()); err != nil {
				t.Fatal(err)
			}
		}
		if r := judge(Result{Case: c.Name}, c, host, got, gotS, want, wantS); !r.Pass {
			t.Errorf("%s: fp32 with one rounding fails: %s", c.Name, r.Error)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("only %d 16-bit cases", n)
	}
}

// intOutput reports a case with an I32 output or accumulator.
func intOutput(c Case) bool {
	for i, p := range c.Contract.Params {
		if (p.Role == device.Out || p.Role == device.Acc) && c.DTypeOf(i) == tensor.I32 {
			return true
		}
	}
	return false
}
