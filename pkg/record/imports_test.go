package record

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeaf: record imports nothing of the module, so that any reader of
// records (plotting, a notebook) can import it without the devices. It
// asks `go list -deps`, and is skipped where Go is not installed.
func TestLeaf(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the imports") // skip: a test binary built elsewhere (scripts/gpu-build.sh) runs without Go; go test always has it
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/druto/druto/") && p != "github.com/druto/druto/pkg/record" {
			t.Errorf("record imports %s: it must be a leaf", p)
		}
	}
}
