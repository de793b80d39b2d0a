package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Ring is the CPU reducer (train.Reducer): a ring all-reduce over TCP
// between the rank processes, bucket by bucket of its Plan. Each bucket is
// cut into World chunks; reduce-scatter passes partial sums around the ring
// (World-1 steps, each rank adding its own values in float32), the rank
// that ends with a chunk's full sum divides it by World, and all-gather
// passes the finished chunks around (World-1 steps). Every element is
// summed in one fixed order, so all ranks end with the same bits.
//
// Gradients in host memory (the CPU device) are reduced in place; others
// are copied to the host and back through the device's Download and Upload,
// so Ring works, slowly, with any device. After a network error the ring is
// closed and every later call fails.
type Ring struct {
	g    *Group
	plan Plan
	host *tensor.Tensor // staging for gradients in device memory
	out  []byte         // encoded chunk being sent
	in   []byte         // encoded chunk being received
	got  []float32      // decoded chunk received (reused)
	seq  uint32
	err  error // sticky: the first network failure
}

// NewRing returns the ring reducer over g, which must have been joined
// with Options.Ring. A zero plan is made at the first AllReduceMean:
// FlatPlan of the gradients' size with DefaultBucketBytes.
func NewRing(g *Group, plan Plan) (*Ring, error) {
	if g == nil {
		return nil, errors.New("dist: NewRing with a nil group")
	}
	if g.World() > 1 && (g.next == nil || g.prev == nil) {
		return nil, errors.New("dist: NewRing on a group joined without Options.Ring")
	}
	if plan.Buckets != nil {
		if err := plan.Check(); err != nil {
			return nil, err
		}
	}
	return &Ring{g: g, plan: plan}, nil
}

// JoinRing joins the group of cfg with ring links (Join with o.Ring set)
// and returns its ring reducer.
func JoinRing(cfg Config, plan Plan, o Options) (*Ring, error) {
	o.Ring = true
	g, err := Join(cfg, o)
	if err != nil {
		return nil, err
	}
	r, err := NewRing(g, plan)
	if err != nil {
		g.Close()
		return nil, err
	}
	return r, nil
}

// Rank returns this process's rank.
func (r *Ring) Rank() int { return r.g.Rank() }

// World returns the number of ranks.
func (r *Ring) World() int { return r.g.World() }

// Group returns the ring's group.
func (r *Ring) Group() *Group { return r.g }

// Plan returns the buckets (empty until the first AllReduceMean when
// NewRing was given a zero plan).
func (r *Ring) Plan() Plan { return r.plan }

// MeanLoss returns the mean of v over ranks, the same bits on every rank.
func (r *Ring) MeanLoss(v float32) (float32, error) { return r.g.MeanFloat32(v) }

// Close closes the group's connections.
func (r *Ring) Close() error { return r.g.Close() }

// AllReduceMean replaces the float32 gradients on every rank by their mean
// over ranks, computed as the type comment says. dev is synchronised first
// and its error, if any, returned.
func (r *Ring) AllReduceMean(dev device.Device, grads *tensor.Tensor) error {
	if grads == nil || grads.DType != tensor.F32 {
		return fmt.Errorf("dist: ring all-reduce wants float32 gradients, got %v", desc(grads))
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
	if err := dev.Sync(); err != nil {
		return err
	}
	var v []float32
	if grads.IsHost() {
		v = grads.F32()
	} else {
		if r.host == nil || r.host.Numel() != grads.Numel() {
			r.host = tensor.New(tensor.F32, grads.Numel())
		}
		dev.Download(r.host, grads)
		if err := dev.Sync(); err != nil {
			return err
		}
		v = r.host.F32()
	}
	for _, b := range r.plan.Buckets {
		if err := r.allReduce(v[b.Offset:b.End()]); err != nil {
			r.err = err
			r.g.Close() // unblocks a peer's write and marks the ring dead
			return err
		}
	}
	if !grads.IsHost() {
		dev.Upload(grads, r.host)
		return dev.Sync()
	}
	return nil
}

// preparePlan makes a flat plan for n elements when p is empty and checks
// that p covers exactly n.
func preparePlan(p *Plan, n int) error {
	if p.Buckets == nil && p.Total == 0 {
		fp, err := FlatPlan(n, DefaultBucketBytes)
		if err != nil {
			return err
		}
		*p = fp
	}
	if p.Total != n {
		return fmt.Errorf("dist: the bucket plan covers %d elements, the gradients have %d", p.Total, n)
	}
	return nil
}

// allReduce averages x over the ring in place (reduce-scatter, divide,
// all-gather).
func (r *Ring) allReduce(x []float32) error {
	W, me := r.g.World(), r.g.Rank()
	n := len(x)
	chunk := func(c int) []float32 {
		c = ((c % W) + W) % W
		return x[c*n/W : (c+1)*n/W]
	}
	deadline := time.Now().Add(r.g.opTimeout)
	r.g.next.SetDeadline(deadline)
	r.g.prev.SetDeadline(deadline)
	// Reduce-scatter: at step s send the partial sum of chunk me-s (ranks
	// me-s .. me), receive chunk me-s-1's (ranks me-s-1 .. me-1) and add
	// this rank's values to it.
	for s := 0; s < W-1; s++ {
		dst := chunk(me - s - 1)
		got, err := r.sendRecv(chunk(me-s), len(dst))
		if err != nil {
			return err
		}
		for i := range dst {
			dst[i] = got[i] + dst[i]
		}
	}
	// This rank now holds the full sum of chunk me+1.
	own := chunk(me + 1)
	w := float32(W)
	for i := range own {
		own[i] /= w
	}
	// All-gather: pass the finished chunks on.
	for s := 0; s < W-1; s++ {
		dst := chunk(me - s)
		got, err := r.sendRecv(chunk(me+1-s), len(dst))
		if err != nil {
			return err
		}
		copy(dst, got)
	}
	return nil
}

// sendRecv sends send to the next rank while receiving n values from the
// previous one (both at once: a ring of blocking sends would deadlock once
// the chunks outgrow the socket buffers). Each message carries a sequence
// number and its length, checked on arrival.
func (r *Ring) sendRecv(send []float32, n int) ([]float32, error) {
	r.seq++
	r.out = encode(r.out[:0], r.seq, send)
	werr := make(chan error, 1)
	go func() {
		_, err := r.g.next.Write(r.out)
		werr <- err
	}()
	got, rerr := r.recv(n)
	if rerr != nil {
		r.g.next.Close() // do not wait for a write the next rank may never read
	}
	if err := <-werr; err != nil && rerr == nil {
		return nil, r.g.peerErr((r.g.Rank()+1)%r.g.World(), "ring all-reduce (send)", err)
	}
	if rerr != nil {
		return nil, rerr
	}
	return got, nil
}

func (r *Ring) recv(n int) ([]float32, error) {
	prev := (r.g.Rank() + r.g.World() - 1) % r.g.World()
	var hdr [8]byte
	if _, err := io.ReadFull(r.g.prev, hdr[:]); err != nil {
		return nil, r.g.peerErr(prev, "ring all-reduce (receive)", err)
	}
	seq, count := binary.LittleEndian.Uint32(hdr[:]), int(binary.LittleEndian.Uint32(hdr[4:]))
	if seq != r.seq || count != n {
		return nil, fmt.Errorf("dist: rank %d: ring out of step: message #%d of %d values from rank %d, want #%d of %d (every rank must reduce the same plan)",
			r.g.Rank(), seq, count, prev, r.seq, n)
	}
	if cap(r.in) < 4*n {
		r.in = make([]byte, 4*n)
	}
	b := r.in[:4*n]
	if _, err := io.ReadFull(r.g.prev, b); err != nil {
		return nil, r.g.peerErr(prev, "ring all-reduce (receive)", err)
	}
	if cap(r.got) < n {
		r.got = make([]float32, n)
	}
	out := r.got[:n]
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// encode appends the header (seq, len) and v as little-endian float32.
func encode(b []byte, seq uint32, v []float32) []byte {
	b = binary.LittleEndian.AppendUint32(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// desc describes a tensor for error messages, e.g. "bf16(4,768) on the host".
func desc(t *tensor.Tensor) string {
	if t == nil {
		return "nil"
	}
	where := "in device memory"
	if t.IsHost() {
		where = "on the host"
	}
	return t.DType.String() + t.Shape.String() + " " + where
}
