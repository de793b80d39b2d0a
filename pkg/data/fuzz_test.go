package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode checks that Encode never panics, succeeds exactly on valid
// UTF-8, reports the first invalid byte exactly, and round-trips through
// Decode and DecodeString.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Rina has 3 books.\n", "রিনার ৩টি বই আছে।\n", "ab\x80cd", "আম\xe0\xa6",
		"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "😀\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw := make([]int32, len(b))
		for i, c := range b {
			raw[i] = int32(c)
		}
		shown := DecodeString(raw)
		if !utf8.ValidString(shown) {
			t.Fatalf("DecodeString(%q) = %q, not valid UTF-8", b, shown)
		}

		tokens, err := Encode(b)
		if (err == nil) != utf8.Valid(b) {
			t.Fatalf("Encode(%q): err %v, but utf8.Valid = %v", b, err, utf8.Valid(b))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidUTF8) {
				t.Fatalf("Encode(%q): %v does not wrap ErrInvalidUTF8", b, err)
			}
			var ue *utf8Error
			if !errors.As(err, &ue) {
				t.Fatalf("Encode(%q): %v has no offset", b, err)
			}
			off := ue.offset
			if r, size := utf8.DecodeRune(b[off:]); !utf8.Valid(b[:off]) || r != utf8.RuneError || size != 1 {
				t.Fatalf("Encode(%q): offset %d is not the first invalid byte", b, off)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf(" at byte %d ", off)) {
				t.Fatalf("Encode(%q): message %q does not name byte %d", b, err, off)
			}
			return
		}
		if len(tokens) != len(b) {
			t.Fatalf("Encode(%q): %d tokens for %d bytes", b, len(tokens), len(b))
		}
		back, err := Decode(tokens)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", b, back, err)
		}
		if shown != string(b) {
			t.Fatalf("DecodeString(Encode(%q)) = %q", b, shown)
		}
	})
}

// FuzzParseShard checks that ParseShard never panics, that an accepted input
// is a well-formed shard holding exactly its header's count of tokens, and
// that a rejected one gets a one-line "data: shard:" message.
func FuzzParseShard(f *testing.F) {
	good := shardBytes(20240520, 1, 3, []uint16{1, 50256, 65535})
	f.Add(good)
	f.Add(shardBytes(20240520, 1, 0, nil))
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte{}, good...), 0))
	f.Add(shardBytes(20240520, 2, 3, []uint16{1, 2, 3}))
	f.Add(shardBytes(20240520, 1, 1<<30, nil))
	f.Add([]byte("Rina has 3 books.\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tokens, err := ParseShard(b)
		if err != nil {
			if tokens != nil || !strings.HasPrefix(err.Error(), "data: shard: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseShard rejected with tokens %v and message %q", tokens, err)
			}
			return
		}
		if len(b) < 1024 {
			t.Fatalf("accepted %d bytes, shorter than the header", len(b))
		}
		magic, version := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		count := int(int32(binary.LittleEndian.Uint32(b[8:])))
		if magic != 20240520 || version != 1 {
			t.Fatalf("accepted magic %d version %d", magic, version)
		}
		if len(tokens) != count || len(b) != 1024+2*count {
			t.Fatalf("accepted %d bytes as %d tokens, header count %d", len(b), len(tokens), count)
		}
		again, err := encodeShard(tokens)
		if err != nil {
			t.Fatalf("re-encoding accepted tokens: %v", err)
		}
		if !bytes.Equal(again[:12], b[:12]) || !bytes.Equal(again[1024:], b[1024:]) {
			t.Fatal("re-encoding the parsed tokens gives other bytes")
		}
	})
}

// FuzzParseBPE checks that a BPE file of any bytes is parsed or refused
// without a panic, and never builds a token table beyond its bound (a file
// whose tokens double at each merge is among the seeds).
func FuzzParseBPE(f *testing.F) {
	var doubling strings.Builder
	doubling.WriteString(bpeHeader + "\n97 97\n")
	for k := 1; k < 40; k++ {
		fmt.Fprintf(&doubling, "%d %d\n", 255+k, 255+k)
	}
	for _, s := range []string{bpeHeader + "\n", bpeHeader + "\n97 98\n256 99\n", bpeHeader + "\n1 1\n1 1\n",
		bpeHeader + "\n300 1\n", bpeHeader + "\n-1 2\n", "not a bpe", doubling.String()} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bp, err := ParseBPE(b)
		if err != nil {
			return
		}
		var total int
		for id := range bp.Vocab() {
			total += len(bp.Token(int32(id)))
		}
		if total > maxBPETableBytes {
			t.Fatalf("a table of %d bytes was built", total)
		}
		text, _ := bp.MarshalText()
		again, err := ParseBPE(text)
		if err != nil || again.Vocab() != bp.Vocab() {
			t.Fatalf("the BPE does not round-trip: %v", err)
		}
	})
}
