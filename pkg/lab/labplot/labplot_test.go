package labplot

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
)

// TestScaler draws the figure (outside a notebook Show draws nothing, but
// the plot is built) for a right scaler and for one that never backs off.
func TestScaler(t *testing.T) {
	for _, lang := range []string{"en", "bn"} {
		if err := Scaler(lang, func(s *amp.GradScaler, finite bool) bool { return s.Update(finite) }); err != nil {
			t.Fatal(err)
		}
		if err := Scaler(lang, func(s *amp.GradScaler, finite bool) bool { return !finite }); err != nil {
			t.Fatal(err)
		}
	}
}
