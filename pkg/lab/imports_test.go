package lab

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCUDA: pkg/lab, which every lab notebook's cells import, does not
// build pkg/cuda (cgo); lab 5's kernel check lives in pkg/lab/labcuda,
// which only lab 5's notebook imports. It asks `go list -deps`.
func TestNoCUDA(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the imports") // skip: a test binary built elsewhere runs without Go; go test always has it
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/druto/druto/pkg/cuda" || strings.HasPrefix(p, "github.com/druto/druto/pkg/device/gpu") || p == "github.com/druto/druto/nbui" {
			t.Errorf("pkg/lab imports %s: keep it out of every lab cell's program", p)
		}
	}
}
