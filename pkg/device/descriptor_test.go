package device

import (
	"reflect"
	"slices"
	"testing"
)

// ifaces are the interfaces whose methods are ops, by Contract.Iface.
var ifaces = map[string]reflect.Type{
	"":            reflect.TypeFor[Device](),
	"GradStorer":  reflect.TypeFor[GradStorer](),
	"Stepper":     reflect.TypeFor[Stepper](),
	"GELUer":      reflect.TypeFor[GELUer](),
	"MomentsBF16": reflect.TypeFor[MomentsBF16](),
	"Decoder":     reflect.TypeFor[Decoder](),
}

// TestEveryOpHasDescriptor: every method of Device is Plumbing or an op
// with a descriptor in Contracts, and so is every method of the optional
// interfaces of ops; every descriptor names a method of its interface, once,
// and (the ops of a training step) a profiler class.
func TestEveryOpHasDescriptor(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Contracts() {
		if seen[c.Op] {
			t.Errorf("%s: two descriptors", c.Op)
		}
		seen[c.Op] = true
		it, ok := ifaces[c.Iface]
		if !ok {
			t.Errorf("%s: unknown interface %q", c.Op, c.Iface)
			continue
		}
		m, ok := it.MethodByName(c.Op)
		if !ok {
			t.Errorf("%s: no method %s in %v", c.Op, c.Op, it)
			continue
		}
		if c.Class == "" && c.Iface != "Decoder" {
			t.Errorf("%s: no profiler class", c.Op)
		}
		if c.Shapes != nil {
			checkShapesSignature(t, c, m.Type)
		}
	}
	for name, it := range ifaces {
		for i := range it.NumMethod() {
			m := it.Method(i).Name
			c := Lookup(m)
			switch {
			case slices.Contains(Plumbing, m):
				if c != nil {
					t.Errorf("%s: plumbing with a descriptor", m)
				}
			case c == nil:
				t.Errorf("%v.%s: an op with no descriptor in Contracts", it, m)
			case c.Iface != name:
				t.Errorf("%s: descriptor says interface %q, the method is %v's", m, c.Iface, it)
			}
		}
	}
}

// checkShapesSignature: an op whose cases are derived takes its contract's
// tensors, then its sizes as integers, and returns nothing.
func checkShapesSignature(t *testing.T, c *Contract, f reflect.Type) {
	t.Helper()
	tp := reflect.TypeFor[*T]()
	if f.NumIn() != len(c.Params)+len(c.Sizes) || f.NumOut() != 0 {
		t.Errorf("%s: Shapes set, but %v is not (tensors..., sizes...)", c.Op, f)
		return
	}
	for i := range f.NumIn() {
		if in := f.In(i); (i < len(c.Params) && in != tp) || (i >= len(c.Params) && in.Kind() != reflect.Int && in.Kind() != reflect.Uint8) {
			t.Errorf("%s: Shapes set, but argument %d of %v is %v", c.Op, i, f, in)
		}
	}
	for _, s := range c.Shapes {
		if len(s) != len(c.Sizes) {
			t.Errorf("%s: shape %v for sizes %v", c.Op, s, c.Sizes)
		}
	}
}
