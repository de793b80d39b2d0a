package dist

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// fakeHub stands in for NCCL between the ranks of a test: "device memory"
// is a host slice per rank at a fake address, and allReduceAvg waits for
// every rank and averages each span (sum in rank order, then / W).
type fakeHub struct {
	mu      sync.Mutex
	world   int
	mem     map[int]map[cuda.DevicePtr][]float32 // rank -> base address -> storage
	pending map[int][]span
	round   chan struct{}
	opened  map[int]int               // rank -> communicators made
	ids     map[int]cuda.NCCLUniqueID // rank -> id it was given
	calls   map[int][][]span          // rank -> spans of each call
	fail    error
}

func newFakeHub(world int) *fakeHub {
	return &fakeHub{world: world, mem: map[int]map[cuda.DevicePtr][]float32{}, pending: map[int][]span{},
		round: make(chan struct{}), opened: map[int]int{}, ids: map[int]cuda.NCCLUniqueID{}, calls: map[int][][]span{}}
}

// alloc gives rank a "device" gradient tensor holding v.
func (h *fakeHub) alloc(rank int, base cuda.DevicePtr, v []float32) *tensor.Tensor {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mem[rank] == nil {
		h.mem[rank] = map[cuda.DevicePtr][]float32{}
	}
	h.mem[rank][base] = v
	return tensor.OnDevice(tensor.F32, uintptr(base), len(v))
}

// at returns rank's storage for count floats at p.
func (h *fakeHub) at(rank int, p cuda.DevicePtr, count int) []float32 {
	for base, v := range h.mem[rank] {
		if p >= base && p+cuda.DevicePtr(4*count) <= base+cuda.DevicePtr(4*len(v)) {
			off := int(p-base) / 4
			return v[off : off+count]
		}
	}
	panic(fmt.Sprintf("fake: rank %d: no memory at %#x (+%d floats)", rank, p, count))
}

func (h *fakeHub) opener() opener {
	return func(dev device.Device, world, rank int, id cuda.NCCLUniqueID) (comm, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.fail != nil {
			return nil, h.fail
		}
		h.opened[rank]++
		h.ids[rank] = id
		return &fakeComm{h: h, rank: rank}, nil
	}
}

type fakeComm struct {
	h    *fakeHub
	rank int
}

func (c *fakeComm) allReduceAvg(spans []span) error {
	h := c.h
	h.mu.Lock()
	h.calls[c.rank] = append(h.calls[c.rank], append([]span(nil), spans...))
	h.pending[c.rank] = spans
	round := h.round
	if len(h.pending) < h.world {
		h.mu.Unlock()
		<-round
		return nil
	}
	// The last rank to arrive reduces for everyone.
	for i := range spans {
		views := make([][]float32, h.world)
		for r := range h.world {
			views[r] = h.at(r, h.pending[r][i].ptr, h.pending[r][i].count)
		}
		for j := range views[0] {
			acc := views[0][j]
			for r := 1; r < h.world; r++ {
				acc += views[r][j]
			}
			for r := range h.world {
				views[r][j] = acc / float32(h.world)
			}
		}
	}
	h.pending = map[int][]span{}
	h.round = make(chan struct{})
	h.mu.Unlock()
	close(round)
	return nil
}

func (c *fakeComm) close(bool) error { return nil }

// ncclRanks joins world ranks on loopback, rank 0 broadcasting id, and
// makes their NCCL reducers over hub.
func ncclRanks(t *testing.T, world int, id cuda.NCCLUniqueID, plan Plan, hub *fakeHub) []*NCCLReducer {
	t.Helper()
	groups, errs := joinAll(t, world, nil, 10*time.Second, 10*time.Second, id[:], false)
	noErrors(t, errs)
	out := make([]*NCCLReducer, world)
	for r, g := range groups {
		var err error
		if out[r], err = newNCCLReducer(g, plan, hub.opener()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestNCCLReducerHostLogic: the unique id reaches every rank through the
// rendezvous; the communicator is made once per rank, on the first
// all-reduce; each call covers the buffer with one span per bucket, in the
// plan's reverse order, at base + 4·offset; and the averages land on every
// rank. MeanLoss goes over the control channel.
func TestNCCLReducerHostLogic(t *testing.T) {
	const world, n = 2, 1000
	var id cuda.NCCLUniqueID
	for i := range id {
		id[i] = byte(i ^ 0x5a)
	}
	plan, err := FlatPlan(n, 4*300)
	if err != nil {
		t.Fatal(err)
	}
	hub := newFakeHub(world)
	rs := ncclRanks(t, world, id, plan, hub)
	grads := make([]*tensor.Tensor, world)
	inputs := make([][]float32, world)
	for r := range world {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r*n + i)
		}
		inputs[r] = append([]float32(nil), v...)
		grads[r] = hub.alloc(r, cuda.DevicePtr(0x10000*(r+1)), v)
	}
	dev := cpu.New(device.Options{Threads: 1}) // unused by the fake opener
	for step := range 2 {
		errs := each(groupsOf(rs), func(r int, _ *Group) error { return rs[r].AllReduceMean(dev, grads[r]) })
		noErrors(t, errs)
		if step == 0 {
			for r := range world {
				want := hub.mem[r][cuda.DevicePtr(0x10000*(r+1))]
				for i := range want {
					if m := (inputs[0][i] + inputs[1][i]) / 2; want[i] != m {
						t.Fatalf("rank %d element %d: %g, want the mean %g", r, i, want[i], m)
					}
				}
			}
		}
	}
	for r := range world {
		if hub.opened[r] != 1 || hub.ids[r] != id {
			t.Fatalf("rank %d: %d communicators, id intact %v", r, hub.opened[r], hub.ids[r] == id)
		}
		calls := hub.calls[r]
		if len(calls) != 2 {
			t.Fatalf("rank %d: %d all-reduce calls, want 2", r, len(calls))
		}
		base := cuda.DevicePtr(0x10000 * (r + 1))
		want := []span{{base + 4*700, 300}, {base + 4*400, 300}, {base + 4*100, 300}, {base, 100}}
		for k, c := range calls {
			if !slices.Equal(c, want) {
				t.Fatalf("rank %d call %d spans %v, want %v", r, k, c, want)
			}
		}
	}
	losses := make([]float32, world)
	noErrors(t, each(groupsOf(rs), func(r int, _ *Group) error {
		var err error
		losses[r], err = rs[r].MeanLoss(float32(r) + 1.5)
		return err
	}))
	if losses[0] != 2 || math.Float32bits(losses[1]) != math.Float32bits(losses[0]) {
		t.Fatalf("mean losses %v, want 2 on both", losses)
	}
}

// TestNCCLReducerErrors: gradients on the host, of another dtype or size,
// a bad id and a failing communicator are reported with the rank; a
// communicator failure is sticky.
func TestNCCLReducerErrors(t *testing.T) {
	dev := cpu.New(device.Options{Threads: 1})
	groups, errs := joinAll(t, 2, nil, 10*time.Second, 10*time.Second, []byte("short"), false)
	noErrors(t, errs)
	if _, err := newNCCLReducer(groups[1], Plan{}, nil); err == nil || !strings.Contains(err.Error(), "5-byte NCCL unique id") {
		t.Fatalf("short id: %v", err)
	}
	var id cuda.NCCLUniqueID
	id[0] = 1
	hub := newFakeHub(2)
	rs := ncclRanks(t, 2, id, Plan{}, hub)
	if err := rs[0].AllReduceMean(dev, tensor.New(tensor.F32, 8)); err == nil || !strings.Contains(err.Error(), "GPU memory") {
		t.Fatalf("host gradients: %v", err)
	}
	if err := rs[0].AllReduceMean(dev, tensor.OnDevice(tensor.BF16, 0x1000, 8)); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Fatalf("bf16 gradients: %v", err)
	}
	hub.fail = errors.New("dist: rank 0: NCCL communicator: cuda: ncclCommInitRank: ncclSystemError (2)")
	g := hub.alloc(0, 0x1000, make([]float32, 8))
	for range 2 {
		if err := rs[0].AllReduceMean(dev, g); err == nil || !strings.Contains(err.Error(), "ncclCommInitRank") {
			t.Fatalf("communicator failure: %v", err)
		}
	}
	if rs[0].Plan().Total != 8 {
		t.Fatalf("lazy plan %+v", rs[0].Plan())
	}
	if err := rs[0].AllReduceMean(dev, hub.alloc(0, 0x9000, make([]float32, 9))); err == nil || !strings.Contains(err.Error(), "covers 8 elements") {
		t.Fatalf("size change: %v", err)
	}
	// The real opener refuses a device without a CUDA context and stream.
	open := cudaOpener(nil)
	if _, err := open(dev, 2, 1, id); err == nil || !strings.Contains(err.Error(), "needs a GPU device") || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("CPU device: %v", err)
	}
	// A world of one does nothing and needs no id.
	one, err := Join(Config{World: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := newNCCLReducer(one, Plan{}, nil)
	if err != nil || r1.AllReduceMean(dev, tensor.OnDevice(tensor.F32, 0x1000, 4)) != nil {
		t.Fatalf("world of one: %v", err)
	}
}

// TestJoinNCCLWithoutLibrary: a rank on a machine without libnccl fails
// before the rendezvous, naming the library and what to set.
func TestJoinNCCLWithoutLibrary(t *testing.T) {
	_, err := JoinNCCL(Config{Rank: 1, World: 2, LocalRank: 1, MasterAddr: "127.0.0.1", MasterPort: 1, Timeout: time.Second},
		Plan{}, Options{}, cuda.LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true})
	if err == nil || !strings.Contains(err.Error(), "rank 1: NCCL") ||
		!(strings.Contains(err.Error(), "libnccl.so.2") || errors.Is(err, cuda.ErrNoGPUSupport)) {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("dist: ")) {
		t.Fatalf("no package prefix: %v", err)
	}
}
