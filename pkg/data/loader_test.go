package data

import (
	"slices"
	"strings"
	"testing"
)

func seq(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

func TestLoaderBatches(t *testing.T) {
	const B, T = 2, 3
	tokens := seq(20) // batches at 0 and 6 and 12 (12+7 = 19 <= 20), then wrap
	l, err := NewLoader(tokens, B, T)
	if err != nil {
		t.Fatal(err)
	}
	if l.Batches() != 3 {
		t.Fatalf("Batches() = %d, want 3", l.Batches())
	}
	in, tg := make([]int32, B*T), make([]int32, B*T)
	for _, start := range []int{0, 6, 12, 0, 6, 12, 0} {
		if l.Pos() != start {
			t.Fatalf("Pos() = %d, want %d", l.Pos(), start)
		}
		mustNext(t, l, in, tg)
		if !slices.Equal(in, tokens[start:start+B*T]) {
			t.Fatalf("inputs at %d = %v, want the window %v", start, in, tokens[start:start+B*T])
		}
		if !slices.Equal(tg, tokens[start+1:start+B*T+1]) {
			t.Fatalf("targets at %d = %v, want the inputs shifted by one %v", start, tg, tokens[start+1:start+B*T+1])
		}
	}
}

func TestLoaderExactFit(t *testing.T) {
	// B*T+1 tokens: exactly one batch, which repeats.
	tokens := seq(13)
	l, err := NewLoader(tokens, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if l.Batches() != 1 {
		t.Fatalf("Batches() = %d, want 1", l.Batches())
	}
	in, tg := make([]int32, 12), make([]int32, 12)
	for range 3 {
		mustNext(t, l, in, tg)
		if in[0] != 0 || tg[11] != 12 || l.Pos() != 0 {
			t.Fatalf("inputs %v targets %v pos %d", in, tg, l.Pos())
		}
	}
}

func TestLoaderSeekPosReset(t *testing.T) {
	tokens := seq(100)
	l, err := NewLoader(tokens, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	in, tg := make([]int32, 8), make([]int32, 8)
	for range 5 {
		mustNext(t, l, in, tg)
	}
	saved := l.Pos()
	mustNext(t, l, in, tg)
	want := slices.Clone(in)

	// A fresh loader restored to the saved position yields the same batch.
	m, _ := NewLoader(tokens, 2, 4)
	if err := m.Seek(saved); err != nil {
		t.Fatal(err)
	}
	if m.Pos() != saved {
		t.Fatalf("Pos() after Seek(%d) = %d", saved, m.Pos())
	}
	mustNext(t, m, in, tg)
	if !slices.Equal(in, want) {
		t.Fatalf("batch after Seek(%d) = %v, want %v", saved, in, want)
	}

	// Unaligned positions are fine as long as a batch fits.
	if err := m.Seek(91); err != nil {
		t.Fatalf("Seek(91) with 100 tokens and B*T+1 = 9: %v", err)
	}
	mustNext(t, m, in, tg)
	if in[0] != 91 || tg[7] != 99 || m.Pos() != 0 {
		t.Fatalf("after Seek(91): inputs %v targets %v pos %d", in, tg, m.Pos())
	}

	for _, bad := range []int{-1, 92, 100, 1 << 40} {
		m.Seek(5)
		err := m.Seek(bad)
		if err == nil || !strings.Contains(err.Error(), "out of range 0..91") {
			t.Fatalf("Seek(%d) error %v, want out of range 0..91", bad, err)
		}
		if m.Pos() != 5 {
			t.Fatalf("failed Seek(%d) moved the position to %d", bad, m.Pos())
		}
	}
	m.Reset()
	if m.Pos() != 0 {
		t.Fatalf("Pos() after Reset = %d", m.Pos())
	}
}

func TestNewLoaderErrors(t *testing.T) {
	cases := []struct {
		n, B, T int
		want    string
	}{
		{12, 3, 4, "12 tokens are too few for batches of B=3 x T=4: need at least B*T+1 = 13"},
		{0, 1, 1, "0 tokens are too few for batches of B=1 x T=1: need at least B*T+1 = 2"},
		{100, 0, 4, "B=0 and sequence length T=4 must both be at least 1"},
		{100, 4, -2, "B=4 and sequence length T=-2 must both be at least 1"},
		{100, 1 << 40, 1 << 40, "too large"},
	}
	for _, c := range cases {
		l, err := NewLoader(seq(c.n), c.B, c.T)
		if err == nil {
			t.Fatalf("NewLoader(%d tokens, %d, %d) = %v, want an error", c.n, c.B, c.T, l)
		}
		if !strings.HasPrefix(err.Error(), "data: ") || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("NewLoader(%d tokens, %d, %d) error %q, want %q", c.n, c.B, c.T, err, c.want)
		}
	}
}

func TestLoaderNextWrongLength(t *testing.T) {
	l, err := NewLoader(seq(100), 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	in, tg := make([]int32, 7), make([]int32, 8)
	err = l.Next(in, tg)
	if err == nil || !strings.Contains(err.Error(), "length B*T = 8") {
		t.Fatalf("Next with 7 inputs: %v, want an error naming B*T = 8", err)
	}
	if l.Pos() != 0 || tg[0] != 0 {
		t.Fatalf("a refused Next moved to %d or filled targets (%v)", l.Pos(), tg)
	}
}

// TestShardedLoader: the ranks of a sharded loader together read exactly
// what one loader of the global batch reads, batch after batch.
func TestShardedLoader(t *testing.T) {
	toks := make([]int32, 1000)
	for i := range toks {
		toks[i] = int32(i)
	}
	const B, T, world = 2, 8, 3
	one, err := NewLoader(toks, B*world, T)
	if err != nil {
		t.Fatal(err)
	}
	ranks := make([]*Loader, world)
	for r := range ranks {
		if ranks[r], err = NewShardedLoader(toks, B, T, r, world); err != nil {
			t.Fatal(err)
		}
	}
	for step := 0; step < 25; step++ { // wraps around more than once
		gi, gt := make([]int32, B*world*T), make([]int32, B*world*T)
		mustNext(t, one, gi, gt)
		for r, l := range ranks {
			in, tg := make([]int32, B*T), make([]int32, B*T)
			mustNext(t, l, in, tg)
			for i := range in {
				if in[i] != gi[r*B*T+i] || tg[i] != gt[r*B*T+i] {
					t.Fatalf("step %d rank %d element %d: %d/%d, global %d/%d", step, r, i, in[i], tg[i], gi[r*B*T+i], gt[r*B*T+i])
				}
			}
			if l.Pos() != one.Pos() {
				t.Fatalf("step %d rank %d: position %d, global %d", step, r, l.Pos(), one.Pos())
			}
		}
	}
	if _, err := NewShardedLoader(toks, B, T, 3, 3); err == nil {
		t.Error("rank == world accepted")
	}
	if _, err := NewShardedLoader(toks[:40], B, T, 0, 3); err == nil {
		t.Error("too few tokens for the global batch accepted")
	}
}

func mustNext(t *testing.T, l *Loader, in, tg []int32) {
	t.Helper()
	if err := l.Next(in, tg); err != nil {
		t.Fatal(err)
	}
}
