package dist

import (
	"errors"
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// NCCLReducer is the GPU reducer (train.Reducer): NCCL's all-reduce with
// ncclAvg (NCCL 2.10+), in place on the flat gradient buffer, one call per
// bucket of its Plan, all the buckets of a step in one NCCL group, queued on
// the GPU device's own stream (gpu.Device.Stream) after the backward pass
// and before the gradient norm, so the host never waits for it. The loss is
// averaged over the group's control channel (a host value already).
//
// The ranks meet in JoinNCCL before any device exists; the communicator is
// made at the first AllReduceMean, on that call's device (ncclCommInitRank
// on the device's context thread; every rank blocks there until all have
// come). The device must have Context and Stream methods, as *gpu.Device
// does. NCCL's ring and tree algorithms give every rank the same result.
type NCCLReducer struct {
	g     *Group
	id    cuda.NCCLUniqueID
	plan  Plan
	open  opener
	comm  comm
	dev   device.Device // the device comm was made on
	spans []span
	err   error // sticky: communicator creation or a collective failed
}

// gpuDevice is what NCCLReducer needs of a device; *gpu.Device has it.
type gpuDevice interface {
	Context() *cuda.Context
	Stream() *cuda.Stream
}

// span is count float32 at ptr, one bucket in device memory.
type span struct {
	ptr   cuda.DevicePtr
	count int
}

// comm is one rank's communicator as the reducer uses it: ncclComm over
// cuda.NCCLComm, or a fake in tests.
type comm interface {
	// allReduceAvg averages each span over the ranks in place, the spans
	// queued together (one NCCL group) on the device's stream.
	allReduceAvg(spans []span) error
	// close frees the communicator; abort, after a failure, does not wait
	// for queued work that may never finish.
	close(abort bool) error
}

// opener makes the communicator of rank of world on dev.
type opener func(dev device.Device, world, rank int, id cuda.NCCLUniqueID) (comm, error)

// JoinNCCL loads NCCL (lo says where from), makes the communicator's unique
// id on rank 0, joins the group of cfg with the id as the broadcast blob,
// and returns the reducer. Every rank loads NCCL before the rendezvous, so
// a rank without it fails at once with the loader's reason.
func JoinNCCL(cfg Config, plan Plan, o Options, lo cuda.LoadOptions) (*NCCLReducer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lib, err := cuda.LoadNCCL(lo)
	if err != nil {
		return nil, fmt.Errorf("dist: rank %d: NCCL: %w", cfg.Rank, err)
	}
	if cfg.Rank == 0 {
		id, err := lib.UniqueID()
		if err != nil {
			return nil, fmt.Errorf("dist: rank 0: NCCL unique id: %w", err)
		}
		o.Blob = id[:]
	}
	g, err := Join(cfg, o)
	if err != nil {
		return nil, err
	}
	r, err := newNCCLReducer(g, plan, cudaOpener(lib))
	if err != nil {
		g.Close()
		return nil, err
	}
	return r, nil
}

// newNCCLReducer takes the unique id from the group's blob.
func newNCCLReducer(g *Group, plan Plan, open opener) (*NCCLReducer, error) {
	r := &NCCLReducer{g: g, plan: plan, open: open}
	if g.World() > 1 {
		if len(g.Blob()) != cuda.NCCLUniqueIDBytes {
			return nil, fmt.Errorf("dist: rank %d: rank 0 sent a %d-byte NCCL unique id, want %d", g.Rank(), len(g.Blob()), cuda.NCCLUniqueIDBytes)
		}
		copy(r.id[:], g.Blob())
	}
	if plan.Buckets != nil {
		if err := plan.Check(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// cudaOpener makes real communicators with lib.
func cudaOpener(lib *cuda.NCCL) opener {
	return func(dev device.Device, world, rank int, id cuda.NCCLUniqueID) (comm, error) {
		gd, ok := dev.(gpuDevice)
		if !ok {
			return nil, fmt.Errorf("dist: rank %d: the NCCL reducer needs a GPU device, not %s (CPU ranks use the ring reducer)", rank, dev.Name())
		}
		c, err := lib.NewComm(gd.Context(), world, rank, id)
		if err != nil {
			return nil, fmt.Errorf("dist: rank %d: NCCL communicator: %w", rank, err)
		}
		return &ncclComm{c: c, s: gd.Stream()}, nil
	}
}

// ncclComm is comm over cuda.NCCLComm on one stream.
type ncclComm struct {
	c *cuda.NCCLComm
	s *cuda.Stream
}

func (m *ncclComm) allReduceAvg(spans []span) error {
	err := m.c.Group(func() error {
		for _, sp := range spans {
			if err := m.c.AllReduce(sp.ptr, sp.ptr, sp.count, cuda.NCCLFloat32, cuda.NCCLAvg, m.s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return m.c.AsyncError()
}

func (m *ncclComm) close(abort bool) error {
	if abort {
		return m.c.Abort()
	}
	return m.c.Destroy()
}

// Rank returns this process's rank.
func (r *NCCLReducer) Rank() int { return r.g.Rank() }

// World returns the number of ranks.
func (r *NCCLReducer) World() int { return r.g.World() }

// Group returns the reducer's group.
func (r *NCCLReducer) Group() *Group { return r.g }

// Plan returns the buckets (empty until the first AllReduceMean when the
// reducer was given a zero plan).
func (r *NCCLReducer) Plan() Plan { return r.plan }

// MeanLoss returns the mean of v over ranks, the same bits on every rank.
func (r *NCCLReducer) MeanLoss(v float32) (float32, error) { return r.g.MeanFloat32(v) }

// AllReduceMean queues the average over ranks of the float32 gradients in
// dev's memory, in place, bucket by bucket in one NCCL group on dev's
// stream. It returns when the work is queued; dev's later work on the same
// stream sees the averages, and dev.Sync reports a failure of the kernels.
func (r *NCCLReducer) AllReduceMean(dev device.Device, grads *tensor.Tensor) error {
	if grads == nil || grads.DType != tensor.F32 || grads.IsHost() {
		return fmt.Errorf("dist: NCCL all-reduce wants float32 gradients in GPU memory, got %v", desc(grads))
	}
	if err := preparePlan(&r.plan, grads.Numel()); err != nil {
		return err
	}
	if r.g.World() == 1 {
		return nil
	}
	if r.err != nil {
		return r.err
	}
	if r.comm == nil {
		c, err := r.open(dev, r.g.World(), r.g.Rank(), r.id)
		if err != nil {
			r.err = err
			return err
		}
		r.comm, r.dev = c, dev
	} else if dev != r.dev {
		return fmt.Errorf("dist: rank %d: the NCCL communicator was made on %s, not %s", r.g.Rank(), r.dev.Name(), dev.Name())
	}
	r.spans = r.spans[:0]
	base := cuda.DevicePtr(grads.Dev)
	for _, b := range r.plan.Buckets {
		r.spans = append(r.spans, span{ptr: base.Add(4 * uint64(b.Offset)), count: b.Len})
	}
	if err := r.comm.allReduceAvg(r.spans); err != nil {
		r.err = fmt.Errorf("dist: rank %d: NCCL all-reduce: %w", r.g.Rank(), err)
		return r.err
	}
	return nil
}

// Close destroys the communicator (aborts it after a failure) and closes
// the group.
func (r *NCCLReducer) Close() error {
	var err error
	if r.comm != nil {
		err = r.comm.close(r.err != nil)
		r.comm = nil
	}
	return errors.Join(err, r.g.Close())
}
