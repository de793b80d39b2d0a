package record

import (
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestLeaf: record imports nothing of the module, so that any reader of
// records (plotting, a notebook) can import it without the devices.
func TestLeaf(t *testing.T) {
	for _, p := range testreq.ModuleDeps(t, ".") {
		if p != "github.com/druto/druto/pkg/record" {
			t.Errorf("record imports %s: it must be a leaf", p)
		}
	}
}
