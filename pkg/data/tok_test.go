package data

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var roundTripTexts = []string{
	"",
	"Hello world",
	"Rina has 3 books.\nরিনার ৩টি বই আছে।\n",
	"শিক্ষক, ছাত্র, স্কুল, বাজার, কৃষ্ণচূড়া, ক্ষমা, ৎ ঁ ং ঃ",
	"mixed বাংলা and English ০১২৩৪৫৬৭৮৯ 0123456789 😀 \x00\x7f  \n\n\t x <|endoftext|>",
	"it's   spaced\u00a0out\r\n\r\nend   ",
}

// TestGPT2KnownIDs checks ids published for GPT-2 (tiktoken "gpt2",
// transformers GPT2TokenizerFast), with the encoding embedded: no download.
func TestGPT2KnownIDs(t *testing.T) {
	tok, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		ids  []int32
	}{
		{"Hello world", []int32{15496, 995}},
		{"Hello, world!", []int32{15496, 11, 995, 0}},
		{" the", []int32{262}},
		{"\n\n", []int32{628}},
	} {
		got, err := tok.Encode([]byte(c.text))
		if err != nil || !slices.Equal(got, c.ids) {
			t.Errorf("gpt2 Encode(%q) = %v, %v; want %v", c.text, got, err, c.ids)
		}
	}
	if tok.Vocab() != 50257 || string(tok.Token(50256)) != "<|endoftext|>" || tok.Token(50257) != nil {
		t.Errorf("gpt2 vocab %d, token 50256 %q", tok.Vocab(), tok.Token(50256))
	}
}

// TestTokenizerRoundTrip checks decode(encode(x)) == x for Bangla and
// English with every tokenizer, and that Token agrees with Decode.
func TestTokenizerRoundTrip(t *testing.T) {
	g, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	bpe, err := TrainBPE(Corpus(1, 64<<10), 400)
	if err != nil {
		t.Fatal(err)
	}
	texts := append(slices.Clone(roundTripTexts), string(Corpus(9, 4000)))
	for _, tok := range []Tokenizer{Bytes{}, g, bpe} {
		for _, s := range texts {
			ids, err := tok.Encode([]byte(s))
			if err != nil {
				t.Fatalf("%s Encode(%q): %v", tok.Name(), s, err)
			}
			b, err := tok.Decode(ids)
			if err != nil || string(b) != s {
				t.Fatalf("%s Decode(Encode(%q)) = %q, %v", tok.Name(), s, b, err)
			}
			if got := DecodeText(tok, ids); got != s {
				t.Fatalf("%s DecodeText = %q, want %q", tok.Name(), got, s)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.Vocab() {
					t.Fatalf("%s: id %d outside vocab %d", tok.Name(), id, tok.Vocab())
				}
			}
		}
		if _, err := tok.Encode([]byte("a\xffb")); err == nil {
			t.Errorf("%s: invalid UTF-8 accepted", tok.Name())
		}
	}
}

// TestSplitChunks checks that chunks join to the text and follow GPT-2's
// whitespace rule, with Bangla vowel signs inside words.
func TestSplitChunks(t *testing.T) {
	split := func(s string) []string {
		var out []string
		splitChunks([]byte(s), func(c []byte) { out = append(out, string(c)) })
		return out
	}
	for s, want := range map[string][]string{
		"Hello world":     {"Hello", " world"},
		"a  b":            {"a", " ", " b"},
		"a\n\nb":          {"a", "\n", "\n", "b"},
		"রিনার ৩টি বই।\n": {"রিনার", " ৩", "টি", " বই", "।", "\n"},
		"x, 42 ... end  ": {"x", ",", " 42", " ...", " end", "  "},
	} {
		if got := split(s); !slices.Equal(got, want) {
			t.Errorf("split(%q) = %q, want %q", s, got, want)
		}
	}
	for _, s := range append(roundTripTexts, string(Corpus(3, 3000))) {
		if got := strings.Join(split(s), ""); got != s {
			t.Errorf("chunks of %q join to %q", s, got)
		}
	}
}

// TestBPE checks training, the file format and that merges shorten Bangla.
func TestBPE(t *testing.T) {
	text := Corpus(1, 128<<10)
	b, err := TrainBPE(text, 512)
	if err != nil {
		t.Fatal(err)
	}
	if b.Vocab() != 512 {
		t.Fatalf("vocab %d, want 512", b.Vocab())
	}
	path := filepath.Join(t.TempDir(), "bn.bpe")
	if err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	b2, err := ParseTokenizer(path)
	if err != nil {
		t.Fatal(err)
	}
	held := Corpus(2, 32<<10)
	ids, _ := b.Encode(held)
	ids2, _ := b2.Encode(held)
	if !slices.Equal(ids, ids2) {
		t.Fatal("a saved and reloaded BPE encodes differently")
	}
	if tpc := float64(len(ids)) / float64(utf8.RuneCount(held)); tpc > 0.8 {
		t.Errorf("vocab-512 BPE: %.2f tokens per character on held-out corpus text, want < 0.8 (bytes: ~2.3)", tpc)
	}
	// Deterministic: the same corpus gives the same file.
	b3, _ := TrainBPE(text, 512)
	f1, _ := b.MarshalText()
	f3, _ := b3.MarshalText()
	if !bytes.Equal(f1, f3) {
		t.Error("training twice on the same text gave different merges")
	}
	for _, bad := range []string{"", "druto bpe v1\n1 2 3\n", "druto bpe v1\n300 1\n", "druto bpe v1\n1 2\n1 2\n", "something else\n"} {
		if _, err := ParseBPE([]byte(bad)); err == nil {
			t.Errorf("ParseBPE(%q) accepted", bad)
		}
	}
	if _, err := TrainBPE(text, 256); err == nil {
		t.Error("vocab 256 accepted")
	}
	if _, err := ParseTokenizer(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "neither bytes, gpt2") {
		t.Errorf("missing tokenizer file: %v", err)
	}
}

// TestEncodeCached checks that pieces tokenise as the whole text does, and
// that the shard cache is written once and reused.
func TestEncodeCached(t *testing.T) {
	g, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	text := Corpus(4, 600<<10) // several pieces
	text = append(text, "tail\n\n  spaced   \n"...)
	whole, _ := g.Encode(text)
	calls := 0
	pieces, err := EncodeProgress(g, text, func(done, total int) { calls++ })
	if err != nil || !slices.Equal(whole, pieces) {
		t.Fatalf("EncodeProgress differs from Encode (%d vs %d tokens, %v)", len(pieces), len(whole), err)
	}
	if calls < 2 {
		t.Errorf("progress called %d times for %d bytes", calls, len(text))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "in.txt")
	os.WriteFile(src, text, 0o644)
	t1, cache, err := LoadTokens(src, g, dir, nil)
	if err != nil || cache == "" || !slices.Equal(t1, whole) {
		t.Fatalf("LoadTokens: cache %q, %v", cache, err)
	}
	called := false
	t2, cache2, err := LoadTokens(src, g, dir, func(int, int) { called = true })
	if err != nil || cache2 != cache || called || !slices.Equal(t2, whole) {
		t.Fatalf("second LoadTokens: cache %q (first %q), tokenised again %v, %v", cache2, cache, called, err)
	}
}

// TestGPT2OwnSplit checks the written-out GPT-2 split and merge (used for
// text with U+007F, which the module's regular expression drops) against
// the module on text without it, and that DEL encodes as GPT-2's byte token.
func TestGPT2OwnSplit(t *testing.T) {
	tk, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	g := tk.(*gpt2Tokenizer)
	texts := append(slices.Clone(roundTripTexts)[1:4], string(Corpus(7, 20000)),
		"it's don't we'll I'd they've you're 'quoted' ''s  'll",
		"x.'s \t\t tabs\u2003em-space\u00a0nbsp ١٢٣ Ⅻ ½ é e\u0301 क्षत्रिय 日本語 🙂🙂 -- ... !!! ?\n\n\n  \n end")
	r := uint64(1)
	for k := 0; k < 200; k++ { // random mixes of tricky characters
		alphabet := []rune{' ', ' ', '\n', '\t', 'a', 'B', '7', '\'', 's', 'l', '.', '!', 'া', 'ক', '্', '৩', '\u00a0', '\u2003', '😀', '-', 'é', '\r'}
		var sb strings.Builder
		for i := 0; i < 40; i++ {
			r = r*6364136223846793005 + 1442695040888963407
			sb.WriteRune(alphabet[(r>>33)%uint64(len(alphabet))])
		}
		texts = append(texts, sb.String())
	}
	for _, s := range texts {
		want, err := g.Encode([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if got := g.encodeOwn([]byte(s)); !slices.Equal(got, want) {
			t.Fatalf("own GPT-2 split of %q:\n%v\nmodule:\n%v", s, got, want)
		}
	}
	if got, _ := g.Encode([]byte("a\x7fb")); !slices.Equal(got, []int32{64, 221, 65}) {
		t.Errorf("gpt2 Encode(a DEL b) = %v, want [64 221 65]", got)
	}
}

func TestTokensPerChar(t *testing.T) {
	all, en, bn, err := TokensPerChar(Bytes{}, []byte("ab\nআ\n"))
	if err != nil || all != 7.0/5 || en != 1 || bn != 2 {
		t.Errorf("TokensPerChar = %v %v %v %v; want 1.4 1 2", all, en, bn, err)
	}
}

func TestPieces(t *testing.T) {
	p, err := Pieces(Bytes{}, "aই")
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 4 || p[0] != "a" || strings.Join(p, "") != "aই" {
		t.Fatalf("pieces %q", p)
	}
	if _, err := Pieces(Bytes{}, "\xff"); err == nil {
		t.Fatal("invalid UTF-8 split without an error")
	}
}
