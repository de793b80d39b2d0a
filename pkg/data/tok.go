package data

import (
	"fmt"
	"os"
	"strings"
)

// Tokenizer turns UTF-8 text into token ids and back. Three kinds exist:
// Bytes (one token a byte, vocabulary 256), GPT2 (OpenAI's r50k_base BPE,
// vocabulary 50257) and a BPE learned on a corpus by TrainBPE.
type Tokenizer interface {
	// Name is "bytes", "gpt2" or "bpe"; checkpoints record it.
	Name() string
	// Vocab is the number of token ids, 0..Vocab-1.
	Vocab() int
	// Encode tokenises text, which must be valid UTF-8.
	Encode(text []byte) ([]int32, error)
	// Decode returns the bytes that tokens stand for; they need not be valid
	// UTF-8 when the tokens end inside a character.
	Decode(tokens []int32) ([]byte, error)
	// Token returns the bytes of one token, nil for an id that decodes to
	// nothing (outside the vocabulary, or a special token).
	Token(id int32) []byte
}

// Bytes is the byte-level tokenizer: token i is byte i.
type Bytes struct{}

// Name returns "bytes".
func (Bytes) Name() string { return "bytes" }

// Vocab returns 256.
func (Bytes) Vocab() int { return VocabSize }

// Encode is the package's Encode.
func (Bytes) Encode(text []byte) ([]int32, error) { return Encode(text) }

// Decode is the package's Decode.
func (Bytes) Decode(tokens []int32) ([]byte, error) { return Decode(tokens) }

var byteTokens = func() [VocabSize][]byte {
	var t [VocabSize][]byte
	for i := range t {
		t[i] = []byte{byte(i)}
	}
	return t
}()

// Token returns the one byte of token id.
func (Bytes) Token(id int32) []byte {
	if id < 0 || id >= VocabSize {
		return nil
	}
	return byteTokens[id]
}

// ParseTokenizer returns the tokenizer that spec names: "bytes", "gpt2", or
// the path of a BPE file written by "druto tokenizer train" (BPE.Save).
func ParseTokenizer(spec string) (Tokenizer, error) {
	switch spec {
	case "bytes":
		return Bytes{}, nil
	case "gpt2":
		return GPT2()
	case "":
		return nil, fmt.Errorf("data: empty tokenizer name; use bytes, gpt2 or a BPE file from 'druto tokenizer train'")
	}
	if _, err := os.Stat(spec); err != nil {
		return nil, fmt.Errorf("data: tokenizer %q is neither bytes, gpt2 nor an existing BPE file (%v)", spec, unwrapPath(err))
	}
	return LoadBPE(spec)
}

// DecodeText decodes tokens with tok into valid UTF-8 for display: bytes
// that do not form whole characters, and ids that decode to nothing, become
// U+FFFD.
func DecodeText(tok Tokenizer, tokens []int32) string {
	var b []byte
	for _, t := range tokens {
		p := tok.Token(t)
		if p == nil {
			p = []byte{0xff} // never valid UTF-8: replaced below
		}
		b = append(b, p...)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// decodeWith is Decode for a tokenizer given by its token table.
func decodeWith(tok Tokenizer, tokens []int32) ([]byte, error) {
	var out []byte
	for i, t := range tokens {
		p := tok.Token(t)
		if p == nil {
			return nil, fmt.Errorf("data: token %d at position %d is not in the %s tokenizer's vocabulary of %d", t, i, tok.Name(), tok.Vocab())
		}
		out = append(out, p...)
	}
	return out, nil
}

// Pieces tokenises text and returns each token's bytes as a string: how
// tok splits it (a piece need not be valid UTF-8 on its own).
func Pieces(tok Tokenizer, text string) ([]string, error) {
	ids, err := tok.Encode([]byte(text))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(tok.Token(id))
	}
	return out, nil
}
