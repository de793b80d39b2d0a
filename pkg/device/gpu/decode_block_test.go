package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// TestLaunchDecodeBlock (any machine, launches recorded): DecodeBlock
// launches decode_layer alone where CanDecodeBlock allows it, its grid a
// whole number of blocks an SM, and the block's ops one by one (no
// decode_layer) where it refuses, saying why: more rows than DL_ROWS, rows
// that are not whole 16-byte vectors, heads above decMaxHead (where no form
// runs: device.ErrUnsupported), the decomposed device. DLPerSMEnv caps the
// grid's blocks an SM.
func TestLaunchDecodeBlock(t *testing.T) {
	var got []string
	launchHook = func(kernel string, dt tensor.DType, args []any) { got = append(got, kernel) }
	defer func() { launchHook = nil }()
	weights := func(dt tensor.DType, C int) device.BlockWeights {
		return device.BlockWeights{LN1W: dev(dt, C), LN1B: dev(dt, C), QKVW: dev(dt, 3*C, C), QKVB: dev(dt, 3*C),
			ProjW: dev(dt, C, C), ProjB: dev(dt, C), LN2W: dev(dt, C), LN2B: dev(dt, C), FCW: dev(dt, 4*C, C),
			FCB: dev(dt, 4*C), FCProjW: dev(dt, C, 4*C), FCProjB: dev(dt, C)}
	}
	for _, c := range []struct {
		name        string
		fused       bool
		env         string
		dt          tensor.DType
		N, C, NH, S int
		why         string // "": decode_layer runs
	}{
		{"gpt2-124M B1", true, "", tensor.BF16, 1, 768, 12, 1024, ""},
		{"8 rows fp32", true, "", tensor.F32, 8, 128, 4, 64, ""},
		{"9 rows", true, "", tensor.BF16, 9, 64, 2, 40, "rows"},
		{"odd width", true, "", tensor.BF16, 1, 100, 4, 40, "16-byte"},
		{"wide heads", true, "", tensor.F32, 1, 1024, 2, 40, "heads"},
		{"decomposed", false, "", tensor.BF16, 1, 64, 2, 40, "unfused"},
		{"one block an SM", true, "1", tensor.BF16, 1, 64, 2, 40, ""},
	} {
		t.Setenv(DLPerSMEnv, c.env)
		d := &Device{fused: c.fused, flashV2: true}
		w := weights(c.dt, c.C)
		err := d.CanDecodeBlock(c.dt, w, c.N, c.C, c.NH, c.S)
		if (err == nil) != (c.why == "") || (err != nil && !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%s: CanDecodeBlock %v, want %q", c.name, err, c.why)
		}
		hs := c.C / c.NH
		got = nil
		d.err = nil
		d.DecodeBlock(dev(tensor.F32, c.N, c.C), dev(c.dt, c.N, c.NH, c.S, hs), dev(c.dt, c.N, c.NH, c.S, hs), dev(tensor.I32, c.N),
			w, c.N, c.C, c.NH, c.S)
		layer := strings.Join(got, " ") == "decode_layer"
		if layer != (c.why == "") {
			t.Errorf("%s: launched %v", c.name, got)
		}
		if c.why == "heads" { // attention_decode holds no such head either
			if !errors.Is(d.err, device.ErrUnsupported) {
				t.Errorf("%s: %v, want device.ErrUnsupported", c.name, d.err)
			}
			continue
		}
		if d.err != nil {
			t.Errorf("%s: %v", c.name, d.err)
		}
		if !layer && len(got) < 8 {
			t.Errorf("%s: the block's ops one by one launched only %v", c.name, got)
		}
	}
	for env, want := range map[string]int{"": 132 * dlPerSM, "1": 132, "2": 264, "9": 132 * dlPerSM, "x": 132 * dlPerSM} {
		t.Setenv(DLPerSMEnv, env)
		if g := (&Device{fused: true}).dlGrid(tensor.BF16, 1, 768); g != want {
			t.Errorf("%s=%q: decode_layer's grid %d, want %d (132 SMs without a context)", DLPerSMEnv, env, g, want)
		}
	}
}
