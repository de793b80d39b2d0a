package data

import (
	"fmt"
	"math"
)

// Loader yields llm.c-style batches from a token sequence: each batch reads
// B*T+1 consecutive tokens; the inputs are the first B*T of them and the
// targets the same window shifted by one token. After each batch the
// position advances by B*T and goes back to 0 when the next batch would not
// fit. A Loader is not safe for concurrent use.
type Loader struct {
	tokens      []int32
	b, t        int
	rank, world int // this rank's share of each global batch (0, 1 unsharded)
	pos         int // token offset of the next global batch; pos+world*b*t+1 <= len(tokens)
}

// NewLoader returns a Loader over tokens for batches of B sequences of T
// tokens, starting at position 0. It needs at least B*T+1 tokens. The Loader
// keeps tokens; the caller must not change them while it is in use.
func NewLoader(tokens []int32, B, T int) (*Loader, error) {
	if B < 1 || T < 1 {
		return nil, fmt.Errorf("data: batch size B=%d and sequence length T=%d must both be at least 1", B, T)
	}
	if B > (math.MaxInt-1)/T {
		return nil, fmt.Errorf("data: batches of B=%d x T=%d tokens are too large", B, T)
	}
	if need := B*T + 1; len(tokens) < need {
		return nil, fmt.Errorf("data: %d tokens are too few for batches of B=%d x T=%d: need at least B*T+1 = %d "+
			"(use more data or a smaller B or T)", len(tokens), B, T, need)
	}
	return &Loader{tokens: tokens, b: B, t: T, world: 1}, nil
}

// NewShardedLoader returns rank's Loader of data-parallel training over
// world ranks: each global batch is world·B windows of T tokens read as one
// Loader of batch world·B would read them, and rank takes windows
// rank·B .. rank·B+B-1 of it. Positions (Pos, Seek) are those of the global
// batch, the same on every rank.
func NewShardedLoader(tokens []int32, B, T, rank, world int) (*Loader, error) {
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("data: rank %d of world %d (want 0 <= rank < world)", rank, world)
	}
	if B > math.MaxInt/world {
		return nil, fmt.Errorf("data: batch %d x world %d is too large", B, world)
	}
	if _, err := NewLoader(tokens, B*world, T); err != nil {
		return nil, err
	}
	return &Loader{tokens: tokens, b: B, t: T, rank: rank, world: world}, nil
}

// Next fills inputs with the B*T tokens at the current position and targets
// with the B*T tokens one further on, then advances the position by B*T
// (back to 0 when the next batch would not fit). inputs and targets must
// each have length B*T; otherwise Next returns an error and neither fills
// the buffers nor moves.
func (l *Loader) Next(inputs, targets []int32) error {
	n := l.b * l.t
	if len(inputs) != n || len(targets) != n {
		return fmt.Errorf("data: Loader.Next: inputs and targets must have length B*T = %d, have %d and %d",
			n, len(inputs), len(targets))
	}
	start := l.pos + l.rank*n
	copy(inputs, l.tokens[start:start+n])
	copy(targets, l.tokens[start+1:start+n+1])
	g := l.world * n
	l.pos += g
	if l.pos+g+1 > len(l.tokens) {
		l.pos = 0
	}
	return nil
}

// Pos returns the token offset of the next batch, the value a checkpoint
// saves so that training resumes on the same data.
func (l *Loader) Pos() int { return l.pos }

// Seek sets the token offset of the next batch, as saved by Pos. Any offset
// from which a whole batch (B*T+1 tokens) still fits is accepted; others are
// an error and leave the position unchanged.
func (l *Loader) Seek(pos int) error {
	n := l.world*l.b*l.t + 1
	if pos < 0 || pos > len(l.tokens)-n {
		return fmt.Errorf("data: loader position %d is out of range 0..%d for %d tokens and batches of B*T+1 = %d "+
			"(was the checkpoint made on other data or another B, T?)", pos, len(l.tokens)-n, len(l.tokens), n)
	}
	l.pos = pos
	return nil
}

// Reset goes back to the first batch (position 0).
func (l *Loader) Reset() { l.pos = 0 }

// Batches returns the number of whole batches in one pass from position 0
// before the Loader wraps around: an evaluation takes the mean loss over
// that many batches after Reset.
func (l *Loader) Batches() int { return (len(l.tokens) - 1) / (l.world * l.b * l.t) }
