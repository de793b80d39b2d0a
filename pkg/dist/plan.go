package dist

import (
	"fmt"

	"github.com/druto/druto/pkg/tensor"
)

// DefaultBucketBytes is the most gradient bytes one bucket holds: 25 MiB,
// PyTorch DDP's bucket_cap_mb default.
const DefaultBucketBytes = 25 << 20

// Bucket is one contiguous range of float32 elements of the flat gradient
// buffer, all-reduced as one unit.
type Bucket struct {
	Offset int // first element
	Len    int // elements
}

// End returns the element after the bucket's last.
func (b Bucket) End() int { return b.Offset + b.Len }

// Plan is the buckets of a flat gradient buffer of Total float32 elements,
// in the order they are reduced: from the end of the buffer to its start.
type Plan struct {
	Buckets []Bucket
	Total   int // elements covered
	Cap     int // the most elements of one bucket
}

// NewPlan cuts the flat buffer of layout into buckets of at most
// bucketBytes (whole float32 elements, at least one; 0 means
// DefaultBucketBytes), walking the tensors in reverse layout order, the
// order backward produces their gradients: a bucket takes whole tensors
// while they fit; a tensor larger than a bucket is cut into full buckets
// from its end, and its rest starts the next bucket. The layout's segments
// must be contiguous from element 0, as tensor.Layout.Add makes them.
func NewPlan(l *tensor.Layout, bucketBytes int) (Plan, error) {
	if l == nil {
		return Plan{}, fmt.Errorf("dist: plan of a nil layout")
	}
	at := 0
	for _, s := range l.Segments {
		if s.Offset != at || s.Numel() < 0 {
			return Plan{}, fmt.Errorf("dist: layout segment %s at %d, want %d: segments must be contiguous", s.Name, s.Offset, at)
		}
		at += s.Numel()
	}
	if at != l.Total {
		return Plan{}, fmt.Errorf("dist: layout segments cover %d elements of %d", at, l.Total)
	}
	sizes := make([]int, len(l.Segments))
	for i, s := range l.Segments {
		sizes[i] = s.Numel()
	}
	return plan(sizes, bucketBytes)
}

// FlatPlan is NewPlan for a buffer of total elements without a layout, as
// one tensor: buckets of the cap from the end, the rest first at offset 0.
func FlatPlan(total, bucketBytes int) (Plan, error) {
	if total < 0 {
		return Plan{}, fmt.Errorf("dist: plan of %d elements", total)
	}
	return plan([]int{total}, bucketBytes)
}

func plan(sizes []int, bucketBytes int) (Plan, error) {
	if bucketBytes == 0 {
		bucketBytes = DefaultBucketBytes
	}
	if bucketBytes < 4 {
		return Plan{}, fmt.Errorf("dist: bucket of %d bytes holds no float32 (want at least 4)", bucketBytes)
	}
	p := Plan{Cap: bucketBytes / 4}
	for _, n := range sizes {
		p.Total += n
	}
	hi, cur := p.Total, 0 // the open bucket is [hi-cur, hi)
	emit := func(n int) {
		p.Buckets = append(p.Buckets, Bucket{Offset: hi - n, Len: n})
		hi -= n
	}
	for i := len(sizes) - 1; i >= 0; i-- {
		rest := sizes[i]
		for rest > 0 {
			switch {
			case cur+rest <= p.Cap: // the tensor (or its rest) fits
				cur += rest
				rest = 0
			case cur > 0: // close the open bucket; the tensor starts the next
				emit(cur)
				cur = 0
			default: // an empty bucket and a tensor larger than it: cut a full bucket
				emit(p.Cap)
				rest -= p.Cap
			}
		}
	}
	if cur > 0 {
		emit(cur)
	}
	return p, p.Check()
}

// Check verifies the plan: every bucket non-empty and at most Cap long,
// the buckets adjacent from Total down to 0 without gap or overlap.
func (p Plan) Check() error {
	at := p.Total
	for i, b := range p.Buckets {
		if b.Len < 1 || b.Len > p.Cap {
			return fmt.Errorf("dist: bucket %d holds %d elements, want 1..%d", i, b.Len, p.Cap)
		}
		if b.End() != at {
			return fmt.Errorf("dist: bucket %d is [%d, %d), want it to end at %d", i, b.Offset, b.End(), at)
		}
		at = b.Offset
	}
	if at != 0 {
		return fmt.Errorf("dist: buckets stop at element %d, not 0", at)
	}
	return nil
}
