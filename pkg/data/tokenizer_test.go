package data

import (
	"errors"
	"fmt"
	"testing"
	"unicode/utf8"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	texts := []string{
		"",
		"Hello, world!\n",
		"আমি বাংলায় গান গাই।",
		"Rina has 3 books.\nরিনার ৩টি বই আছে।\n",
		"শিক্ষক, ছাত্র, স্কুল, বাজার, কৃষ্ণচূড়া, ক্ষমা, ৎ ঁ ং ঃ",
		"mixed বাংলা and English ০১২৩৪৫৬৭৮৯ 0123456789 😀 \x00\x7f",
		string(Corpus(5, 5000)),
	}
	for _, s := range texts {
		tokens, err := Encode([]byte(s))
		if err != nil {
			t.Fatalf("Encode(%q): %v", s, err)
		}
		if len(tokens) != len(s) {
			t.Fatalf("Encode(%q): %d tokens, want one per byte (%d)", s, len(tokens), len(s))
		}
		for i := range tokens {
			if tokens[i] != int32(s[i]) || tokens[i] < 0 || tokens[i] >= VocabSize {
				t.Fatalf("Encode(%q)[%d] = %d, want byte %d", s, i, tokens[i], s[i])
			}
		}
		b, err := Decode(tokens)
		if err != nil || string(b) != s {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", s, b, err)
		}
		if got := DecodeString(tokens); got != s {
			t.Fatalf("DecodeString(Encode(%q)) = %q", s, got)
		}
	}
}

func TestEncodeBanglaBytes(t *testing.T) {
	// বই is U+09AC U+0987: E0 A6 AC, E0 A6 87 in UTF-8.
	got, err := Encode([]byte("বই"))
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{0xe0, 0xa6, 0xac, 0xe0, 0xa6, 0x87}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Encode(বই) = %x, want %x", got, want)
	}
}

func TestEncodeInvalidUTF8Offset(t *testing.T) {
	cases := []struct {
		name string
		text string
		off  int
	}{
		{"stray continuation byte", "ab\x80cd", 2},
		{"stray continuation after Bangla", "বই\xa6", 6},
		{"continuation byte first", "\xbfabc", 0},
		{"truncated 3-byte sequence at end", "abc\xe0\xa6", 3},
		{"truncated 3-byte sequence at end after Bangla", "আম\xe0", 6},
		{"truncated sequence mid-text", "a\xe0\xa6b", 1},
		{"overlong 2-byte encoding of '/'", "ok\xc0\xafx", 2},
		{"overlong 3-byte encoding", "\xe0\x80\xaf", 0},
		{"overlong 4-byte encoding", "xyz\xf0\x80\x80\xaf", 3},
		{"surrogate U+D800", "x\xed\xa0\x80", 1},
		{"surrogate U+DFFF after Bangla", "বই \xed\xbf\xbf", 7},
		{"above U+10FFFF", "\xf4\x90\x80\x80", 0},
		{"byte 0xFF", "hello\xff", 5},
		{"valid then invalid later", "Rina has 3 books.\nরিনার ৩টি বই\xe0\xa6 আছে।", 17 + 1 + 3*5 + 1 + 3*3 + 1 + 3*2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !utf8.ValidString(c.text[:c.off]) {
				t.Fatalf("bad test case: the text before offset %d is not valid", c.off)
			}
			tokens, err := Encode([]byte(c.text))
			if err == nil {
				t.Fatalf("Encode(%q) = %v, want an error", c.text, tokens)
			}
			if !errors.Is(err, ErrInvalidUTF8) {
				t.Fatalf("error %v does not wrap ErrInvalidUTF8", err)
			}
			want := fmt.Sprintf("data: invalid UTF-8 at byte %d (save the file as UTF-8)", c.off)
			if err.Error() != want {
				t.Fatalf("error %q, want %q", err, want)
			}
			var ue *utf8Error
			if !errors.As(err, &ue) || ue.offset != c.off {
				t.Fatalf("offset %+v, want %d", ue, c.off)
			}
		})
	}
}

func TestDecodeRejectsOutOfRange(t *testing.T) {
	for _, tokens := range [][]int32{{65, 256}, {-1}, {0, 1, 70000}} {
		b, err := Decode(tokens)
		if err == nil {
			t.Fatalf("Decode(%v) = %q, want an error", tokens, b)
		}
		bad := tokens[len(tokens)-1]
		want := fmt.Sprintf("data: token %d at position %d is outside the byte vocabulary 0..255", bad, len(tokens)-1)
		if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
			t.Fatalf("Decode(%v) error %q, want it to start %q", tokens, got, want)
		}
	}
}

func TestDecodeString(t *testing.T) {
	boi := []int32{0xe0, 0xa6, 0xac, 0xe0, 0xa6, 0x87} // বই
	cases := []struct {
		name   string
		tokens []int32
		want   string
	}{
		{"whole", boi, "বই"},
		{"cut inside the last character", boi[:5], "ব\uFFFD"},
		{"cut after the first byte of the last character", boi[:4], "ব\uFFFD"},
		{"starts inside a character", boi[1:], "\uFFFDই"},
		{"stray continuation between letters", []int32{'a', 0x80, 0x80, 'b'}, "a\uFFFDb"},
		{"token above 255", []int32{'a', 300, 'b'}, "a\uFFFDb"},
		{"negative token", []int32{-5}, "\uFFFD"},
		{"empty", nil, ""},
	}
	for _, c := range cases {
		got := DecodeString(c.tokens)
		if got != c.want {
			t.Errorf("%s: DecodeString(%x) = %q, want %q", c.name, c.tokens, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: result %q is not valid UTF-8", c.name, got)
		}
	}
}
