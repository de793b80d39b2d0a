package devicetest

import (
	"errors"
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

// TestRunCatches: an unwritten (poisoned) output and a wrong element fail
// their cases, naming the output; the other ops still pass; a device
// without Stepper reports those ops unsupported, not failed.
func TestRunCatches(t *testing.T) {
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
