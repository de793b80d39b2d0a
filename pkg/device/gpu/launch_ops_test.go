package gpu

// launch_ops_test.go: launch_test.go's PTX-signature check for the ops of
// matmul.go, attention.go, encoder.go and crossentropy.go (and the kernel
// sequences their comments promise), on any machine: a context-less device
// with launchHook recording, cuBLAS and cuBLASLt calls skipped.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// checkSigs checks every recorded launch against the PTX signatures and
// returns the kernel names in order.
func checkSigs(t *testing.T, name string, sigs map[string][]string, got []launch) []string {
	t.Helper()
	var names []string
	for _, l := range got {
		names = append(names, l.kernel)
		key := l.kernel + "/" + l.dt.String()
		params, ok := sigs[key]
		if !ok {
			t.Errorf("%s: launches %s, which is not built", name, key)
			continue
		}
		if len(params) != len(l.args) {
			t.Errorf("%s: %s takes %d parameters %v, launched with %d", name, key, len(params), params, len(l.args))
			continue
		}
		for i, a := range l.args {
			if !argKind(a, params[i]) {
				t.Errorf("%s: %s parameter %d is %s, launched with %T", name, key, i, params[i], a)
			}
		}
	}
	return names
}

func TestLaunchSignaturesOps(t *testing.T) {
	sigs := signatures(t)
	F := tensor.F32
	for _, h := range floatDTypes {
		const N, C, OC, B, T, NH, V = 34, 96, 40, 2, 17, 4, 50
		cases := []struct {
			name  string
			call  func(d *Device)
			fused string // kernel sequence of the fused form ("" = not checked)
			plain string // and of the decomposed form
		}{
			{"Matmul+bias", func(d *Device) {
				d.Matmul(dev(h, N, OC), nil, dev(h, N, C), dev(h, OC, C), dev(h, OC), N, C, OC, device.None)
			}, "bias_add", "bias_add"},
			{"Matmul+GELU", func(d *Device) {
				d.Matmul(dev(h, N, OC), dev(h, N, OC), dev(h, N, C), dev(h, OC, C), dev(h, OC), N, C, OC, device.GELU)
			}, "bias_add gelu_forward", "bias_add" + strings.Repeat(" gelu_forward_pass", geluForwardPasses)},
			{"MatmulBackward", func(d *Device) {
				d.MatmulBackward(dev(h, N, C), dev(F, OC, C), dev(F, OC), dev(h, N, OC), dev(h, N, C), dev(h, OC, C), N, C, OC)
			}, "matmul_bias_grad", "matmul_bias_grad"},
			{"MatmulBackward/dout f32", func(d *Device) {
				d.MatmulBackward(dev(h, N, C), dev(F, OC, C), dev(F, OC), dev(F, N, OC), dev(h, N, C), dev(h, OC, C), N, C, OC)
			}, "", ""},
			{"Attention", func(d *Device) {
				d.Attention(dev(h, B, T, C), dev(h, B, NH, T, T), dev(h, B, T, 3*C), B, T, C, NH)
			}, "attn_softmax_forward", "attn_scale attn_mask attn_rowmax attn_expsub attn_rowsum attn_divide"},
			{"AttentionBackward", func(d *Device) {
				d.AttentionBackward(dev(h, B, T, 3*C), dev(h, B, T, C), dev(h, B, T, 3*C), dev(h, B, NH, T, T), B, T, C, NH)
			}, "attn_softmax_backward", "attn_bwd_rowsum attn_bwd_sub attn_bwd_mask attn_bwd_scale"},
			{"Encoder", func(d *Device) {
				d.Encoder(dev(F, B, T, C), dev(h, V, C), dev(h, T+1, C), dev(tensor.I32, B, T), B, T, C)
			}, "encoder_forward", "encoder_gather_tokens encoder_gather_positions encoder_add_positions"},
			{"EncoderBackward", func(d *Device) {
				d.EncoderBackward(dev(F, V, C), dev(F, T+1, C), dev(F, B, T, C), dev(tensor.I32, B, T), B, T, C)
			}, "encoder_backward_positions encoder_backward_tokens", "encoder_sum_positions add_f32 encoder_backward_tokens add_f32"},
			{"CrossEntropy", func(d *Device) {
				d.CrossEntropy(dev(F, N), dev(h, N, V), dev(tensor.I32, N), N, V, 0.5)
			}, "crossentropy_fused_l2", "ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad"},
			{"CrossEntropy/no grad", func(d *Device) {
				d.CrossEntropy(dev(F, N), dev(h, N, V), dev(tensor.I32, N), N, V, 0)
			}, "crossentropy_fused_l2", "ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll"},
			{"CrossEntropy/legacy", func(d *Device) {
				d.legacy = true
				d.CrossEntropy(dev(F, N), dev(h, N, V), dev(tensor.I32, N), N, V, 0.5)
			}, "crossentropy_fused", "ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad"},
		}
		for _, c := range cases {
			for _, fused := range forms {
				got, err := hooked(t, fused, c.call)
				name := fmt.Sprintf("%s %s %s", c.name, h, formName(fused))
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				seq := strings.Join(checkSigs(t, name, sigs, got), " ")
				want := c.plain
				if fused {
					want = c.fused
				}
				if want != "" && seq != want {
					t.Errorf("%s: launches %q, want %q", name, seq, want)
				}
			}
		}
	}
}
