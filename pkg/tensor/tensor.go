package tensor

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrShape is returned (wrapped) when shapes or sizes do not agree.
var ErrShape = errors.New("tensor: shape mismatch")

// Shape is the extent of each dimension, outermost first.
type Shape []int

// Numel returns the number of elements (1 for a scalar shape).
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// String formats the shape as (a,b,c).
func (s Shape) String() string {
	out := "("
	for i, d := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprint(d)
	}
	return out + ")"
}

// Tensor is a typed view of memory: host bytes (Host) or a device address
// (Dev, owned by the device that allocated it). Views share the memory of the
// tensor they were cut from.
type Tensor struct {
	DType DType
	Shape Shape
	host  []byte  // host storage, nil for device tensors
	Dev   uintptr // device address of element 0, 0 for host tensors
}

// New allocates a zeroed host tensor.
func New(dt DType, shape ...int) *Tensor {
	n := Shape(shape).Numel() * dt.Size()
	words := make([]uint64, (n+7)/8) // 8-byte aligned backing
	var b []byte
	if n > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	}
	return &Tensor{DType: dt, Shape: append(Shape(nil), shape...), host: b}
}

// FromF32 returns a host F32 tensor holding a copy of v with the given shape.
func FromF32(v []float32, shape ...int) (*Tensor, error) {
	if Shape(shape).Numel() != len(v) {
		return nil, fmt.Errorf("%w: %d values for shape %v", ErrShape, len(v), Shape(shape))
	}
	t := New(F32, shape...)
	copy(t.F32(), v)
	return t, nil
}

// ViewF32 returns a host F32 tensor over v's memory (no copy: writes to
// either show in both), with the given shape.
func ViewF32(v []float32, shape ...int) (*Tensor, error) {
	if Shape(shape).Numel() != len(v) {
		return nil, fmt.Errorf("%w: %d values for shape %v", ErrShape, len(v), Shape(shape))
	}
	var b []byte
	if len(v) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	}
	return &Tensor{DType: F32, Shape: append(Shape(nil), shape...), host: b}, nil
}

// FromI32 returns a host I32 tensor holding a copy of v with the given shape.
func FromI32(v []int32, shape ...int) (*Tensor, error) {
	if Shape(shape).Numel() != len(v) {
		return nil, fmt.Errorf("%w: %d values for shape %v", ErrShape, len(v), Shape(shape))
	}
	t := New(I32, shape...)
	copy(t.I32(), v)
	return t, nil
}

// OnDevice returns a tensor describing device memory at addr.
func OnDevice(dt DType, addr uintptr, shape ...int) *Tensor {
	return &Tensor{DType: dt, Shape: append(Shape(nil), shape...), Dev: addr}
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int { return t.Shape.Numel() }

// Bytes returns the size in bytes.
func (t *Tensor) Bytes() int { return t.Numel() * t.DType.Size() }

// IsHost reports whether the tensor lives in host memory.
func (t *Tensor) IsHost() bool { return t.host != nil || (t.Dev == 0 && t.Numel() == 0) }

// Raw returns the host bytes (nil for device tensors).
func (t *Tensor) Raw() []byte { return t.host }

func (t *Tensor) check(dt DType) {
	if t.DType != dt {
		panic(fmt.Sprintf("tensor: %s view of a %s tensor", dt, t.DType))
	}
	if t.host == nil && t.Numel() > 0 {
		panic("tensor: host view of a device tensor")
	}
}

// U8 returns the bytes of a host FP8 tensor (F8E4M3, F8E5M2), aliasing its
// memory. It panics on a dtype or placement mismatch, a programming error.
func (t *Tensor) U8() []uint8 {
	if _, ok := t.DType.FP8(); !ok {
		panic(fmt.Sprintf("tensor: byte view of a %s tensor", t.DType))
	}
	if t.host == nil && t.Numel() > 0 {
		panic("tensor: host view of a device tensor")
	}
	return t.host[:t.Numel()]
}

// F32 returns the elements of a host F32 tensor, aliasing its memory.
// It panics on a dtype or placement mismatch, a programming error.
func (t *Tensor) F32() []float32 {
	t.check(F32)
	if len(t.host) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.host[0])), len(t.host)/4)
}

// U16 returns the raw 16-bit elements of a host BF16 or F16 tensor.
func (t *Tensor) U16() []uint16 {
	if t.DType != BF16 && t.DType != F16 {
		panic(fmt.Sprintf("tensor: 16-bit view of a %s tensor", t.DType))
	}
	t.check(t.DType)
	if len(t.host) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&t.host[0])), len(t.host)/2)
}

// I32 returns the elements of a host I32 tensor, aliasing its memory.
func (t *Tensor) I32() []int32 {
	t.check(I32)
	if len(t.host) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&t.host[0])), len(t.host)/4)
}

// View returns a tensor of the given shape starting at element off of t,
// sharing t's memory. It returns an error when the view does not fit.
func (t *Tensor) View(off int, shape ...int) (*Tensor, error) {
	n := Shape(shape).Numel()
	if off < 0 || off+n > t.Numel() {
		return nil, fmt.Errorf("%w: view [%d, %d) of %d elements", ErrShape, off, off+n, t.Numel())
	}
	v := &Tensor{DType: t.DType, Shape: append(Shape(nil), shape...)}
	es := t.DType.Size()
	if t.host != nil {
		v.host = t.host[off*es : (off+n)*es : (off+n)*es]
	} else {
		v.Dev = t.Dev + uintptr(off*es)
	}
	return v, nil
}

// MustView is View for layouts computed by the caller; it panics when the
// view does not fit, which is a bug in that layout.
func (t *Tensor) MustView(off int, shape ...int) *Tensor {
	v, err := t.View(off, shape...)
	if err != nil {
		panic(err)
	}
	return v
}

// Reshape returns a view of all of t with another shape of the same size.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	if Shape(shape).Numel() != t.Numel() {
		return nil, fmt.Errorf("%w: reshape %v to %v", ErrShape, t.Shape, Shape(shape))
	}
	return t.View(0, shape...)
}

// ToF32 returns the elements of a host floating-point tensor widened to a new
// float32 slice (a copy, whatever the dtype).
func (t *Tensor) ToF32() []float32 {
	out := make([]float32, t.Numel())
	switch t.DType {
	case F32:
		copy(out, t.F32())
	case BF16:
		for i, h := range t.U16() {
			out[i] = BF16ToF32(h)
		}
	case F16:
		for i, h := range t.U16() {
			out[i] = F16ToF32(h)
		}
	case I32:
		for i, v := range t.I32() {
			out[i] = float32(v)
		}
	case F8E4M3, F8E5M2:
		f, _ := t.DType.FP8()
		for i, q := range t.U8() {
			out[i] = f.ToF32(q)
		}
	}
	return out
}

// SetF32 stores v into a host floating-point tensor, rounding to its dtype
// (round to nearest even).
func (t *Tensor) SetF32(v []float32) error {
	if len(v) != t.Numel() {
		return fmt.Errorf("%w: %d values into %v", ErrShape, len(v), t.Shape)
	}
	switch t.DType {
	case F32:
		copy(t.F32(), v)
	case BF16:
		u := t.U16()
		for i, f := range v {
			u[i] = BF16FromF32(f)
		}
	case F16:
		u := t.U16()
		for i, f := range v {
			u[i] = F16FromF32(f)
		}
	default:
		return fmt.Errorf("tensor: SetF32 into a %s tensor", t.DType)
	}
	return nil
}
