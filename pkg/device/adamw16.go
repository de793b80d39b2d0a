package device

// adamw16.go: AdamW with its moments m and v stored in bf16 (druto train
// --adam-state bf16): 4 bytes of optimizer state a parameter instead of 8.
//
// The update itself is AdamWStep's, in fp32, bit for bit: m and v are
// widened from bf16 (exact), updated, and the new fp32 values drive the
// master update. Only their storage is rounded, stochastically: the 16
// dropped bits of each fp32 value are compared with 16 random bits, so the
// stored moment is right in expectation. Round-to-nearest would lose the
// small increments of a slow moment for good (v moves by (1-β2)·g² a step,
// 5% at β2 = 0.95, and an element whose g² is steady stays on one bf16
// value forever once the step is below half an ulp, 0.4%); stochastic
// rounding keeps their sum unbiased. Kahan compensation was the other
// choice the issue names: it corrects the master update, which stays fp32
// here, and it would need a compensation buffer as large as the moments,
// giving back the saving.
//
// The random bits are a counter-based hash of (seed, step, element), not
// a generator's stream: no state to save or to advance, any element can be
// updated by any thread, and the CPU and the GPU round alike, so their
// results agree bit for bit (the conformance cases check it).

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// MomentsBF16 is implemented by devices that keep AdamW's moments in bf16
// (optim.NewAdamW with MomentsBF16). Contract: AdamWBF16.
type MomentsBF16 interface {
	// AdamWBF16 is AdamWStep (state nil: the step's scalars from hp) or
	// AdamWState (state given: from the step state, and nothing done when
	// state[SlotFinite] is 0) with m and v stored in bf16, rounded
	// stochastically with SRBits(hp.Seed, step, element); step is hp.Step,
	// or state[SlotOptSteps] with a state.
	// master, grads (layout.Total) F32; work (layout.Total) or nil;
	// m, v (layout.Total) BF16; state (StateLen) F32 or nil
	AdamWBF16(master, work, grads, m, v *T, layout *tensor.Layout, hp AdamW, state *T)
}

// AdamWBF16 is the contract of MomentsBF16.AdamWBF16: total (layout.Total)
// and step (hp.Step, at least 1 without a state). With deterministic
// rounding both devices give the same bits (scale 1).
var AdamWBF16 = Contract{Op: "AdamWBF16", Sizes: []string{"total", "step"},
	Params: []Param{p("master", F32, Acc, prod(0)), opt(p("work", Float, Out, prod(0))), p("grads", F32, In, prod(0)),
		p("m", BF16, Acc, prod(0)), gen(p("v", BF16, Acc, prod(0)), Positive), opt(p("state", F32, In, func([]int) int { return StateLen }))},
	Iface: "MomentsBF16", Class: "optimizer",
	Tol: one, Rule: func(s []int, ts []*T) error {
		if ts[5] == nil && s[1] < 1 {
			return fmt.Errorf("step=%d without a step state; bias correction is 1-based: %w", s[1], tensor.ErrShape)
		}
		return nil
	}}

// SRBits returns the random bits of element i's stochastic rounding at
// step: the low 16 for m, the high 16 for v. It is splitmix64's finaliser
// over a mix of the three counters (kernels/adamw.cu sr_bits is the same).
func SRBits(seed uint64, step uint32, i uint64) uint32 {
	h := seed ^ uint64(step)*0x9E3779B97F4A7C15 ^ i*0xD1B54A32D192ED03
	h ^= h >> 30
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 27
	h *= 0x94D049BB133111EB
	h ^= h >> 31
	return uint32(h >> 32)
}

// RoundBF16SR rounds x to bf16 stochastically with the 16 random bits r:
// up with probability (dropped bits)/2^16, else down (towards zero in
// magnitude). NaN and ±Inf round as tensor.BF16FromF32 does.
func RoundBF16SR(x float32, r uint32) uint16 {
	b := math.Float32bits(x)
	if b&0x7fffffff >= 0x7f800000 {
		return tensor.BF16FromF32(x)
	}
	return uint16((b + r&0xffff) >> 16)
}

// MomentsStep is the optimizer step StepUpdate counted (state given) or
// hp.Step: the step of SRBits.
func MomentsStep(hp AdamW, st []float32) uint32 {
	if st != nil {
		return uint32(st[SlotOptSteps])
	}
	return uint32(hp.Step)
}
