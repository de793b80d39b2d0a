package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// TestLaunchDecodeBlock (any machine, launches recorded): DecodeBlock
// launches decode_linear's four phases with attention_decode after the
// first where CanDecodeBlock allows it, each phase's grid its columns'
// blocks, and the block's ops one by one (no decode_linear) where it
// refuses, saying why: more rows than DL_ROWS, rows that are not whole
// 16-byte vectors, heads above decMaxHead (where no form runs:
// device.ErrUnsupported), the decomposed device.
func TestLaunchDecodeBlock(t *testing.T) {
	var got []string
	var phases [][]any // decode_linear's launches: phase, K, OC, ks
	launchHook = func(kernel string, dt tensor.DType, args []any) {
		got = append(got, kernel)
		if kernel == "decode_linear" {
			n := len(args)
			phases = append(phases, []any{args[n-1], args[n-6], args[n-5], args[n-2]})
		}
	}
	defer func() { launchHook = nil }()
	weights := func(dt tensor.DType, C int) device.BlockWeights {
		return device.BlockWeights{LN1W: dev(dt, C), LN1B: dev(dt, C), QKVW: dev(dt, 3*C, C), QKVB: dev(dt, 3*C),
			ProjW: dev(dt, C, C), ProjB: dev(dt, C), LN2W: dev(dt, C), LN2B: dev(dt, C), FCW: dev(dt, 4*C, C),
			FCB: dev(dt, 4*C), FCProjW: dev(dt, C, 4*C), FCProjB: dev(dt, C)}
	}
	for _, c := range []struct {
		name        string
		fused       bool
		dt          tensor.DType
		N, C, NH, S int
		why         string // "": decode_layer runs
	}{
		{"gpt2-124M B1", true, tensor.BF16, 1, 768, 12, 1024, ""},
		{"8 rows fp32", true, tensor.F32, 8, 128, 4, 64, ""},
		{"9 rows", true, tensor.BF16, 9, 64, 2, 40, "rows"},
		{"odd width", true, tensor.BF16, 1, 100, 4, 40, "16-byte"},
		{"wide heads", true, tensor.F32, 1, 1024, 2, 40, "heads"},
		{"decomposed", false, tensor.BF16, 1, 64, 2, 40, "unfused"},
		{"smem", true, tensor.F32, 8, 1536, 12, 40, "shared memory"},
	} {
		d := &Device{fused: c.fused, flashV2: true}
		w := weights(c.dt, c.C)
		err := d.CanDecodeBlock(c.dt, w, c.N, c.C, c.NH, c.S)
		if (err == nil) != (c.why == "") || (err != nil && !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%s: CanDecodeBlock %v, want %q", c.name, err, c.why)
		}
		hs := c.C / c.NH
		got, phases = nil, nil
		d.err = nil
		d.DecodeBlock(dev(tensor.F32, c.N, c.C), dev(c.dt, c.N, c.NH, c.S, hs), dev(c.dt, c.N, c.NH, c.S, hs), dev(tensor.I32, c.N),
			w, c.N, c.C, c.NH, c.S)
		layer := strings.Join(got, " ") == "decode_linear attention_decode decode_linear decode_linear decode_linear"
		if layer != (c.why == "") {
			t.Errorf("%s: launched %v", c.name, got)
		}
		if layer {
			C := c.C
			want := fmt.Sprint([][]any{{dlQKV, C, 3 * C, 1}, {dlProj, C, C, 2}, {dlFC, C, 4 * C, 1}, {dlProj, 4 * C, C, 4}})
			if g := fmt.Sprint(phases); g != want {
				t.Errorf("%s: decode_linear's phases (phase, K, OC, ks) %s, want %s", c.name, g, want)
			}
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
}
