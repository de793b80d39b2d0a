package dist

import (
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// rings joins world ranks on loopback with ring links and returns their
// reducers with plan.
func rings(t *testing.T, world int, plan Plan) []*Ring {
	t.Helper()
	groups, errs := joinAll(t, world, nil, 10*time.Second, 10*time.Second, nil, true)
	noErrors(t, errs)
	out := make([]*Ring, world)
	for r, g := range groups {
		var err error
		if out[r], err = NewRing(g, plan); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// ringOrderMean is the ring's documented arithmetic written out plainly:
// chunk c of every bucket summed in float32 over ranks c, c+1, ..., c-1
// (mod W), then divided by W.
func ringOrderMean(inputs [][]float32, plan Plan) []float32 {
	W := len(inputs)
	out := make([]float32, plan.Total)
	for _, b := range plan.Buckets {
		n := b.Len
		for c := range W {
			lo, hi := b.Offset+c*n/W, b.Offset+(c+1)*n/W
			for i := lo; i < hi; i++ {
				acc := inputs[c][i]
				for k := 1; k < W; k++ {
					acc = acc + inputs[(c+k)%W][i]
				}
				out[i] = acc / float32(W)
			}
		}
	}
	return out
}

// TestRingAllReduce: for 2, 3 and 4 ranks and buckets of several sizes
// (one element per chunk and fewer elements than ranks included), every
// rank ends with the same bits, those are exactly the fixed-order float32
// sum over ranks divided by W, and they agree with the float64 mean within
// the tolerance rule at scale 1. The bound behind scale 1: a float32 sum
// of W terms of magnitude <= 1 errs by at most (W-1)·2^-24·W, and the mean by
// (W-1)·2^-24 + 2^-24 <= 2.4e-7 for W = 4, under F32's atol of 1e-6.
func TestRingAllReduce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, world := range []int{2, 3, 4} {
		for _, tc := range []struct {
			n, bucketBytes int
		}{{1000, 0}, {1001, 4 * 97}, {7, 4 * 3}, {5, 4}} {
			plan, err := FlatPlan(tc.n, tc.bucketBytes)
			if err != nil {
				t.Fatal(err)
			}
			rs := rings(t, world, plan)
			inputs := make([][]float32, world)
			grads := make([]*tensor.Tensor, world)
			for r := range world {
				inputs[r] = make([]float32, tc.n)
				for i := range inputs[r] {
					inputs[r][i] = float32(rng.Float64()*2 - 1)
				}
				grads[r], _ = tensor.FromF32(append([]float32(nil), inputs[r]...), tc.n)
			}
			errs := make([]error, world)
			done := make(chan int)
			for r := range world {
				go func() {
					errs[r] = rs[r].AllReduceMean(cpu.New(device.Options{Threads: 1}), grads[r])
					done <- r
				}()
			}
			for range world {
				<-done
			}
			noErrors(t, errs)
			want64 := make([]float64, tc.n)
			for i := range want64 {
				for r := range world {
					want64[i] += float64(inputs[r][i])
				}
				want64[i] /= float64(world)
			}
			exact := ringOrderMean(inputs, plan)
			for r := range world {
				got := grads[r].F32()
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(grads[0].F32()[i]) {
						t.Fatalf("W=%d n=%d: rank %d element %d is %x, rank 0 has %x", world, tc.n, r, i,
							math.Float32bits(got[i]), math.Float32bits(grads[0].F32()[i]))
					}
					if math.Float32bits(got[i]) != math.Float32bits(exact[i]) {
						t.Fatalf("W=%d n=%d: element %d is %g, the fixed-order sum gives %g", world, tc.n, i, got[i], exact[i])
					}
				}
				g64 := make([]float64, tc.n)
				for i, v := range got {
					g64[i] = float64(v)
				}
				if err := tensor.Close(g64, want64, tensor.F32, 1); err != nil {
					t.Fatalf("W=%d n=%d rank %d vs the float64 mean: %v", world, tc.n, r, err)
				}
			}
			for _, r := range rs {
				r.Close()
			}
		}
	}
}

// TestRingDeterministic: the same inputs give the same bits run after run.
func TestRingDeterministic(t *testing.T) {
	plan, _ := FlatPlan(4099, 4*1000)
	var first []float32
	for run := range 3 {
		rs := rings(t, 3, plan)
		grads := make([]*tensor.Tensor, 3)
		for r := range grads {
			v := make([]float32, plan.Total)
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			grads[r], _ = tensor.FromF32(v, len(v))
		}
		errs := each(groupsOf(rs), func(r int, _ *Group) error {
			return rs[r].AllReduceMean(cpu.New(device.Options{Threads: 1}), grads[r])
		})
		noErrors(t, errs)
		if run == 0 {
			first = append([]float32(nil), grads[1].F32()...)
			continue
		}
		for i, v := range grads[1].F32() {
			if math.Float32bits(v) != math.Float32bits(first[i]) {
				t.Fatalf("run %d element %d: %g, run 0 gave %g", run, i, v, first[i])
			}
		}
	}
}

// groupsOf returns the groups of the ranks' reducers.
func groupsOf[R interface{ Group() *Group }](rs []R) []*Group {
	gs := make([]*Group, len(rs))
	for i, r := range rs {
		gs[i] = r.Group()
	}
	return gs
}

// TestRingInfSpreads: an Inf on one rank makes the average non-finite on
// every rank (so every rank's GradScaler skips), and NaN spreads too.
func TestRingInfSpreads(t *testing.T) {
	rs := rings(t, 3, Plan{})
	grads := make([]*tensor.Tensor, 3)
	for r := range grads {
		v := make([]float32, 100)
		for i := range v {
			v[i] = 0.5
		}
		if r == 2 {
			v[17] = float32(math.Inf(1))
			v[71] = float32(math.NaN())
		}
		grads[r], _ = tensor.FromF32(v, len(v))
	}
	noErrors(t, each(groupsOf(rs), func(r int, _ *Group) error {
		return rs[r].AllReduceMean(cpu.New(device.Options{Threads: 1}), grads[r])
	}))
	for r := range grads {
		v := grads[r].F32()
		if !math.IsInf(float64(v[17]), 1) || !math.IsNaN(float64(v[71])) || v[0] != 0.5 {
			t.Fatalf("rank %d: [17]=%g [71]=%g [0]=%g", r, v[17], v[71], v[0])
		}
	}
	if p := rs[0].Plan(); p.Total != 100 || len(p.Buckets) != 1 {
		t.Fatalf("lazy plan %+v", p)
	}
}

// TestRingErrors: wrong inputs are refused before any traffic, and a rank
// that dies mid-run makes its peers fail fast with its rank named.
func TestRingErrors(t *testing.T) {
	plan, _ := FlatPlan(10, 0)
	rs := rings(t, 2, plan)
	dev := cpu.New(device.Options{Threads: 1})
	if err := rs[0].AllReduceMean(dev, tensor.New(tensor.BF16, 10)); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Fatalf("bf16 gradients: %v", err)
	}
	if err := rs[0].AllReduceMean(dev, tensor.New(tensor.F32, 11)); err == nil || !strings.Contains(err.Error(), "covers 10 elements") {
		t.Fatalf("wrong size: %v", err)
	}
	rs[1].Close()
	start := time.Now()
	err := rs[0].AllReduceMean(dev, tensor.New(tensor.F32, 10))
	if err == nil || !strings.Contains(err.Error(), "rank 1") || time.Since(start) > 5*time.Second {
		t.Fatalf("peer gone: %v after %v", err, time.Since(start))
	}
	if err2 := rs[0].AllReduceMean(dev, tensor.New(tensor.F32, 10)); err2 == nil {
		t.Fatal("a broken ring reduced again")
	}
	g, err := Join(Config{World: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRing(g, Plan{Buckets: []Bucket{{0, 3}}, Total: 4, Cap: 4}); err == nil {
		t.Fatal("a plan with a gap was accepted")
	}
}

// BenchmarkRingAllReduce: 2 ranks on loopback averaging 16 MiB of float32
// each per iteration; reports the gradient bytes reduced per second.
func BenchmarkRingAllReduce(b *testing.B) {
	const n = 4 << 20
	plan, _ := FlatPlan(n, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	rs := make([]*Ring, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := Options{}
			if r == 0 {
				o.Listener = ln
			}
			cfg := Config{Rank: r, World: 2, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: 10 * time.Second}
			rs[r], errs[r] = JoinRing(cfg, plan, o)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	defer rs[0].Close()
	defer rs[1].Close()
	grads := []*tensor.Tensor{tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)}
	dev := cpu.New(device.Options{Threads: 1})
	b.SetBytes(4 * n)
	b.ResetTimer()
	for range b.N {
		wg.Add(2)
		for r := range 2 {
			go func() {
				defer wg.Done()
				errs[r] = rs[r].AllReduceMean(dev, grads[r])
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			b.Fatal(errs)
		}
	}
}
