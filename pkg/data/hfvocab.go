package data

import (
	"encoding/json"
	"fmt"
)

// byteRunes is GPT-2's bytes_to_unicode table (openai/gpt-2 encoder.py,
// used by transformers' GPT2Tokenizer): each byte as the printable rune
// that vocab.json writes it with.
var byteRunes = func() [256]rune {
	var t [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae && b <= 0xff {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}()

// vocabText returns how vocab.json spells the token whose bytes are b.
func vocabText(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = byteRunes[c]
	}
	return string(r)
}

// maxVocabJSON bounds a vocab.json or tokenizer.json read beside a model
// (GPT-2's are 1 MB and 1.4 MB).
const maxVocabJSON = 64 << 20

// CheckGPT2Vocab reports whether a Hugging Face tokenizer file, vocab.json
// (token -> id) or tokenizer.json (its model.vocab), is GPT-2's vocabulary:
// every one of GPT-2's 50257 tokens with the id druto's embedded GPT-2
// encoding gives it, and no other token. Merges need no check: with the
// same vocabulary, GPT-2's merges are the ranks of the merged tokens.
func CheckGPT2Vocab(b []byte) error {
	if len(b) > maxVocabJSON {
		return fmt.Errorf("data: tokenizer file of %d bytes, larger than any GPT-2 vocabulary", len(b))
	}
	var vocab map[string]int
	var tj struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &tj); err == nil && tj.Model.Vocab != nil {
		vocab = tj.Model.Vocab
	} else if err := json.Unmarshal(b, &vocab); err != nil {
		return fmt.Errorf("data: the tokenizer file is neither vocab.json nor tokenizer.json: %v", err)
	}
	g, err := GPT2()
	if err != nil {
		return err
	}
	if len(vocab) != GPT2Vocab {
		return fmt.Errorf("data: the model's tokenizer has %d tokens, GPT-2's has %d", len(vocab), GPT2Vocab)
	}
	for id := int32(0); id < GPT2Vocab; id++ {
		s := string(g.Token(id))
		if id != gpt2EOT {
			s = vocabText(g.Token(id))
		}
		if got, ok := vocab[s]; !ok || got != int(id) {
			return fmt.Errorf("data: the model's tokenizer is not GPT-2's: token %q is id %d there, %d in GPT-2 (missing: %v)", s, got, id, !ok)
		}
	}
	return nil
}

// GPT2VocabJSON returns GPT-2's vocab.json as transformers' GPT2Tokenizer
// saves it (token spelled through bytes_to_unicode -> id), from the
// embedded encoding: what a GPT-2 that druto saves for transformers needs
// beside its weights.
func GPT2VocabJSON() ([]byte, error) {
	g, err := GPT2()
	if err != nil {
		return nil, err
	}
	vocab := make(map[string]int, GPT2Vocab)
	for id := int32(0); id < GPT2Vocab; id++ {
		s := string(g.Token(id))
		if id != gpt2EOT {
			s = vocabText(g.Token(id))
		}
		vocab[s] = int(id)
	}
	return json.Marshal(vocab)
}
