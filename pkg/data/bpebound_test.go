package data

import (
	"fmt"
	"strings"
	"testing"
)

// doubling returns a BPE file whose merge k joins token 255+k with itself
// (byte 'a' first): token 256+k is 2^(k+1) bytes long.
func doubling(n int) string {
	var b strings.Builder
	b.WriteString(bpeHeader + "\n")
	prev := int('a')
	for k := range n {
		fmt.Fprintf(&b, "%d %d\n", prev, prev)
		prev = VocabSize + k
	}
	return b.String()
}

// TestBPETableBound: a BPE whose tokens double at each merge is refused
// before its tokens are built, at the bound: tokens of 2^26 + 254 bytes
// together (25 doublings) are refused, 2^25 + 254 (24) are built; 40
// doublings (2^41 bytes) are refused at once.
func TestBPETableBound(t *testing.T) {
	b, err := ParseBPE([]byte(doubling(24)))
	if err != nil {
		t.Fatalf("24 doublings (%d bytes together): %v", 1<<25+254, err)
	}
	if got := len(b.Token(int32(VocabSize + 23))); got != 1<<24 {
		t.Errorf("the last token is %d bytes, want 2^24", got)
	}
	for _, n := range []int{25, 40} {
		_, err := ParseBPE([]byte(doubling(n)))
		if err == nil || !strings.Contains(err.Error(), "longer than 64 MiB together") {
			t.Errorf("%d doublings: %v, want the table bound", n, err)
		}
	}
}
