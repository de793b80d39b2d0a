package gpu

import (
	"errors"
	"testing"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// tokenStepAt is a decode step of L layers of C channels over NH heads and
// S positions at fake device addresses: the layers' parameters at one
// stride in one buffer, the caches in one buffer each.
func tokenStepAt(dt tensor.DType, C, NH, S, L int) *device.TokenStep {
	sizes := []int{C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C}
	per := 0
	for _, n := range sizes {
		per += n
	}
	flat := dev(dt, L*per+2*C)
	kv := NH * S * 64
	kb, vb := dev(dt, L*kv), dev(dt, L*kv)
	s := &device.TokenStep{Out: dev(dt, 1, C), X: dev(tensor.F32, 1, C), Pos: dev(tensor.I32, 1), C: C, NH: NH, S: S,
		LnfW: flat.MustView(L*per, C), LnfB: flat.MustView(L*per+C, C)}
	for l := range L {
		var ts []*tensor.Tensor
		off := l * per
		for _, n := range sizes {
			ts = append(ts, flat.MustView(off, n))
			off += n
		}
		s.Layers = append(s.Layers, device.TokenLayer{Ln1W: ts[0], Ln1B: ts[1], QKVW: ts[2], QKVB: ts[3], ProjW: ts[4],
			ProjB: ts[5], Ln2W: ts[6], Ln2B: ts[7], FCW: ts[8], FCB: ts[9], FCProjW: ts[10], FCProjB: ts[11]})
		s.K = append(s.K, kb.MustView(l*kv, 1, NH, S, 64))
		s.V = append(s.V, vb.MustView(l*kv, 1, NH, S, 64))
	}
	return s
}

// TestLaunchDecodeToken: DecodeToken launches decode_token once with the
// PTX's signature, the layers' strides, and a cap on the cached positions
// that leaves every block's shared memory within the device's; TokenReady
// refuses what the kernel does not take, and a bad step is an error, not a
// launch.
func TestLaunchDecodeToken(t *testing.T) {
	sigs := signatures(t)
	const C, NH, S, L = 768, 12, 1024, 3
	t.Setenv(TokenEnv, "on")
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		s := tokenStepAt(dt, C, NH, S, L)
		got, err := hooked(t, true, func(d *Device) {
			if err := d.TokenReady(s); err != nil {
				t.Fatalf("%s: TokenReady: %v", dt, err)
			}
			d.DecodeToken(s)
		})
		if err != nil {
			t.Fatal(err)
		}
		names := checkSigs(t, "DecodeToken", sigs, got)
		if len(names) != 1 || names[0] != kernToken {
			t.Fatalf("%s: launches %v, want [%s]", dt, names, kernToken)
		}
		a := got[0].args
		n := len(a)
		sizes := []any{C, NH, S, L}
		for i, v := range sizes {
			if a[n-8+i] != v {
				t.Errorf("%s: argument %d is %v, want %v", dt, n-8+i, a[n-8+i], v)
			}
		}
		per := 3*C*C + C*C + 8*C*C + 13*C
		if a[n-3] != int64(per) || a[n-2] != int64(NH*S*64) {
			t.Errorf("%s: strides %v %v, want %d %d", dt, a[n-3], a[n-2], per, NH*S*64)
		}
		if a[n-1] != cuda.DevicePtr(0) {
			t.Errorf("%s: a trace (%v) without %s", dt, a[n-1], TokenTraceEnv)
		}
		limit := 227 << 10
		capPos := a[n-4].(int)
		G, NW := tokenGrid(NH, 132)
		if G != 132 || NW != 120 {
			t.Errorf("grid %d, %d workers", G, NW)
		}
		if capPos < 256 || capPos%8 != 0 || tokenHeadSmem(C, S, capPos, 2) > limit || tokenHeadSmem(C, S, capPos+8, 2) <= limit ||
			tokenWorkerSmem(C, NW, 2) > limit {
			t.Errorf("%s: cap %d: head %d, worker %d bytes of %d", dt, capPos, tokenHeadSmem(C, S, capPos, 2), tokenWorkerSmem(C, NW, 2), limit)
		}
	}
	refuse := func(what string, s *device.TokenStep, want error) {
		t.Helper()
		_, err := hooked(t, true, func(d *Device) {
			err := d.TokenReady(s)
			if !errors.Is(err, want) {
				t.Errorf("%s: TokenReady: %v, want %v", what, err, want)
			}
			d.DecodeToken(s)
			if !errors.Is(d.err, want) {
				t.Errorf("%s: DecodeToken: %v, want %v", what, d.err, want)
			}
		})
		_ = err
	}
	refuse("f32", tokenStepAt(tensor.F32, C, NH, S, L), device.ErrUnsupported)
	refuse("head size 32", tokenStepAt(tensor.BF16, 64*12, 24, S, L), device.ErrUnsupported)
	refuse("C 1280", tokenStepAt(tensor.BF16, 1280, 20, S, L), device.ErrUnsupported)
	moved := tokenStepAt(tensor.BF16, C, NH, S, L)
	moved.Layers[1].FCW = dev(tensor.BF16, 4*C*C)
	refuse("a layer elsewhere", moved, device.ErrUnsupported)
	short := tokenStepAt(tensor.BF16, C, NH, S, L)
	short.K = short.K[:2]
	refuse("two caches for three layers", short, tensor.ErrShape)
	noOut := tokenStepAt(tensor.BF16, C, NH, S, L)
	noOut.Out = nil
	refuse("no out", noOut, tensor.ErrShape)
	t.Setenv(TokenEnv, "off")
	_, _ = hooked(t, true, func(d *Device) {
		if d.TokenReady(tokenStepAt(tensor.BF16, C, NH, S, L)) == nil {
			t.Errorf("TokenReady with %s=off: nil", TokenEnv)
		}
	})
	t.Setenv(TokenEnv, "maybe")
	if _, _, err := tokenEnv(); err == nil {
		t.Errorf("%s=maybe: no error", TokenEnv)
	}
}
