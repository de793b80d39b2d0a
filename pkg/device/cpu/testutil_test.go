package cpu

// testutil_test.go: helpers shared by the op tests of this package. The nt
// prefix keeps them apart from helpers other test files may add.

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ntDTypes are the float dtypes the ops take.
var ntDTypes = []tensor.DType{tensor.F32, tensor.BF16, tensor.F16}

// ntRowCounts and ntWidths are the row counts N and row widths C (or V) of
// the fused-versus-decomposed parity tests, odd sizes included.
var (
	ntRowCounts = []int{1, 17, 64}
	ntWidths    = []int{1, 7, 768, 1000}
)

// ntRNG returns a deterministic generator for seed.
func ntRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x64727574)) }

// ntNormal returns n standard normal values times scale, plus shift.
func ntNormal(r *rand.Rand, n int, scale, shift float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = r.NormFloat64()*scale + shift
	}
	return v
}

// ntTensor returns a host tensor of dtype dt holding v rounded to dt, and the
// rounded values widened back, which is what the op sees.
func ntTensor(t testing.TB, dt tensor.DType, v []float64, shape ...int) (*tensor.Tensor, []float64) {
	t.Helper()
	if tensor.Shape(shape).Numel() != len(v) {
		t.Fatalf("ntTensor: %d values for shape %v", len(v), tensor.Shape(shape))
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	tt := tensor.New(dt, shape...)
	if err := tt.SetF32(f); err != nil {
		t.Fatal(err)
	}
	return tt, ntF64(tt)
}

// ntTokens returns an I32 tensor of n ids drawn from [0,v).
func ntTokens(t testing.TB, r *rand.Rand, n, v int, shape ...int) *tensor.Tensor {
	t.Helper()
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(v))
	}
	tt, err := tensor.FromI32(ids, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// ntF64 returns t's elements widened to float64.
func ntF64(t *tensor.Tensor) []float64 {
	f := t.ToF32()
	out := make([]float64, len(f))
	for i, x := range f {
		out[i] = float64(x)
	}
	return out
}

// ntPoison fills a float tensor with NaN, so that an element an op forgets
// to write fails every comparison.
func ntPoison(t *tensor.Tensor) {
	nan := make([]float32, t.Numel())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	if err := t.SetF32(nan); err != nil {
		panic(err)
	}
}

// ntClone returns a copy of t with its own memory.
func ntClone(t *tensor.Tensor) *tensor.Tensor {
	c := tensor.New(t.DType, t.Shape...)
	copy(c.Raw(), t.Raw())
	return c
}

// ntSameBits reports whether two tensors hold identical bytes.
func ntSameBits(a, b *tensor.Tensor) bool {
	return a.DType == b.DType && bytes.Equal(a.Raw(), b.Raw())
}

// ntDev returns a CPU device with the given form and thread count.
func ntDev(fused bool, threads int) *Device {
	return New(device.Options{Fused: fused, Threads: threads})
}

// ntForms are the two forms every op is tested in.
var ntForms = []struct {
	name  string
	fused bool
}{{"fused", true}, {"decomposed", false}}

// ntSync fails the test when the device recorded an error.
func ntSync(t testing.TB, d *Device) {
	t.Helper()
	if err := d.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// ntClose fails the test when got and want differ beyond the tolerance of dt
// scaled by scale (tensor.Close, the one tolerance rule).
// Every element must have been written: a NaN left by ntPoison in either
// slice fails, even where both are NaN.
func ntClose(t testing.TB, what string, got, want []float64, dt tensor.DType, scale float64) {
	t.Helper()
	for _, s := range [][]float64{got, want} {
		for i, x := range s {
			if math.IsNaN(x) {
				t.Errorf("%s: element %d is NaN (left unwritten?)", what, i)
				return
			}
		}
	}
	if len(got) == 0 {
		t.Errorf("%s: nothing to compare", what)
		return
	}
	if err := tensor.Close(got, want, dt, scale); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// ntCloseT compares two tensors elementwise, as ntClose does.
func ntCloseT(t testing.TB, what string, got, want *tensor.Tensor, dt tensor.DType, scale float64) {
	t.Helper()
	ntClose(t, what, ntF64(got), ntF64(want), dt, scale)
}

// ntDot returns Σ w·x, the random linear loss of the gradient checks.
func ntDot(w, x []float64) float64 {
	var s float64
	for i := range w {
		s += w[i] * x[i]
	}
	return s
}

// ntFDStep is the central-difference step of the float64 gradient checks:
// truncation error ~h² and cancellation error ~1e-16·|L|/h both stay far
// below the float32 tolerance being tested.
const ntFDStep = 1e-6

// ntFD returns the central-difference gradient of loss with respect to x,
// perturbing each element of x in place and restoring it.
func ntFD(x []float64, loss func() float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		x0 := x[i]
		x[i] = x0 + ntFDStep
		up := loss()
		x[i] = x0 - ntFDStep
		down := loss()
		x[i] = x0
		g[i] = (up - down) / (2 * ntFDStep)
	}
	return g
}

// ntName formats a sub-test name from its parts.
func ntName(parts ...any) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "_"
		}
		s += fmt.Sprint(p)
	}
	return s
}
