package data

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestGPT2SpecialToken: "<|endoftext|>" in text is the special token, as
// transformers' GPT2TokenizerFast encodes it ("a<|endoftext|>b" ->
// 64, 50256, 65), and it decodes back.
func TestGPT2SpecialToken(t *testing.T) {
	g, err := GPT2()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		ids  []int32
	}{
		{"a<|endoftext|>b", []int32{64, 50256, 65}},
		{"<|endoftext|>", []int32{50256}},
		{"<|endoftext|><|endoftext|>Hello world", []int32{50256, 50256, 15496, 995}},
		{"<|endoftext", []int32{27, 91, 437, 1659, 5239}},
	} {
		ids, err := g.Encode([]byte(c.text))
		if err != nil || !slices.Equal(ids, c.ids) {
			t.Errorf("Encode(%q) = %v, %v; want %v", c.text, ids, err, c.ids)
		}
		if b, _ := g.Decode(ids); string(b) != c.text {
			t.Errorf("Decode = %q, want %q", b, c.text)
		}
	}
}

// TestCheckGPT2Vocab: vocab.json spells bytes as GPT-2's bytes_to_unicode
// does (known entries from the published file), the whole vocabulary
// passes in both file forms, and one wrong or missing entry is refused.
func TestCheckGPT2Vocab(t *testing.T) {
	g, _ := GPT2()
	for id, want := range map[int32]string{0: "!", 262: "Ġthe", 198: "Ċ", 628: "ĊĊ", 220: "Ġ", 15496: "Hello", 764: "Ġ."} {
		if got := vocabText(g.Token(id)); got != want {
			t.Errorf("token %d spelled %q, vocab.json has %q", id, got, want)
		}
	}
	b, err := GPT2VocabJSON()
	if err != nil {
		t.Fatal(err)
	}
	vocab := map[string]int{}
	if err := json.Unmarshal(b, &vocab); err != nil || vocab["Ġthe"] != 262 || vocab["<|endoftext|>"] != 50256 {
		t.Fatalf("GPT2VocabJSON: %v, Ġthe %d", err, vocab["Ġthe"])
	}
	if err := CheckGPT2Vocab(b); err != nil {
		t.Fatalf("vocab.json: %v", err)
	}
	tj, _ := json.Marshal(map[string]any{"model": map[string]any{"type": "BPE", "vocab": vocab}})
	if err := CheckGPT2Vocab(tj); err != nil {
		t.Fatalf("tokenizer.json: %v", err)
	}
	vocab["Ġthe"], vocab["Ġ."] = 764, 262
	b, _ = json.Marshal(vocab)
	if err := CheckGPT2Vocab(b); err == nil || !strings.Contains(err.Error(), "not GPT-2's") {
		t.Errorf("swapped ids: %v", err)
	}
	delete(vocab, "Ġthe")
	b, _ = json.Marshal(vocab)
	if err := CheckGPT2Vocab(b); err == nil || !strings.Contains(err.Error(), "50256 tokens") {
		t.Errorf("missing token: %v", err)
	}
	if err := CheckGPT2Vocab([]byte("[1,2")); err == nil {
		t.Error("bad JSON accepted")
	}
}
