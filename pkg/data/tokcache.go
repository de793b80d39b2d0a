package data

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// encodePiece is how many bytes EncodeProgress tokenises between two calls
// of its progress function.
const encodePiece = 256 << 10

// EncodeProgress tokenises text with tok piece by piece, calling progress
// (when not nil) with the bytes done and the total after each piece. Pieces
// end before a newline that follows a non-space, where neither GPT-2's split
// nor the BPE's can join two chunks, so the tokens are those of one
// tok.Encode(text).
func EncodeProgress(tok Tokenizer, text []byte, progress func(done, total int)) ([]int32, error) {
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{offset: off}
	}
	var out []int32
	for start := 0; start < len(text); {
		end := min(start+encodePiece, len(text))
		for end < len(text) && !(text[end] == '\n' && !isSpaceByte(text[end-1])) {
			end++
		}
		ids, err := tok.Encode(text[start:end])
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		start = end
		if progress != nil {
			progress(start, len(text))
		}
	}
	return out, nil
}

// isSpaceByte reports an ASCII space or a byte inside a multi-byte
// character (which might be a Unicode space): the split is only made after
// an ASCII byte that is surely not a space.
func isSpaceByte(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f' || b >= 0x80
}

// TokenizerID names a tokenizer exactly: its name, and for a BPE the first
// 12 hex digits of the SHA-256 of its file.
func TokenizerID(tok Tokenizer) string {
	if b, ok := tok.(*BPE); ok {
		t, _ := b.MarshalText()
		s := sha256.Sum256(t)
		return "bpe-" + hex.EncodeToString(s[:6])
	}
	return tok.Name()
}

// LoadTokens reads a training file for tok: an llm.c shard (.bin) as it
// is; UTF-8 text tokenised with tok. For a tokenizer other than bytes the
// tokens of a text are cached as an llm.c shard in cacheDir (when not
// empty), named after the text's SHA-256 and TokenizerID, and a later call
// with the same text and tokenizer reads the shard instead. progress is
// passed to EncodeProgress. The second result is the cache file used or
// written ("" when none).
func LoadTokens(path string, tok Tokenizer, cacheDir string, progress func(done, total int)) ([]int32, string, error) {
	if strings.EqualFold(filepath.Ext(path), ".bin") {
		t, err := Load(path)
		return t, "", err
	}
	if _, ok := tok.(Bytes); ok {
		t, err := Load(path)
		return t, "", err
	}
	if _, err := Load(path); err != nil { // the checks and messages of a text file
		return nil, "", err
	}
	text, err := readFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("data: %w", err)
	}
	return EncodeCached(tok, text, cacheDir, progress)
}

// EncodeCached is EncodeProgress with LoadTokens' cache in cacheDir ("":
// no cache).
func EncodeCached(tok Tokenizer, text []byte, cacheDir string, progress func(done, total int)) ([]int32, string, error) {
	if _, ok := tok.(Bytes); ok || cacheDir == "" {
		t, err := EncodeProgress(tok, text, progress)
		return t, "", err
	}
	sum := sha256.Sum256(text)
	cache := filepath.Join(cacheDir, fmt.Sprintf("tokens-%s-%s.bin", TokenizerID(tok), hex.EncodeToString(sum[:8])))
	if t, err := ReadShard(cache); err == nil && len(t) > 0 {
		return t, cache, nil
	}
	t, err := EncodeProgress(tok, text, progress)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("data: token cache: %w", err)
	}
	if err := WriteShard(cache, t); err != nil {
		return nil, "", err
	}
	return t, cache, nil
}
