package lab

import (
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestNoCUDA: pkg/lab, which every lab notebook's cells import, does not
// build pkg/cuda (cgo); lab 5's kernel check lives in pkg/lab/labcuda,
// which only lab 5's notebook imports.
func TestNoCUDA(t *testing.T) {
	for _, p := range testreq.ModuleDeps(t, ".") {
		if p == "github.com/druto/druto/pkg/cuda" || strings.HasPrefix(p, "github.com/druto/druto/pkg/device/gpu") || p == "github.com/druto/druto/nbui" {
			t.Errorf("pkg/lab imports %s: keep it out of every lab cell's program", p)
		}
	}
}
