package data

import (
	"bytes"
	"fmt"
	"math"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"
)

// GPT2Vocab is the size of GPT-2's vocabulary (r50k_base): 50,000 merges,
// 256 byte tokens and <|endoftext|>.
const GPT2Vocab = 50257

// gpt2EOT is the id of <|endoftext|>.
const gpt2EOT = 50256

// gpt2Tokenizer is GPT-2's byte-level BPE (tiktoken's r50k_base, embedded
// in github.com/tiktoken-go/tokenizer: no download).
type gpt2Tokenizer struct {
	c      *codec.Codec
	tokens [][]byte // id -> bytes

	rankOnce sync.Once
	rank     map[string]int32 // bytes -> id, which is also the merge rank
}

var (
	gpt2Once sync.Once
	gpt2Tok  *gpt2Tokenizer
	gpt2Err  error
)

// GPT2 returns GPT-2's tokenizer (the r50k_base encoding that
// tiktoken.get_encoding("gpt2") and transformers' GPT2TokenizerFast use):
// "Hello world" is 15496, 995. The encoding is embedded in the binary. Text
// "<|endoftext|>" is encoded as the special token 50256, as transformers'
// GPT-2 tokenizers do (it is an added token there: split out before the
// BPE), and 50256 decodes to it.
func GPT2() (Tokenizer, error) {
	gpt2Once.Do(func() {
		c := codec.NewR50kBase()
		t := &gpt2Tokenizer{c: c, tokens: make([][]byte, GPT2Vocab)}
		for id := 0; id < gpt2EOT; id++ {
			s, err := c.Decode([]uint{uint(id)})
			if err != nil {
				gpt2Err = fmt.Errorf("data: the embedded GPT-2 encoding has no token %d: %v", id, err)
				return
			}
			t.tokens[id] = []byte(s)
		}
		t.tokens[gpt2EOT] = []byte("<|endoftext|>")
		gpt2Tok = t
	})
	return gpt2Tok, gpt2Err
}

func (*gpt2Tokenizer) Name() string { return "gpt2" }
func (*gpt2Tokenizer) Vocab() int   { return GPT2Vocab }

// eotText is the text of the special token <|endoftext|>.
var eotText = []byte("<|endoftext|>")

func (t *gpt2Tokenizer) Encode(text []byte) ([]int32, error) {
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{offset: off}
	}
	var out []int32
	for {
		i := bytes.Index(text, eotText)
		if i < 0 {
			break
		}
		ids, err := t.encodePlain(text[:i])
		if err != nil {
			return nil, err
		}
		out = append(append(out, ids...), gpt2EOT)
		text = text[i+len(eotText):]
	}
	ids, err := t.encodePlain(text)
	if err != nil || out == nil {
		return ids, err
	}
	return append(out, ids...), nil
}

// encodePlain encodes text that holds no special token.
func (t *gpt2Tokenizer) encodePlain(text []byte) ([]int32, error) {
	if bytes.IndexByte(text, 0x7f) >= 0 {
		return t.encodeOwn(text), nil
	}
	ids, _, err := t.c.Encode(string(text))
	if err != nil {
		return nil, fmt.Errorf("data: gpt2 tokenizer: %v", err)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

func (t *gpt2Tokenizer) Decode(tokens []int32) ([]byte, error) { return decodeWith(t, tokens) }

func (t *gpt2Tokenizer) Token(id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	return t.tokens[id]
}

// encodeOwn is Encode without the module's regular expression, which drops
// U+007F (DEL) in v0.10.0: GPT-2's split written out (split), then
// tiktoken's byte-pair merge, lowest rank first, on each chunk.
func (t *gpt2Tokenizer) encodeOwn(text []byte) []int32 {
	t.rankOnce.Do(func() {
		t.rank = make(map[string]int32, gpt2EOT)
		for id, b := range t.tokens[:gpt2EOT] {
			t.rank[string(b)] = int32(id)
		}
	})
	var out []int32
	split(text, false, true, func(c []byte) {
		if id, ok := t.rank[string(c)]; ok {
			out = append(out, id)
			return
		}
		parts := make([][]byte, len(c))
		for i := range c {
			parts[i] = c[i : i+1]
		}
		for len(parts) > 1 {
			best, bestRank := -1, int32(math.MaxInt32)
			for i := 0; i+1 < len(parts); i++ {
				if r, ok := t.rank[string(c[offset(c, parts[i]):offset(c, parts[i+1])+len(parts[i+1])])]; ok && r < bestRank {
					best, bestRank = i, r
				}
			}
			if best < 0 {
				break
			}
			lo := offset(c, parts[best])
			parts[best] = c[lo : offset(c, parts[best+1])+len(parts[best+1])]
			parts = append(parts[:best+1], parts[best+2:]...)
		}
		for _, p := range parts {
			out = append(out, t.rank[string(p)])
		}
	})
	return out
}

// offset returns where sub, a subslice of b, starts in b.
func offset(b, sub []byte) int { return cap(b) - cap(sub) }
