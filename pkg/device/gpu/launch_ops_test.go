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
				d.AttentionBackward(dev(h, B, T, 3*C), dev(h, B, T, C), dev(h, B, T, 3*C), dev(h, B, T, C), dev(h, B, NH, T, T), B, T, C, NH)
			}, "attn_softmax_backward", "attn_bwd_rowsum attn_bwd_sub attn_bwd_mask attn_bwd_scale"},
			{"Encoder", func(d *Device) {
				d.Encoder(dev(F, B, T, C), dev(h, V, C), dev(h, T+1, C), dev(tensor.I32, B, T), B, T, C)
			}, "encoder_forward", "encoder_gather_tokens encoder_gather_positions encoder_add_positions"},
			{"EncoderBackward", func(d *Device) { // V 50: one sort pass
				d.EncoderBackward(dev(F, V, C), dev(F, T+1, C), dev(h, B, T, C), dev(tensor.I32, B, T), B, T, C)
			}, "encoder_sort_count encoder_sort_pass encoder_backward encoder_backward_fixup", "encoder_sum_positions add_f32 encoder_sort_count encoder_sort_pass encoder_backward encoder_backward_fixup add_f32"},
			{"EncoderBackward/V 50304", func(d *Device) { // two sort passes
				d.EncoderBackward(dev(F, 50304, C), dev(F, T+1, C), dev(h, B, T, C), dev(tensor.I32, B, T), B, T, C)
			}, "encoder_sort_count encoder_sort_pass encoder_sort_pass encoder_backward encoder_backward_fixup", "encoder_sum_positions add_f32 encoder_sort_count encoder_sort_pass encoder_sort_pass encoder_backward encoder_backward_fixup add_f32"},
			{"CrossEntropy", func(d *Device) {
				d.CrossEntropy(dev(F, N), dev(h, N, V), dev(tensor.I32, N), N, V, 0.5)
			}, "crossentropy_fused_l3", "ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad"},
			{"CrossEntropy/no grad", func(d *Device) {
				d.CrossEntropy(dev(F, N), dev(h, N, V), dev(tensor.I32, N), N, V, 0)
			}, "crossentropy_fused_l3", "ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll"},
			{"AdamWBF16", func(d *Device) { // one form: bf16 moments have no decomposed baseline
				l := &tensor.Layout{}
				l.Add("w", true, N, C)
				bf := tensor.BF16
				d.AdamWBF16(dev(F, N*C), dev(h, N*C), dev(F, N*C), dev(bf, N*C), dev(bf, N*C), l, device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Step: 2, Seed: 9}, nil)
				d.AdamWBF16(dev(F, N*C), nil, dev(F, N*C), dev(bf, N*C), dev(bf, N*C), l, device.AdamW{Beta1: 0.9, Beta2: 0.95}, dev(F, device.StateLen))
			}, "adamw_bf16m adamw_bf16m", "adamw_bf16m adamw_bf16m"},
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

// TestLaunchFlash: fused 16-bit attention at hs 32, 64 and 128 runs the
// flash kernels (argument lists checked against the compute_80 PTX; the
// forward of variant 2, flash_fwd2_hsN, with flashV2 set) with a
// (B,NH,T) F32 log-sum-exp state; the decomposed form, fp32, Config.NoFlash
// and other head sizes keep the cuBLAS path and the probabilities; a state
// of the wrong shape, B·NH over the grid limit and a misaligned pointer are
// errors naming the op and the shape.
func TestLaunchFlash(t *testing.T) {
	sigs := signatures(t)
	F := tensor.F32
	const B, T, NH = 2, 17, 3
	for _, h := range []tensor.DType{tensor.BF16, tensor.F16} {
		for _, hs := range []int{32, 64, 128} {
			C := NH * hs
			suf := fmt.Sprintf("hs%d", hs)
			name := fmt.Sprintf("flash %s hs%d", h, hs)
			got, err := hooked(t, true, func(d *Device) {
				if st := d.AttentionState(h, B, T, C, NH); st.DType != F || fmt.Sprint(st.Shape) != fmt.Sprint([]int{B, NH, T}) {
					t.Errorf("%s: AttentionState = %v %v, want f32 [%d %d %d]", name, st.DType, st.Shape, B, NH, T)
				}
				d.Attention(dev(h, B, T, C), dev(F, B, NH, T), dev(h, B, T, 3*C), B, T, C, NH)
			})
			if err != nil {
				t.Fatalf("%s forward: %v", name, err)
			}
			if seq := strings.Join(checkSigs(t, name, sigs, got), " "); seq != "flash_fwd_"+suf {
				t.Errorf("%s forward: launches %q", name, seq)
			}
			// variant 2 (flashV2, the default where built): flash_fwd2_hsN, same arguments
			got, err = hooked(t, true, func(d *Device) {
				d.flashV2 = true
				if k, rows, threads := d.flashFwd(h, hs); k != "flash_fwd2_"+suf || rows != 128 || threads != 256 {
					t.Errorf("%s v2: flashFwd = %s %d rows %d threads, want flash_fwd2_%s 128 256", name, k, rows, threads, suf)
				}
				d.Attention(dev(h, B, T, C), dev(F, B, NH, T), dev(h, B, T, 3*C), B, T, C, NH)
			})
			if err != nil {
				t.Fatalf("%s forward v2: %v", name, err)
			}
			if seq := strings.Join(checkSigs(t, name+" v2", sigs, got), " "); seq != "flash_fwd2_"+suf {
				t.Errorf("%s forward v2: launches %q", name, seq)
			}
			got, err = hooked(t, true, func(d *Device) {
				d.AttentionBackward(dev(h, B, T, 3*C), dev(h, B, T, C), dev(h, B, T, 3*C), dev(h, B, T, C), dev(F, B, NH, T), B, T, C, NH)
			})
			if err != nil {
				t.Fatalf("%s backward: %v", name, err)
			}
			if seq := strings.Join(checkSigs(t, name, sigs, got), " "); seq != "flash_bwd_dot flash_bwd_"+suf+" flash_bwd_dq" {
				t.Errorf("%s backward: launches %q", name, seq)
			}
			// variant 2's backward (flashV2): flash_bwd2_dot (dd),
			// flash_bwd2kv_hsN, flash_bwd2q_hsN; no memset, no scratch
			got, err = hooked(t, true, func(d *Device) {
				d.flashV2 = true
				if !d.flashBwd2Built(h, hs) {
					t.Errorf("%s v2: flashBwd2Built false under the launch hook", name)
				}
				d.AttentionBackward(dev(h, B, T, 3*C), dev(h, B, T, C), dev(h, B, T, 3*C), dev(h, B, T, C), dev(F, B, NH, T), B, T, C, NH)
			})
			if err != nil {
				t.Fatalf("%s backward v2: %v", name, err)
			}
			if seq := strings.Join(checkSigs(t, name+" v2", sigs, got), " "); seq != "flash_bwd2_dot flash_bwd2kv_"+suf+" flash_bwd2q_"+suf {
				t.Errorf("%s backward v2: launches %q", name, seq)
			}
			// grid: ceil(T/64) tiles × B·NH
			// the decomposed form keeps the probabilities
			_, err = hooked(t, false, func(d *Device) {
				if st := d.AttentionState(h, B, T, C, NH); st.DType != h || len(st.Shape) != 4 {
					t.Errorf("%s decomposed: AttentionState = %v %v, want the probabilities", name, st.DType, st.Shape)
				}
				d.Attention(dev(h, B, T, C), dev(F, B, NH, T), dev(h, B, T, 3*C), B, T, C, NH)
			})
			if err == nil || !strings.Contains(err.Error(), "saved state") {
				t.Errorf("%s decomposed with an lse state: error %v, want one naming the saved state", name, err)
			}
		}
	}
	// fp32, an unsupported head size and NoFlash: the probabilities.
	for _, c := range []struct {
		name    string
		dt      tensor.DType
		C       int
		noFlash bool
	}{{"f32 hs64", F, NH * 64, false}, {"bf16 hs48", tensor.BF16, NH * 48, false}, {"bf16 hs64 NoFlash", tensor.BF16, NH * 64, true}} {
		_, err := hooked(t, true, func(d *Device) {
			d.noFlash = c.noFlash
			if st := d.AttentionState(c.dt, B, T, c.C, NH); st.DType != c.dt || len(st.Shape) != 4 {
				t.Errorf("%s: AttentionState = %v %v, want the probabilities", c.name, st.DType, st.Shape)
			}
		})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// B·NH beyond gridDim.y takes the cuBLAS path (the probabilities); a
	// misaligned qkv is an error naming the shape.
	_, err := hooked(t, true, func(d *Device) {
		if st := d.AttentionState(tensor.BF16, 70000, 1, 64, 1); len(st.Shape) != 4 {
			t.Errorf("B·NH = 70000: AttentionState %v %v, want the probabilities (beyond gridDim.y)", st.DType, st.Shape)
		}
		d.Attention(dev(tensor.BF16, 70000, 1, 64), dev(tensor.BF16, 70000, 1, 1, 1), dev(tensor.BF16, 70000, 1, 192), 70000, 1, 64, 1)
	})
	if err != nil {
		t.Errorf("B·NH = 70000 on the cuBLAS path: %v", err)
	}
	_, err = hooked(t, true, func(d *Device) {
		q := dev(tensor.BF16, 1, 4, 3*64)
		q = tensor.OnDevice(tensor.BF16, uintptr(q.Dev)+2, 1, 4, 3*64)
		d.Attention(dev(tensor.BF16, 1, 4, 64), dev(F, 1, 1, 4), q, 1, 4, 64, 1)
	})
	if err == nil || !strings.Contains(err.Error(), "16-byte aligned") {
		t.Errorf("misaligned qkv: error %v, want an alignment error", err)
	}
	// a nil out in the flash backward
	_, err = hooked(t, true, func(d *Device) {
		d.AttentionBackward(dev(tensor.BF16, 1, 4, 192), dev(tensor.BF16, 1, 4, 64), dev(tensor.BF16, 1, 4, 192), nil, dev(F, 1, 1, 4), 1, 4, 64, 1)
	})
	if err == nil || !strings.Contains(err.Error(), "out") {
		t.Errorf("nil out: error %v, want one naming out", err)
	}
}
