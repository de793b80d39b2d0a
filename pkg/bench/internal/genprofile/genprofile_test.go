package genprofile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDevice is a device.go of three ops: Scale (regular, with a named
// integer size), Norm (a float argument) and Copy (tensors only), and one
// plumbing method.
const fakeDevice = `package device

type T = struct{}

type Mode uint8

type Device interface {
	Name() string
	Scale(out, inp *T, n int, m Mode)
	Norm(out *T, eps float32)
	Copy(dst, src *T)
}

var Ops = struct{ Scale, Norm, Copy Contract }{
	Scale: Contract{Op: "Scale", Sizes: []string{"n+", "m"}, Params: []Param{p("out", Float, Out, nil), opt(p("inp", Float, In, nil))}},
	Norm:  Contract{Op: "Norm", Sizes: []string{"n"}, Params: []Param{p("out", Float, Acc, nil)}},
	Copy:  Contract{Op: "Copy", Sizes: []string{"n"}, Params: []Param{p("dst", Float, Out, nil), p("src", Float, In, nil)}},
}
`

// setup writes fakeDevice (with edit applied) and a bench package whose
// hand-written file is byHand.
func setup(t *testing.T, edit func(string) string, byHand string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	dev := filepath.Join(dir, "device.go")
	if err := os.WriteFile(dev, []byte(edit(fakeDevice)), 0o644); err != nil {
		t.Fatal(err)
	}
	bench := filepath.Join(dir, "bench")
	if err := os.Mkdir(bench, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bench, "profile.go"), []byte("package bench\n\n"+byHand), 0o644); err != nil {
		t.Fatal(err)
	}
	// A stale generated file declares Copy: it must not count as hand-written.
	stale := header + "\npackage bench\n\nfunc (p *profiler) Copy(dst, src *device.T) {}\n"
	if err := os.WriteFile(filepath.Join(bench, Output), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	return dev, bench
}

const normByHand = "func (p *profiler) Norm(out *device.T, eps float32) {}\n"

// TestGenerate: a regular op gets its wrapper (a named integer size as
// int(x), no sizes as nil), a method declared by hand none, plumbing none;
// an irregular op that is not declared by hand, or one whose tensors or
// sizes are not its descriptor's, is an error naming it.
func TestGenerate(t *testing.T) {
	same := func(s string) string { return s }
	dev, bench := setup(t, same, normByHand)
	out, err := Generate(dev, bench)
	if err != nil {
		t.Fatal(err)
	}
	src := string(out)
	for _, want := range []string{
		header,
		"func (p *profiler) Scale(out, inp *device.T, n int, m device.Mode) {",
		"p.op(&device.Ops.Scale, []int{n, int(m)}, tensors{out, inp}, func() {",
		"p.Device.Scale(out, inp, n, m)",
		"p.op(&device.Ops.Copy, nil, tensors{dst, src}, func() {",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("output lacks %q:\n%s", want, src)
		}
	}
	for _, not := range []string{") Norm(", ") Name("} {
		if strings.Contains(src, not) {
			t.Errorf("output has %q:\n%s", not, src)
		}
	}

	for _, c := range []struct {
		name, byHand, want string
		edit               func(string) string
	}{
		{"irregular, not by hand", "", "Norm", same},
		{"tensors out of order", normByHand, "Params", func(s string) string {
			return strings.Replace(s, "Scale(out, inp *T", "Scale(inp, out *T", 1)
		}},
		{"sizes not the descriptor's", normByHand, "Sizes", func(s string) string {
			return strings.Replace(s, `[]string{"n+", "m"}`, `[]string{"m", "n"}`, 1)
		}},
	} {
		dev, bench := setup(t, c.edit, c.byHand)
		if _, err := Generate(dev, bench); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.want)
		}
	}
}
