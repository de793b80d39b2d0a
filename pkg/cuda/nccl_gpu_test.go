//go:build cgo && linux

package cuda

// nccl_gpu_test.go: NCCL on real GPUs. With one GPU it runs a communicator
// of one rank (the real library, ids, groups, streams, ncclAvg and ncclSum);
// with two or more it runs two ranks in this process, one context and one
// goroutine each, all-reducing device buffers. It skips without a GPU or
// libnccl.so.2, unless DRUTO_REQUIRE_GPU=1 (then those are failures).

import (
	"encoding/binary"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/druto/druto/internal/gputest"
)

func TestGPUNCCLAllReduce(t *testing.T) {
	libs, c0 := gpuContext(t)
	n, err := LoadNCCL(LoadOptions{})
	if err != nil {
		gputest.Skip(t, err)
	}
	t.Logf("NCCL %s at %s; %s=%s", n.Info().Version, n.Info().Path, EnvNCCLNVLS, os.Getenv(EnvNCCLNVLS))
	if os.Getenv(EnvNCCLNVLS) != "0" && os.Getenv(EnvNCCLNVLS) != "1" {
		t.Fatalf("%s is %q after LoadNCCL", EnvNCCLNVLS, os.Getenv(EnvNCCLNVLS))
	}
	count, err := libs.Driver.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	ctxs := []*Context{c0}
	if count >= 2 {
		c1, err := libs.Driver.NewContext(1)
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		ctxs = append(ctxs, c1)
	}
	world := len(ctxs)
	id, err := n.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	const elems = 1<<20 + 3 // not a multiple of anything NCCL likes
	// Rank r holds x_i = (r+1)·(i%1000) + 0.5; the sum and the mean over
	// ranks are exact in float32 for these small values.
	want := func(i int, op NCCLOp) float32 {
		var s float32
		for r := range world {
			s += float32((r+1)*(i%1000)) + 0.5
		}
		if op == NCCLAvg {
			return s / float32(world)
		}
		return s
	}
	results := make([][2][]float32, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, c := range ctxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r], errs[r] = ncclRank(n, c, world, r, id, elems)
		}()
	}
	wg.Wait()
	for r := range world {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for k, op := range []NCCLOp{NCCLAvg, NCCLSum} {
			for i, v := range results[r][k] {
				if w := want(i, op); math.Float32bits(v) != math.Float32bits(w) {
					t.Fatalf("rank %d op %d element %d: %g, want %g", r, op, i, v, w)
				}
			}
		}
	}
	t.Logf("RESULT nccl all-reduce %d ranks, %d float32, avg and sum exact", world, elems)
}

// ncclRank is one rank: upload its values twice, all-reduce one copy with
// ncclAvg and one with ncclSum in one group on a stream, download both.
func ncclRank(n *NCCL, c *Context, world, rank int, id NCCLUniqueID, elems int) ([2][]float32, error) {
	var out [2][]float32
	m, err := n.NewComm(c, world, rank, id)
	if err != nil {
		return out, err
	}
	defer m.Destroy()
	s, err := c.NewStream()
	if err != nil {
		return out, err
	}
	defer s.Destroy()
	host := make([]byte, 4*elems)
	for i := range elems {
		binary.LittleEndian.PutUint32(host[4*i:], math.Float32bits(float32((rank+1)*(i%1000))+0.5))
	}
	var bufs [2]DevicePtr
	for k := range bufs {
		if bufs[k], err = c.Pool().Alloc(uint64(len(host))); err != nil {
			return out, err
		}
		defer c.Pool().Free(bufs[k])
		if err := s.CopyHtoD(bufs[k], host); err != nil {
			return out, err
		}
	}
	err = m.Group(func() error {
		if err := m.AllReduce(bufs[0], bufs[0], elems, NCCLFloat32, NCCLAvg, s); err != nil {
			return err
		}
		return m.AllReduce(bufs[1], bufs[1], elems, NCCLFloat32, NCCLSum, s)
	})
	if err != nil {
		return out, err
	}
	if err := s.Synchronize(); err != nil {
		return out, err
	}
	if err := m.AsyncError(); err != nil {
		return out, err
	}
	for k := range bufs {
		b := make([]byte, len(host))
		if err := s.CopyDtoH(b, bufs[k]); err != nil {
			return out, err
		}
		out[k] = make([]float32, elems)
		for i := range out[k] {
			out[k][i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return out, nil
}
