package amp

// fp8scales.go: the scaling state of all the FP8 tensors of a training
// step in one flat layout, the one kernels/fp8scale.cu updates on the
// device, and UpdateFP8Scales, its reference. Each tensor follows the rule
// of FP8Scaler.Update (tests prove them equal); the layout lets one kernel
// launch update every tensor inside the step's CUDA graph, and lets the
// producers of the FP8 operands read their scale and add their amax at
// fixed device addresses.

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// The fields of a tensor's record in FP8Scales.Meta (kernels/fp8scale.cu's
// FP8_META_* defines).
const (
	FP8MetaFormat = iota // 0 E4M3, 1 E5M2
	FP8MetaNext          // the history slot the next amax goes to
	FP8MetaFilled        // the history slots that hold an amax
	FP8MetaBad           // non-finite amaxes seen (overflow events)
	FP8MetaUnder         // values the last updated step's casts flushed to zero (underflows)
	FP8MetaLen
)

// FP8Scales is the scaling state of K tensors cast to FP8 under one recipe:
//
//	St   amax[K][2], scale[K], inv[K], hist[K][H]   (float32)
//	Meta K records of FP8MetaLen int32
//
// amax[k] is where tensor k's producers add what they see: amax[k][0] max
// |x| (as float bits, with atomicMax), amax[k][1] the number of nonzero
// finite x whose cast is ±0 (underflows, as uint32 bits, with atomicAdd);
// both are zero after an update, which keeps the count in Meta
// (FP8MetaUnder); scale[k] is what its next cast multiplies by; inv[k] =
// 1/scale[k], the dequantisation factor of the FP8 GEMM's scale pointers;
// hist[k] is the ring of its last H amaxes (H = 0 under current scaling).
type FP8Scales struct {
	K, H, Margin int
	St           []float32
	Meta         []int32
}

// FP8StLen returns the length of FP8Scales.St for K tensors and a
// history of H steps: K amax pairs, K scales, K inverses, K·H entries.
func FP8StLen(K, H int) int { return K * (4 + H) }

// NewFP8Scales returns the state of tensors of the given formats under r:
// every scale and inverse 1, amaxes and histories 0.
func NewFP8Scales(formats []tensor.FP8Format, r FP8Recipe) (*FP8Scales, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	K, H := len(formats), 0
	if !r.Current {
		H = r.History
	}
	s := &FP8Scales{K: K, H: H, Margin: r.Margin, St: make([]float32, FP8StLen(K, H)), Meta: make([]int32, K*FP8MetaLen)}
	for k, f := range formats {
		switch f {
		case tensor.E4M3:
			s.Meta[k*FP8MetaLen+FP8MetaFormat] = 0
		case tensor.E5M2:
			s.Meta[k*FP8MetaLen+FP8MetaFormat] = 1
		default:
			return nil, fmt.Errorf("amp: fp8 tensor %d has format %d, want E4M3 or E5M2", k, f)
		}
		s.St[2*K+k], s.St[3*K+k] = 1, 1
	}
	return s, nil
}

// Amax returns tensor k's pending amax (0 after an update).
func (s *FP8Scales) Amax(k int) float32 { return s.St[2*k] }

// PendingUnder returns the underflows tensor k's producers have added
// since the last update.
func (s *FP8Scales) PendingUnder(k int) uint32 { return math.Float32bits(s.St[2*k+1]) }

// SetPending sets what tensor k's producers have added since the last
// update: its amax and its underflow count (a producer's work, for tests
// and references).
func (s *FP8Scales) SetPending(k int, amax float32, under uint32) {
	s.St[2*k], s.St[2*k+1] = amax, math.Float32frombits(under)
}

// Scale returns the scale of tensor k's next cast.
func (s *FP8Scales) Scale(k int) float32 { return s.St[2*s.K+k] }

// Inv returns 1/Scale(k), the dequantisation factor of the FP8 GEMM.
func (s *FP8Scales) Inv(k int) float32 { return s.St[3*s.K+k] }

// Under returns the values tensor k's casts flushed to zero in the step
// the last update closed (nonzero finite values whose cast is ±0: too
// small for the scale; saturating at 2^31 - 1).
func (s *FP8Scales) Under(k int) int64 { return int64(s.Meta[k*FP8MetaLen+FP8MetaUnder]) }

// Bad returns tensor k's count of non-finite amaxes (overflow events).
func (s *FP8Scales) Bad(k int) int64 { return int64(s.Meta[k*FP8MetaLen+FP8MetaBad]) }

// Check reports the first field of a state read from outside (a
// checkpoint) that no run of UpdateFP8Scales from NewFP8Scales(formats)
// could hold: the sizes, each tensor's format, its ring's counters, a
// scale or inverse that is not finite and positive, an amax or history
// entry that is negative (a pending amax may be non-finite: the update
// counts it), a negative overflow count.
func (s *FP8Scales) Check(formats []tensor.FP8Format) error {
	K, H := s.K, s.H
	switch {
	case K != len(formats) || H < 0 || s.Margin < 0 || s.Margin > 64:
		return fmt.Errorf("amp: fp8 state of %d tensors, history %d, margin %d, want %d tensors", K, H, s.Margin, len(formats))
	case len(s.St) != FP8StLen(K, H) || len(s.Meta) != K*FP8MetaLen:
		return fmt.Errorf("amp: fp8 state of %d and %d values, want %d and %d", len(s.St), len(s.Meta), FP8StLen(K, H), K*FP8MetaLen)
	}
	pos := func(v float32) bool { return v > 0 && !math.IsInf(float64(v), 0) }
	for k, f := range formats {
		m := s.Meta[k*FP8MetaLen : (k+1)*FP8MetaLen]
		want := int32(0)
		if f == tensor.E5M2 {
			want = 1
		}
		switch {
		case m[FP8MetaFormat] != want:
			return fmt.Errorf("amp: fp8 tensor %d has format code %d, want %d (%s)", k, m[FP8MetaFormat], want, f)
		case m[FP8MetaFilled] < 0 || m[FP8MetaFilled] > int32(H) || m[FP8MetaNext] < 0 || (H > 0 && m[FP8MetaNext] >= int32(H)) || (H == 0 && m[FP8MetaNext] != 0):
			return fmt.Errorf("amp: fp8 tensor %d: history counters next %d, filled %d for a history of %d", k, m[FP8MetaNext], m[FP8MetaFilled], H)
		case m[FP8MetaBad] < 0 || m[FP8MetaUnder] < 0:
			return fmt.Errorf("amp: fp8 tensor %d: %d overflows, %d underflows", k, m[FP8MetaBad], m[FP8MetaUnder])
		case !pos(s.Scale(k)) || !pos(s.Inv(k)):
			return fmt.Errorf("amp: fp8 tensor %d: scale %g, inverse %g", k, s.Scale(k), s.Inv(k))
		case s.Amax(k) < 0:
			return fmt.Errorf("amp: fp8 tensor %d: amax %g", k, s.Amax(k))
		}
		for _, h := range s.St[4*K+k*H : 4*K+(k+1)*H] {
			if !(h >= 0) || math.IsInf(float64(h), 0) {
				return fmt.Errorf("amp: fp8 tensor %d: history holds %g", k, h)
			}
		}
	}
	return nil
}

// Update runs UpdateFP8Scales on the state.
func (s *FP8Scales) Update() { UpdateFP8Scales(s.St, s.Meta, s.K, s.H, s.Margin) }

// UpdateFP8Scales is the reference of kernels/fp8scale.cu's
// fp8_scale_update on FP8Scales' layout: for each tensor k, amax[k] goes
// through FP8Scaler.Update's rule (a non-finite amax is counted and changes
// nothing; under delayed scaling, H > 0, it enters the ring and the scale
// follows the ring's maximum; under current scaling the amax alone; an
// amax of 0 keeps the scale), inv[k] becomes 1/scale[k], the pending
// underflow count moves into Meta (FP8MetaUnder, saturating), and both
// words of amax[k] are set to 0 for the next step's producers.
func UpdateFP8Scales(st []float32, meta []int32, K, H, margin int) {
	for k := range K {
		updateFP8Record(st, meta, K, H, margin, k)
	}
}

// UpdateFP8ScalesOf is UpdateFP8Scales of the records recs lists alone
// (each once; fp8_scale_update with its record list): the others keep
// their pending amaxes. It panics on a record outside [0, K).
func UpdateFP8ScalesOf(st []float32, meta []int32, K, H, margin int, recs []int32) {
	for _, k := range recs {
		if k < 0 || int(k) >= K {
			panic(fmt.Sprintf("amp: fp8 record %d of %d", k, K))
		}
		updateFP8Record(st, meta, K, H, margin, int(k))
	}
}

// updateFP8Record updates record k (UpdateFP8Scales' rule).
func updateFP8Record(st []float32, meta []int32, K, H, margin, k int) {
	amax, scale, inv := st[:2*K], st[2*K:3*K], st[3*K:4*K]
	a, m := amax[2*k], meta[k*FP8MetaLen:(k+1)*FP8MetaLen]
	m[FP8MetaUnder] = int32(min(math.Float32bits(amax[2*k+1]), math.MaxInt32))
	amax[2*k], amax[2*k+1] = 0, 0
	if a != a || math.IsInf(float64(a), 0) {
		m[FP8MetaBad]++
		return
	}
	if H > 0 {
		hist := st[4*K+k*H : 4*K+(k+1)*H]
		hist[m[FP8MetaNext]] = a
		m[FP8MetaNext] = (m[FP8MetaNext] + 1) % int32(H)
		m[FP8MetaFilled] = min(m[FP8MetaFilled]+1, int32(H))
		a = 0
		for _, h := range hist[:m[FP8MetaFilled]] {
			a = max(a, h)
		}
	}
	f := tensor.E4M3
	if m[FP8MetaFormat] == 1 {
		f = tensor.E5M2
	}
	scale[k], _ = FP8ScaleFor(f, a, margin, scale[k])
	inv[k] = 1 / scale[k]
}
