package gpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.GradStorer = (*Device)(nil)

// TestLaunchAttentionBackwardStore (any machine, launches hooked):
// AttentionBackwardStore runs variant 2's kernels, atomics and dq pass,
// with their store flag set and no memset, and AttentionBackward the same
// kernels with it clear; variant 1 (no store form) zeroes dqkv with one
// memset of its size and accumulates (the accumulate forms zero no dqkv). Every launch matches the PTX.
func TestLaunchAttentionBackwardStore(t *testing.T) {
	sigs := signatures(t)
	const B, T, NH, hs = 2, 17, 4, 64
	C := NH * hs
	for _, h := range []tensor.DType{tensor.BF16, tensor.F16} {
		for _, c := range []struct {
			name          string
			v2            bool
			seq           string
			flagged       map[string]bool // kernels that take the store flag (last argument)
			memsetOnStore bool
		}{
			{"v2", true, "flash_bwd2_dot flash_bwd2kv_hs64 flash_bwd2q_hs64", map[string]bool{"flash_bwd2kv_hs64": true, "flash_bwd2q_hs64": true}, false},
			{"v1", false, "flash_bwd_dot flash_bwd_hs64 flash_bwd_dq", nil, true},
		} {
			for _, store := range []bool{false, true} {
				var memsets []int // of dqkv (variant 1 also zeroes its dq scratch)
				dqkv := dev(h, B, T, 3*C)
				memsetHook = func(p cuda.DevicePtr, n int) {
					if p == cuda.DevicePtr(dqkv.Dev) {
						memsets = append(memsets, n)
					}
				}
				got, err := hooked(t, true, func(d *Device) {
					d.flashV2 = c.v2
					args := []*tensor.Tensor{dqkv, dev(h, B, T, C), dev(h, B, T, 3*C), dev(h, B, T, C), dev(tensor.F32, B, NH, T)}
					if store {
						d.AttentionBackwardStore(args[0], args[1], args[2], args[3], args[4], B, T, C, NH)
					} else {
						d.AttentionBackward(args[0], args[1], args[2], args[3], args[4], B, T, C, NH)
					}
				})
				memsetHook = nil
				name := fmt.Sprintf("%s %s store=%v", h, c.name, store)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if seq := strings.Join(checkSigs(t, name, sigs, got), " "); seq != c.seq {
					t.Errorf("%s: launches %q, want %q", name, seq, c.seq)
				}
				for _, l := range got {
					if !c.flagged[l.kernel] {
						continue
					}
					want := 0
					if store {
						want = 1
					}
					if f, ok := l.args[len(l.args)-1].(int); !ok || f != want {
						t.Errorf("%s: %s's store flag %v, want %d", name, l.kernel, l.args[len(l.args)-1], want)
					}
				}
				wantMemsets := 0
				if store && c.memsetOnStore {
					wantMemsets = 1
				}
				if len(memsets) != wantMemsets || (wantMemsets == 1 && memsets[0] != dqkv.Bytes()) {
					t.Errorf("%s: memsets %v, want %d of %d bytes", name, memsets, wantMemsets, dqkv.Bytes())
				}
			}
		}
	}
}

// TestGPUAttentionBackwardStore: AttentionBackwardStore into a
// NaN-poisoned dqkv gives the CPU's store (Zero + AttentionBackward's
// values) within the flash tolerance, and the same bits as the GPU's own
// Zero + AttentionBackward on the deterministic paths: variant 2 (the
// default, its kernels take the store flag) and the cuBLAS path (zeroed,
// then accumulated); variant 1 (dq by fp32 atomics) against the CPU only.
// At GPT-2's head size and a T past one tile. The own kernels: cuDNN's
// backward (the default where it loads) sums dq in an order that varies
// from run to run (TestGPUCuDNNAttention checks it).
func TestGPUAttentionBackwardStore(t *testing.T) {
	rng := testRNG(t)
	g := gpuDev(t, true)
	ownAttention(t, g)
	def, defNo := g.flashV2, g.noFlash
	defer func() { g.flashV2, g.noFlash = def, defNo }()
	const B, T, NH, hs = 2, 300, 4, 64
	C := NH * hs
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		for _, p := range []struct {
			name        string
			v2, noFlash bool
		}{{"v2", true, false}, {"v1", false, false}, {"cublas", true, true}} {
			g.flashV2, g.noFlash = p.v2, p.noFlash
			qkv, dout := randHost(rng, dt, 0, 1, B, T, 3*C), randHost(rng, dt, 0, 1, B, T, C)
			st := g.AttentionState(dt, B, T, C, NH)
			gq, gdo := toGPU(t, g, qkv), toGPU(t, g, dout)
			out, att := poisoned(t, g, dt, B, T, C), poisoned(t, g, st.DType, st.Shape...)
			g.Attention(out, att, gq, B, T, C, NH)
			stored := poisoned(t, g, dt, B, T, 3*C)
			g.AttentionBackwardStore(stored, gdo, gq, out, att, B, T, C, NH)
			acc := poisoned(t, g, dt, B, T, 3*C)
			g.Zero(acc)
			g.AttentionBackward(acc, gdo, gq, out, att, B, T, C, NH)
			a, s := toHost(t, g, acc), toHost(t, g, stored)
			// variant 1 adds dq with fp32 atomics, in an order that varies
			// (compute-sanitizer racecheck's timing showed it): its store
			// form is checked against the CPU only
			if p.name != "v1" && string(a.Raw()) != string(s.Raw()) {
				t.Errorf("attention_backward_store %s %s: dqkv differs from Zero + AttentionBackward", dt, p.name)
			}
			// against the CPU's store (its own forward's probabilities)
			ref := cpuRef(true)
			rst := ref.AttentionState(dt, B, T, C, NH)
			rout, ratt := tensor.New(dt, B, T, C), tensor.New(rst.DType, rst.Shape...)
			ref.Attention(rout, ratt, qkv, B, T, C, NH)
			want := tensor.New(dt, B, T, 3*C)
			ref.AttentionBackwardStore(want, dout, qkv, rout, ratt, B, T, C, NH)
			if err := ref.Sync(); err != nil {
				t.Fatal(err)
			}
			check(t, "attention_backward_store", dt, true, fmt.Sprintf("B%d_T%d_NH%d_%s", B, T, NH, p.name), "dqkv", s, want, dt, 16)
		}
	}
}
