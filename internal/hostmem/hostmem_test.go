package hostmem

import (
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

func TestAvailable(t *testing.T) {
	free, src, err := Available()
	if err != nil {
		testreq.Skip(t, "DRUTO_OS_TESTS", "no memory figure on this system: %v", err)
	}
	if free <= 0 || src == "" {
		t.Fatalf("free %d from %q", free, src)
	}
	if err := Check("a byte", 1); err != nil {
		t.Errorf("one byte does not fit: %v", err)
	}
	err = Check("the test", 1<<62)
	if err == nil || !strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), "free") {
		t.Errorf("4 EiB fit: %v", err)
	}
}
