package tensor

import "fmt"

// Segment is one named tensor inside a flat buffer.
type Segment struct {
	Name   string // e.g. "h.0.attn.c_attn.weight" (druto's own names; see pkg/gpt)
	Offset int    // first element in the flat buffer
	Shape  Shape  // the tensor's own shape
	Decay  bool   // whether AdamW applies weight decay to it
}

// Numel returns the number of elements of the segment.
func (s Segment) Numel() int { return s.Shape.Numel() }

// Layout places named tensors one after another in a flat buffer, so that one
// kernel can walk all of them with a small table of boundaries.
type Layout struct {
	Segments []Segment
	Total    int // elements in all
}

// Add appends a segment of the given shape and returns its offset.
func (l *Layout) Add(name string, decay bool, shape ...int) int {
	off := l.Total
	l.Segments = append(l.Segments, Segment{Name: name, Offset: off, Shape: append(Shape(nil), shape...), Decay: decay})
	l.Total += Shape(shape).Numel()
	return off
}

// Find returns the segment called name.
func (l *Layout) Find(name string) (Segment, error) {
	for _, s := range l.Segments {
		if s.Name == name {
			return s, nil
		}
	}
	return Segment{}, fmt.Errorf("tensor: no segment %q in layout", name)
}

// Views cuts flat into one view per segment, in layout order.
func (l *Layout) Views(flat *Tensor) ([]*Tensor, error) {
	if flat.Numel() != l.Total {
		return nil, fmt.Errorf("%w: flat buffer of %d elements for a layout of %d", ErrShape, flat.Numel(), l.Total)
	}
	out := make([]*Tensor, len(l.Segments))
	for i, s := range l.Segments {
		v, err := flat.View(s.Offset, s.Shape...)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
