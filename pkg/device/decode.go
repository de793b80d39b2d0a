package device

// decode.go: the ops of generation over a key/value cache (Decoder), their
// contracts, and the sampling rule that every backend follows (SampleRow),
// written once here so that the CPU twin and the GPU kernels choose alike.

import (
	"fmt"
	"math"
	"sort"

	"github.com/druto/druto/pkg/tensor"
)

// Decoder is implemented by devices that generate over a key/value cache:
// a prompt is run once (prefill, with the training ops) and its keys and
// values kept; each new token then costs one row per sequence (decode).
// The cache of one layer is (B,NH,S,hs): sequence b's head h holds S
// positions of hs values, so one head's keys are contiguous.
type Decoder interface {
	// DecodeReady returns nil when the decode ops can run, else why not (a
	// GPU whose decode kernels did not build or failed their self-test):
	// generation then recomputes the window with the training ops.
	DecodeReady() error
	// EncoderAt: out[i,:] = wte[tokens[i],:] + wpe[pos[i],:], the encoder of
	// rows at arbitrary positions (one row a sequence when decoding).
	// out (N,C), wte (V,C), wpe (maxT,C), tokens (N) I32, pos (N) I32
	EncoderAt(out, wte, wpe, tokens, pos *T, N, C int)
	// KVAppend copies the keys and values of qkv (B,T,3C) into the caches:
	// row t of sequence b goes to position pos[b]+t (which must be < S).
	// kc (B,NH,S,hs), vc (B,NH,S,hs), qkv (B,T,3C), pos (B) I32
	KVAppend(kc, vc, qkv, pos *T, B, T, C, NH, S int)
	// AttentionDecode is causal attention of one query row per sequence,
	// the cache append fused in: the key and value of qkv's row b go to
	// position pos[b] of sequence b's caches (KVAppend with T = 1), and its
	// q attends to the cached positions [0, pos[b]], with fp32 scores,
	// softmax and sums, scale 1/√hs. out is rounded once.
	// out (B,C), qkv (B,3C), kc (B,NH,S,hs), vc (B,NH,S,hs), pos (B) I32
	AttentionDecode(out, qkv, kc, vc, pos *T, B, C, NH, S int)
	// SampleHead is the LM head fused with sampling: logits[b,:] = x[b,:]·wteᵀ
	// with fp32 accumulation, rounded to logits' dtype (x's and wte's, as the
	// training step's head), then one token a row chosen by SampleRow from
	// those values under o with the row's state rows[b,:] and the token
	// table, written to ids[b]; rows[b,:] is advanced: its state to the
	// token's next, RowLeft down and RowStep up by one.
	// ids (B) I32, logits (B,V), x (B,C), wte (V,C), table (NS,V) I32, rows (B,RowLen) I32
	SampleHead(ids, logits, x, wte, table, rows *T, B, C, V, NS int, o Sampling)
}

// Sampling chooses how SampleHead draws a token. The zero value is greedy.
type Sampling struct {
	Temperature float32 // 0: the most likely allowed token (argmax, first by id on ties)
	TopK        int     // keep the tokens whose logit is at least the K-th largest (ties kept); 0: all
	TopP        float32 // keep the most likely tokens whose probabilities sum to at least P of the kept mass; 0 or 1: all
}

// The slots of a row's sampling state (SampleHead's rows, RowLen I32 each).
const (
	RowState  = iota // the index of the row's table row (where its text stands, e.g. inside a UTF-8 character)
	RowLeft          // tokens still to come after the next one; a token whose Need exceeds it is not allowed
	RowStep          // the draw counter: the uniform of this draw is Uniform(seed, step)
	RowSeedLo        // the row's seed, low 32 bits
	RowSeedHi        // the row's seed, high 32 bits
	RowLen
)

// A table entry (SampleHead's table (NS,V)) is -1 for a token not allowed
// in that state, else Next | Need<<8: the state after the token and how
// many more tokens its text then needs at least (a character left open).
const (
	TableNo   = -1
	TableNext = 0xff // mask of the next state
)

// TableEntry packs a table entry.
func TableEntry(next, need int) int32 { return int32(next | need<<8) }

// Uniform is the draw of a row: a number in [0,1) with 24 random bits from
// the row's seed and step (splitmix64 of their mix), the same on every
// backend and independent of the batch a row is in.
func Uniform(seed uint64, step uint32) float32 {
	z := seed + uint64(step+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float32(z>>40) / (1 << 24)
}

// What SampleRow (and so SampleHead) returns instead of a token.
const (
	SampleNone      = -1 // no token is allowed in the row's state
	SampleNotFinite = -2 // an allowed logit is NaN or infinite: nothing can be drawn
)

// SampleScratch is SampleRow's working memory for a vocabulary of V.
type SampleScratch struct {
	p, w []float64
	ids  []int32
}

// SampleRow chooses one token from logits (V values) under o, allowing
// only the tokens whose table entry in row st (V entries) is not TableNo
// and needs at most left more tokens, with uniform u for the draw. It
// returns the token and its entry, SampleNone when no token is allowed, or
// SampleNotFinite when an allowed token's logit is NaN or infinite.
//
// Greedy (Temperature 0): the allowed token of the largest logit, the
// smallest id among equals. Otherwise each allowed token i has weight
// pᵢ = exp((logitᵢ - max)/Temperature) in float64; TopK keeps the tokens
// whose logit is at least the K-th largest allowed logit; TopP then keeps
// the tokens whose weight is at least τ, the largest weight such that the
// kept weights of at least τ sum to P of the total or more. The token is the
// first by id whose running sum of kept weights exceeds u times their total
// (the last kept one if rounding leaves none).
func SampleRow(logits []float32, st []int32, left int, o Sampling, u float32, sc *SampleScratch) (int, int32) {
	allowed := func(i int) bool {
		e := st[i]
		return e != TableNo && int(e>>8) <= left
	}
	best := -1
	for i, v := range logits {
		if !allowed(i) {
			continue
		}
		if v-v != 0 { // NaN or ±Inf
			return SampleNotFinite, TableNo
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	if best < 0 {
		return SampleNone, TableNo
	}
	if o.Temperature <= 0 {
		return best, st[best]
	}
	V := len(logits)
	if cap(sc.p) < V {
		sc.p, sc.w, sc.ids = make([]float64, V), make([]float64, 0, V), make([]int32, 0, V)
	}
	p := sc.p[:V]
	kth := float32(math.Inf(-1))
	if o.TopK > 0 {
		ids := sc.ids[:0]
		for i := range logits {
			if allowed(i) {
				ids = append(ids, int32(i))
			}
		}
		if o.TopK < len(ids) {
			sort.Slice(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
			kth = logits[ids[o.TopK-1]]
		}
	}
	mx, inv := float64(logits[best]), 1/float64(o.Temperature)
	var total float64
	for i, v := range logits {
		p[i] = 0
		if allowed(i) && v >= kth {
			p[i] = math.Exp((float64(v) - mx) * inv)
			total += p[i]
		}
	}
	if o.TopP > 0 && o.TopP < 1 {
		ws := sc.w[:0]
		for _, w := range p {
			if w > 0 {
				ws = append(ws, w)
			}
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(ws)))
		tau, c := ws[len(ws)-1], 0.0
		for _, w := range ws {
			c += w
			if c >= float64(o.TopP)*total {
				tau = w
				break
			}
		}
		total = 0
		for i, w := range p {
			if w < tau {
				p[i] = 0
			}
			total += p[i]
		}
	}
	r := float64(u) * total
	last := -1
	var c float64
	for i, w := range p {
		if w == 0 {
			continue
		}
		last = i
		if c += w; c > r {
			return i, st[i]
		}
	}
	return last, st[last]
}

// DecodeOps are the descriptors of Decoder's ops (no profiler class: they
// are not part of a training step).
var DecodeOps = struct {
	EncoderAt, KVAppend, AttentionDecode, SampleHead Contract
}{
	// N, C
	EncoderAt: Contract{Op: "EncoderAt", Iface: "Decoder", Sizes: []string{"N", "C+"},
		Params: []Param{p("out", Float, Out, prod(0, 1)), p("wte", Float, In, nil), p("wpe", Float, In, nil),
			gen(p("tokens", I32, In, prod(0)), Index), gen(p("pos", I32, In, prod(0)), Index)},
		Tol: one, Rule: func(s []int, ts []*T) error {
			if err := rows("wte", ts[1], s[1], 1); err != nil {
				return err
			}
			return rows("wpe", ts[2], s[1], 1)
		}, IndexMax: func(s []int, ts []*T) int { return min(ts[1].Numel(), ts[2].Numel()) / s[1] }},
	// B, T, C, NH, S
	KVAppend: Contract{Op: "KVAppend", Iface: "Decoder", Sizes: []string{"B", "T", "C+", "NH+", "S+"},
		Params: []Param{p("kc", Float, Acc, prod(0, 4, 2)), p("vc", Float, Acc, prod(0, 4, 2)),
			p("qkv", Float, In, func(s []int) int { return s[0] * s[1] * 3 * s[2] }), p("pos", I32, In, prod(0))},
		Tol: one, Rule: decodeRule(2, 3), IndexMax: func(s []int, _ []*T) int { return max(s[4]-s[1]+1, 1) }},
	// B, C, NH, S
	AttentionDecode: Contract{Op: "AttentionDecode", Iface: "Decoder", Sizes: []string{"B", "C+", "NH+", "S+"},
		Params: []Param{p("out", Float, Out, prod(0, 1)), p("qkv", Float, In, func(s []int) int { return s[0] * 3 * s[1] }),
			p("kc", Float, Acc, prod(0, 3, 1)), p("vc", Float, Acc, prod(0, 3, 1)), p("pos", I32, In, prod(0))},
		// One rounding of an fp32 softmax-weighted sum, as Attention's.
		Tol: one, Rule: decodeRule(1, 2), IndexMax: func(s []int, _ []*T) int { return s[3] }},
	// B, C, V, NS
	SampleHead: Contract{Op: "SampleHead", Iface: "Decoder", Sizes: []string{"B", "C+", "V+", "NS+"},
		Params: []Param{p("ids", I32, Out, prod(0)), floor(p("logits", Float, Out, prod(0, 2)), logitsFloor), p("x", Float, In, prod(0, 1)),
			p("wte", Float, In, prod(2, 1)), p("table", I32, In, prod(3, 2)),
			p("rows", I32, Acc, func(s []int) int { return s[0] * RowLen })},
		// Index inputs below NS: table entries are next states with need 0,
		// and every slot of a row's state is a valid small number.
		// fp32 logits are dots of C products summed in another order on
		// each device: a near-cancelling logit is off by about √C rounding
		// steps of its terms, not of its own size.
		Tol: func(dt tensor.DType, s []int) float64 {
			if dt == tensor.F32 {
				return max(1, math.Sqrt(float64(s[1]))/4)
			}
			return 1
		}, IndexMax: func(s []int, _ []*T) int { return s[3] }},
}

// logitsFloor is the absolute floor of SampleHead's fp32 logits: a sum
// of C products that nearly cancels keeps the rounding of its terms, about
// √C units of their magnitudes Σ|x·w|, whatever its own size (the GPU's
// decomposed form, cuBLAS, once left a near-zero logit just past the
// scaled atol, which turned the decode ops off). 16-bit logits are rounded
// to their dtype, whose tolerance covers this.
func logitsFloor(dt tensor.DType, s []int, ts []*T) float64 {
	if dt != tensor.F32 {
		return 0
	}
	B, C, V := s[0], s[1], s[2]
	x, w := ts[2].ToF32(), ts[3].ToF32()
	worst := 0.0
	for b := range B {
		for v := range V {
			var m float64
			for c := range C {
				m += math.Abs(float64(x[b*C+c]) * float64(w[v*C+c]))
			}
			worst = max(worst, m)
		}
	}
	return math.Sqrt(float64(C)) * Unit(dt) * worst
}

// decodeRule checks that channels (size index c) divide into heads (index nh).
func decodeRule(c, nh int) func(s []int, _ []*T) error {
	return func(s []int, _ []*T) error {
		if s[c]%s[nh] != 0 {
			return fmt.Errorf("channels %d not divisible by heads %d: %w", s[c], s[nh], tensor.ErrShape)
		}
		return nil
	}
}
