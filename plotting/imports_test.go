package plotting

import (
	"slices"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestImports: plotting reads records through pkg/record and nothing else
// of the module, so drawing a plot never builds the devices (pkg/bench,
// pkg/device/gpu, pkg/cuda and its cgo) that made them.
func TestImports(t *testing.T) {
	allowed := []string{"github.com/druto/druto/plotting",
		"github.com/druto/druto/internal/boundedread",
		"github.com/druto/druto/pkg/record"}
	for _, p := range testreq.ModuleDeps(t, ".") {
		if !slices.Contains(allowed, p) {
			t.Errorf("plotting imports %s (of this module it may import only %v)", p, allowed)
		}
	}
}
