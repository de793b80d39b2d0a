package dist

import (
	"bytes"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// loopback returns a listener for rank 0 on 127.0.0.1 and the configs of
// world ranks pointing at it.
func loopback(t *testing.T, world int, timeout time.Duration) (net.Listener, []Config) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cfgs := make([]Config, world)
	for r := range cfgs {
		cfgs[r] = Config{Rank: r, World: world, LocalRank: r, LocalWorld: world, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: timeout}
	}
	return ln, cfgs
}

// joinAll joins the given ranks (all of world when ranks is nil) in
// goroutines; rank 0 gets blob and the listener. join is the rendezvous
// timeout, op the groups' operation timeout (kept apart, so that a test of
// a short operation timeout does not also need a fast join under load).
func joinAll(t *testing.T, world int, ranks []int, join, op time.Duration, blob []byte, ring bool) ([]*Group, []error) {
	t.Helper()
	ln, cfgs := loopback(t, world, join)
	if ranks != nil && !contains(ranks, 0) {
		ln.Close() // no rank 0: nobody listens
	}
	if ranks == nil {
		for r := range world {
			ranks = append(ranks, r)
		}
	}
	groups, errs := make([]*Group, world), make([]error, world)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := Options{Ring: ring, OpTimeout: op}
			if r == 0 {
				o.Blob, o.Listener = blob, ln
			}
			groups[r], errs[r] = Join(cfgs[r], o)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, g := range groups {
			if g != nil {
				g.Close()
			}
		}
	})
	return groups, errs
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// each runs fn on every group at once and returns the errors.
func each(groups []*Group, fn func(r int, g *Group) error) []error {
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for r, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(r, g)
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestRendezvous: 2 and 3 ranks meet, every rank receives rank 0's blob,
// passes barriers, and gets the same mean and sums, in rank order.
func TestRendezvous(t *testing.T) {
	for _, world := range []int{2, 3} {
		blob := bytes.Repeat([]byte{0xab, 0x01, 0x00}, 43) // 129 bytes, zeros inside
		groups, errs := joinAll(t, world, nil, 10*time.Second, 10*time.Second, blob, true)
		noErrors(t, errs)
		for r, g := range groups {
			if g.Rank() != r || g.World() != world || !bytes.Equal(g.Blob(), blob) {
				t.Fatalf("world %d rank %d: rank %d world %d blob %d bytes", world, r, g.Rank(), g.World(), len(g.Blob()))
			}
		}
		noErrors(t, each(groups, func(r int, g *Group) error { return g.Barrier() }))
		// Values whose float32 sum depends on the order: rank order is the rule.
		vals := []float32{1e8, 1, -1e8, 3.25}[:world]
		var want float32
		for _, v := range vals {
			want += v
		}
		want /= float32(world)
		means := make([]float32, world)
		sums := make([][]float32, world)
		noErrors(t, each(groups, func(r int, g *Group) error {
			var err error
			if means[r], err = g.MeanFloat32(vals[r]); err != nil {
				return err
			}
			sums[r], err = g.SumFloat32s([]float32{float32(r), 1, vals[r]})
			return err
		}))
		for r := range world {
			if math.Float32bits(means[r]) != math.Float32bits(want) {
				t.Fatalf("world %d rank %d: mean %g, want %g (the rank-ordered float32 sum / world)", world, r, means[r], want)
			}
			if sums[r][1] != float32(world) || sums[r][0] != float32(world*(world-1)/2) || sums[r][2] != want*float32(world) {
				t.Fatalf("world %d rank %d: sums %v", world, r, sums[r])
			}
		}
	}
}

// TestRendezvousMissingRank: with rank 2 of 3 absent, rank 0 times out and
// every rank that came names rank 2.
func TestRendezvousMissingRank(t *testing.T) {
	start := time.Now()
	_, errs := joinAll(t, 3, []int{0, 1}, 700*time.Millisecond, 700*time.Millisecond, nil, true)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timing out took %v", d)
	}
	for r := range 2 {
		if errs[r] == nil {
			t.Fatalf("rank %d joined without rank 2", r)
		}
		msg := errs[r].Error()
		if !strings.Contains(msg, "rank 2 did not arrive") || !strings.Contains(msg, "2 of 3 ranks joined") {
			t.Errorf("rank %d: %q does not name the missing rank", r, msg)
		}
	}
	if !strings.Contains(errs[0].Error(), "timed out after 700ms") {
		t.Errorf("rank 0: %q does not give the timeout", errs[0])
	}
}

// TestRendezvousNoRankZero: a rank whose rank 0 never comes says where it
// looked and what to check.
func TestRendezvousNoRankZero(t *testing.T) {
	_, errs := joinAll(t, 2, []int{1}, 500*time.Millisecond, 500*time.Millisecond, nil, false)
	msg := errs[1].Error()
	for _, w := range []string{"rank 1", "no rank 0 at 127.0.0.1:", "MASTER_ADDR", "MASTER_PORT"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q does not say %q", msg, w)
		}
	}
}

// TestRendezvousMismatch: a rank with another WORLD_SIZE, or a rank twice,
// fails the rendezvous everywhere with the reason.
func TestRendezvousMismatch(t *testing.T) {
	ln, cfgs := loopback(t, 3, 5*time.Second)
	odd := cfgs[1]
	odd.World, odd.LocalWorld = 2, 2
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, errs[0] = Join(cfgs[0], Options{Listener: ln}) }()
	go func() { defer wg.Done(); _, errs[1] = Join(odd, Options{}) }()
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 1 has WORLD_SIZE=2 but rank 0 has 3") {
			t.Errorf("rank %d: %v", r, err)
		}
	}

	ln, cfgs = loopback(t, 3, 5*time.Second)
	errs = make([]error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); _, errs[0] = Join(cfgs[0], Options{Listener: ln}) }()
	for i := 1; i <= 2; i++ {
		go func() { defer wg.Done(); _, errs[i] = Join(cfgs[1], Options{}) }()
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "two processes claim rank 1") {
		t.Errorf("rank 0: %v", errs[0])
	}
}

// TestBarrierNamesLateRank: a barrier that one rank does not reach fails
// within the operation timeout on the others, naming it.
func TestBarrierNamesLateRank(t *testing.T) {
	groups, errs := joinAll(t, 3, nil, 10*time.Second, 600*time.Millisecond, nil, false)
	noErrors(t, errs)
	errs = each(groups[:2], func(r int, g *Group) error { return g.Barrier() })
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2 did not reach the barrier") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestWorldOfOne: a single rank needs no network and averages to itself.
func TestWorldOfOne(t *testing.T) {
	g, err := Join(Config{World: 1}, Options{Blob: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if m, err := g.MeanFloat32(2.5); err != nil || m != 2.5 || g.Barrier() != nil || string(g.Blob()) != "x" {
		t.Fatalf("mean %g %v, blob %q", m, err, g.Blob())
	}
}
