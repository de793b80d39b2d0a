package bench

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

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
