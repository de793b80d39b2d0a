package gpu

// launch_test.go: runs on any machine, GPU or not. Ops are driven on a
// Device with no context while launchHook records their launches (the
// conformance cases in selftest_test.go, the sequences here and in
// launch_ops_test.go), and every launch is checked against the kernel's
// signature in the embedded PTX: the kernel
// exists for the dtype, the number of arguments matches, and each Go
// argument has the parameter's width and kind (.u64 a pointer or 64-bit
// integer, .u32 an int, .f32 a float32). A mismatch here would make a
// kernel read garbage on the GPU.

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ptxParams returns the parameter types (".u64", ".u32", ".f32", ...) of
// every entry of a PTX module.
func ptxParams(ptx []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	entry := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, ".visible .entry "):
			entry = strings.TrimSuffix(strings.TrimPrefix(line, ".visible .entry "), "(")
			out[entry] = []string{}
		case entry != "" && strings.HasPrefix(line, ".param "):
			out[entry] = append(out[entry], strings.Fields(line)[1])
		case entry != "" && strings.HasPrefix(line, ")"):
			entry = ""
		}
	}
	return out
}

// signatures returns the parameter types of every kernel variant, keyed
// "name/dtype".
func signatures(t *testing.T) map[string][]string {
	t.Helper()
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	sigs := map[string][]string{}
	done := map[string]bool{}
	for _, v := range vs {
		if done[v.PTXFile()] {
			continue
		}
		done[v.PTXFile()] = true
		ptx, err := v.PTX()
		if err != nil {
			t.Fatal(err)
		}
		for name, params := range ptxParams(ptx) {
			sigs[name+"/"+v.DType.String()] = params
		}
	}
	return sigs
}

// argKind says whether a Go launch argument fits a PTX parameter type.
func argKind(a any, param string) bool {
	switch a.(type) {
	case cuda.DevicePtr, int64, uint64:
		return param == ".u64" || param == ".s64" || param == ".b64"
	case int, int32, uint32:
		return param == ".u32" || param == ".s32" || param == ".b32"
	case float32:
		return param == ".f32"
	case float64:
		return param == ".f64"
	}
	return false
}

// launch is one recorded launch.
type launch struct {
	kernel string
	dt     tensor.DType
	args   []any
}

// hooked runs fn on a context-less device of the given form with
// launchHook recording, and returns the launches and the recorded error.
func hooked(t *testing.T, fused bool, fn func(d *Device)) ([]launch, error) {
	t.Helper()
	var got []launch
	launchHook = func(kernel string, dt tensor.DType, args []any) {
		got = append(got, launch{kernel, dt, append([]any(nil), args...)})
	}
	defer func() { launchHook = nil }()
	d := &Device{fused: fused}
	fn(d)
	return got, d.err
}

// fakeAddr hands out distinct, 256-byte aligned fake device addresses.
var fakeAddr uintptr = 1 << 32

// dev returns a device tensor description at a fake address.
func dev(dt tensor.DType, shape ...int) *tensor.Tensor {
	fakeAddr += 1 << 28
	return tensor.OnDevice(dt, fakeAddr, shape...)
}

// TestLaunchSequences: the forms launch what their comments say.
func TestLaunchSequences(t *testing.T) {
	const N, C = 5, 64
	seq := func(fused bool, fn func(d *Device)) string {
		got, err := hooked(t, fused, fn)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range got {
			names = append(names, l.kernel)
		}
		return strings.Join(names, " ")
	}
	ln := func(d *Device) {
		d.LayerNorm(dev(tensor.BF16, N, C), dev(tensor.F32, N), dev(tensor.F32, N), dev(tensor.F32, N, C), dev(tensor.BF16, C), dev(tensor.BF16, C), N, C)
	}
	if s := seq(true, ln); s != "layernorm_forward_rf32" {
		t.Errorf("fused layernorm: %s", s)
	}
	if s := seq(false, ln); s != "layernorm_mean_rf32 layernorm_rstd_rf32 layernorm_normalise_rf32 layernorm_affine" {
		t.Errorf("decomposed layernorm: %s", s)
	}
	bw := func(d *Device) {
		d.LayerNormBackward(dev(tensor.F32, N, C), dev(tensor.F32, C), dev(tensor.F32, C), dev(tensor.BF16, N, C), dev(tensor.F32, N, C), dev(tensor.BF16, C), dev(tensor.F32, N), dev(tensor.F32, N), N, C)
	}
	if s := seq(true, bw); s != "layernorm_backward_rf32 layernorm_reduce" {
		t.Errorf("fused layernorm backward: %s", s)
	}
	if s := seq(false, bw); strings.Count(s, " ")+1 != 11 || !strings.HasSuffix(s, "layernorm_dinp_rf32") {
		t.Errorf("decomposed layernorm backward (9 passes and 2 reductions): %s", s)
	}
	gb := func(d *Device) { d.GELUBackward(dev(tensor.F16, 100), dev(tensor.F16, 100), dev(tensor.F16, 100), 100) }
	if s := seq(false, gb); strings.Count(s, "gelu_backward_pass") != 9 {
		t.Errorf("decomposed gelu backward: %s", s)
	}
	if s := seq(true, gb); s != "gelu_backward2" {
		t.Errorf("fused gelu backward: %s", s)
	}
	layout := &tensor.Layout{}
	layout.Add("w", true, 40000)
	layout.Add("b", false, 10)
	hp := device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 1}
	aw := func(d *Device) {
		n := layout.Total
		d.AdamWStep(dev(tensor.F32, n), dev(tensor.BF16, n), dev(tensor.F32, n), dev(tensor.F32, n), dev(tensor.F32, n), layout, hp)
	}
	if s := seq(true, aw); s != "adamw_fused2" {
		t.Errorf("fused adamw: %s", s)
	}
	// w: decay + 7 steps + store; b: 7 steps + store (GradScale 1: no scaling pass)
	if s := seq(false, aw); strings.Count(s, "adamw_pass") != 15 || strings.Count(s, "adamw_store_work") != 2 {
		t.Errorf("decomposed adamw: %s", s)
	}
}

// TestLaunchUnsupported: dtype combinations the policies never produce
// record device.ErrUnsupported, and bad shapes tensor.ErrShape.
func TestLaunchUnsupported(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(d *Device)
		want error
	}{
		{"layernorm f32 out, bf16 input", func(d *Device) {
			d.LayerNorm(dev(tensor.F32, 2, 4), dev(tensor.F32, 2), dev(tensor.F32, 2), dev(tensor.BF16, 2, 4), dev(tensor.F32, 4), dev(tensor.F32, 4), 2, 4)
		}, device.ErrUnsupported},
		{"layernorm bf16 stats", func(d *Device) {
			d.LayerNorm(dev(tensor.BF16, 2, 4), dev(tensor.BF16, 2), dev(tensor.F32, 2), dev(tensor.BF16, 2, 4), dev(tensor.BF16, 4), dev(tensor.BF16, 4), 2, 4)
		}, device.ErrUnsupported},
		{"layernorm backward bf16 dweight", func(d *Device) {
			d.LayerNormBackward(dev(tensor.F32, 2, 4), dev(tensor.BF16, 4), dev(tensor.F32, 4), dev(tensor.BF16, 2, 4), dev(tensor.F32, 2, 4), dev(tensor.BF16, 4), dev(tensor.F32, 2), dev(tensor.F32, 2), 2, 4)
		}, device.ErrUnsupported},
		{"layernorm wrong size", func(d *Device) {
			d.LayerNorm(dev(tensor.F32, 2, 4), dev(tensor.F32, 3), dev(tensor.F32, 2), dev(tensor.F32, 2, 4), dev(tensor.F32, 4), dev(tensor.F32, 4), 2, 4)
		}, tensor.ErrShape},
		{"gelu mixed", func(d *Device) { d.GELUBackward(dev(tensor.F32, 8), dev(tensor.BF16, 8), dev(tensor.F32, 8), 8) }, device.ErrUnsupported},
		{"gradnorm bf16", func(d *Device) { d.GradNorm(dev(tensor.BF16, 8), 1) }, device.ErrUnsupported},
		{"cast int", func(d *Device) { d.Cast(dev(tensor.F32, 8), dev(tensor.I32, 8)) }, device.ErrUnsupported},
		{"adamw overlap", func(d *Device) {
			l := &tensor.Layout{Segments: []tensor.Segment{{Offset: 0, Shape: tensor.Shape{4}}, {Offset: 2, Shape: tensor.Shape{4}}}, Total: 8}
			d.AdamWStep(dev(tensor.F32, 8), nil, dev(tensor.F32, 8), dev(tensor.F32, 8), dev(tensor.F32, 8), l, device.AdamW{Step: 1})
		}, tensor.ErrShape},
	} {
		for _, fused := range forms {
			got, err := hooked(t, fused, c.call)
			if !errors.Is(err, c.want) || len(got) != 0 {
				t.Errorf("%s %s: error %v (want %v), %d launches", c.name, formName(fused), err, c.want, len(got))
			}
		}
	}
}

// TestAdamChunks: the chunk table covers exactly the segments, in order,
// with chunks of at most adamChunk elements and the decay flags.
func TestAdamChunks(t *testing.T) {
	layout := &tensor.Layout{}
	layout.Add("a", true, 3*adamChunk+5)
	layout.Add("empty", true, 0)
	layout.Add("b", false, 1)
	layout.Add("c", true, adamChunk)
	spans, _, err := device.AdamWArgs(&device.Ops.AdamWState, layout, device.AdamW{})
	if err != nil {
		t.Fatal(err)
	}
	table := adamChunks(spans)
	next, total := 0, 0
	for k := 0; k < len(table); k += 2 {
		lo, n, dec := int(table[k]), int(table[k+1]&0x7fffffff), table[k+1]>>31 == 1
		if lo != next || n < 1 || n > adamChunk {
			t.Fatalf("chunk %d: [%d,+%d), want start %d", k/2, lo, n, next)
		}
		wantDec := lo < 3*adamChunk+5 || lo >= 3*adamChunk+6
		if dec != wantDec {
			t.Fatalf("chunk at %d: decay %v", lo, dec)
		}
		next, total = lo+n, total+n
	}
	if total != layout.Total || len(table)/2 != 4+1+1 {
		t.Fatalf("%d elements in %d chunks, want %d in 6", total, len(table)/2, layout.Total)
	}
}

// TestVecAndGrids: the alignment flag and the grid sizes.
func TestVecAndGrids(t *testing.T) {
	if vec4(cuda.DevicePtr(256), 4, cuda.DevicePtr(0), 2) != 1 || vec4(cuda.DevicePtr(264), 4) != 0 ||
		vec4(cuda.DevicePtr(264), 2) != 1 || vec4(cuda.DevicePtr(260), 2) != 0 {
		t.Fatal("vec4")
	}
	d := &Device{}
	if g := d.ewGrid(1, 4); g.X != 1 {
		t.Fatalf("ewGrid(1) = %v", g)
	}
	if g := d.ewGrid(1<<30, 1); g.X != 132*64 {
		t.Fatalf("ewGrid(2^30) = %v", g)
	}
}
