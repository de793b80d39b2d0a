package bench

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/bench/internal/genprofile"
	"github.com/druto/druto/pkg/device"
)

// TestProfilerWrapsEveryOp: the profiler declares a method of its own for
// every op of device.Device and GradStorer (graphProfiler for Stepper's):
// a method merely promoted from the embedded device.Device compiles and
// runs the op untimed. Every method of Device is an op with a descriptor
// or device.Plumbing.
func TestProfilerWrapsEveryOp(t *testing.T) {
	declared := declaredMethods(t)
	dev := reflect.TypeFor[device.Device]()
	for i := range dev.NumMethod() {
		m := dev.Method(i).Name
		c := device.Lookup(m)
		switch {
		case c == nil && !slices.Contains(device.Plumbing, m):
			t.Errorf("device.Device.%s: neither an op with a descriptor (device.Contracts) nor device.Plumbing", m)
		case c != nil && !declared["profiler"][m]:
			t.Errorf("device.Device.%s: profiler does not declare it (promoted from the embedded Device, it runs untimed)", m)
		}
	}
	for _, c := range device.Contracts() {
		// The profiler offers no GELUer, MomentsBF16 or Decoder: a profiled
		// step runs without them (their callers' fallbacks).
		recv := map[string]string{"": "profiler", "GradStorer": "profiler", "Stepper": "graphProfiler"}[c.Iface]
		if recv != "" && !declared[recv][c.Op] {
			t.Errorf("%s: %s does not declare it", c.Op, recv)
		}
	}
}

// declaredMethods returns the methods declared in this package's source,
// by receiver type name.
func declaredMethods(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				if out[id.Name] == nil {
					out[id.Name] = map[string]bool{}
				}
				out[id.Name][fn.Name.Name] = true
			}
		}
	}
	return out
}

// TestProfileOpsUpToDate: profile_ops.go is what the generator writes from
// the current pkg/device/device.go and this package's hand-written
// wrappers; after a new op or a changed signature, run go generate
// ./pkg/bench.
func TestProfileOpsUpToDate(t *testing.T) {
	want, err := genprofile.Generate(filepath.Join("..", "device", "device.go"), ".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(genprofile.Output)
	if err != nil {
		t.Fatalf("%v: run go generate ./pkg/bench", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			t.Fatalf("%s is stale (run go generate ./pkg/bench): line %d is\n\t%q\nwant\n\t%q", genprofile.Output, i+1, gl, wl)
		}
	}
}
