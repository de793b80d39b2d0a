package cuda

import (
	"math"
	"strings"
	"testing"
)

// TestCheckLaunch: sizes past the grid limits are errors, D1 saturates
// instead of wrapping, and ordinary launches pass.
func TestCheckLaunch(t *testing.T) {
	ok := []struct{ g, b Dim3 }{
		{D1(1), D1(1)},
		{Dim3{MaxGridX, MaxGridYZ, MaxGridYZ}, Dim3{32, 32, 1}},
		{D1(16384), D1(256)},
	}
	for _, c := range ok {
		if err := CheckLaunch(c.g, c.b); err != nil {
			t.Errorf("grid %v block %v: %v", c.g, c.b, err)
		}
	}
	bad := []struct {
		g, b Dim3
		want string
	}{
		{Dim3{1, MaxGridYZ + 1, 1}, D1(32), "grid"},
		{Dim3{1, 1, MaxGridYZ + 1}, D1(32), "grid"},
		{D1(1 << 40), D1(256), "grid"}, // would wrap to 0 as a uint32
		{D1(MaxGridX + 1), D1(256), "grid"},
		{D1(1), D1(2048), "block"},
		{D1(1), Dim3{32, 32, 2}, "block"},
		{D1(1), Dim3{0, 1, 1}, "block"},
	}
	for _, c := range bad {
		err := CheckLaunch(c.g, c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("grid %v block %v: error %v, want one about the %s", c.g, c.b, err, c.want)
		}
	}
	if g := D1(1 << 40); g.X != math.MaxUint32 {
		t.Errorf("D1(2^40).X = %d, want saturation at %d", g.X, uint32(math.MaxUint32))
	}
	if g := D1(-5); g.X != 0 {
		t.Errorf("D1(-5).X = %d, want 0", g.X)
	}
}
