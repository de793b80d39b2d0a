package cuda

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestPackArgs: each argument at an offset aligned to its size, values in
// little-endian C layout.
func TestPackArgs(t *testing.T) {
	buf, offs, err := packArgs([]any{DevicePtr(0x1122334455667788), 7, int64(-2), float32(1.5), float64(2.25), uint32(9), uint64(10), int32(-3)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{0, 8, 16, 24, 32, 40, 48, 56}; !reflect.DeepEqual(offs, want) {
		t.Fatalf("offsets %v, want %v", offs, want)
	}
	le := binary.LittleEndian
	if le.Uint64(buf[0:]) != 0x1122334455667788 || int32(le.Uint32(buf[8:])) != 7 || int64(le.Uint64(buf[16:])) != -2 ||
		math.Float32frombits(le.Uint32(buf[24:])) != 1.5 || math.Float64frombits(le.Uint64(buf[32:])) != 2.25 ||
		le.Uint32(buf[40:]) != 9 || le.Uint64(buf[48:]) != 10 || int32(le.Uint32(buf[56:])) != -3 || len(buf) != 60 {
		t.Fatalf("packed % x", buf)
	}
	// An int followed by a pointer is padded to 8.
	_, offs, _ = packArgs([]any{1, DevicePtr(2), float32(3), int64(4)})
	if want := []int32{0, 8, 16, 24}; !reflect.DeepEqual(offs, want) {
		t.Fatalf("offsets %v, want %v", offs, want)
	}
	if _, _, err := packArgs([]any{1 << 40}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("oversized int: %v", err)
	}
	if _, _, err := packArgs([]any{true}); err == nil {
		t.Fatal("bool accepted")
	}
	big := make([]any, MaxArgBytes/8+1)
	for i := range big {
		big[i] = uint64(i)
	}
	if _, _, err := packArgs(big); err == nil {
		t.Fatal("arguments over the limit accepted")
	}
}
