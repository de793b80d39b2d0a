package plotting

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImports: plotting reads records through pkg/record and nothing else
// of the module, so drawing a plot never builds the devices (pkg/bench,
// pkg/device/gpu, pkg/cuda and its cgo) that made them. It asks `go list
// -deps`, and is skipped where Go is not installed (a machine that runs
// test binaries built elsewhere).
func TestImports(t *testing.T) {
	checkModuleDeps(t, ".", "github.com/druto/druto/plotting",
		"github.com/druto/druto/internal/boundedread",
		"github.com/druto/druto/pkg/record")
}

// checkModuleDeps fails unless the packages of this module that pkg
// depends on (pkg itself included) are exactly allowed.
func checkModuleDeps(t *testing.T, pkg string, allowed ...string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the imports") // skip: a test binary built elsewhere (scripts/gpu-build.sh) runs without Go; go test always has it
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	var got []string
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/druto/druto" || strings.HasPrefix(p, "github.com/druto/druto/") {
			got = append(got, p)
		}
	}
	slices.Sort(got)
	slices.Sort(allowed)
	for _, p := range got {
		if !slices.Contains(allowed, p) {
			t.Errorf("%s imports %s (of this module it may import only %v)", pkg, p, allowed)
		}
	}
}
