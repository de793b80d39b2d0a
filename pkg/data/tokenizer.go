package data

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// VocabSize is the number of distinct tokens: the tokenizer is byte-level, so
// a token is one byte of UTF-8 text and Bangla, English or any other script
// need no vocabulary file.
const VocabSize = 256

// ErrInvalidUTF8 is wrapped by every error about text that is not valid UTF-8;
// the wrapping error's message names the byte offset of the first bad byte.
var ErrInvalidUTF8 = errors.New("data: invalid UTF-8")

// utf8Error reports the first invalid byte of a text, and the file it came
// from when there is one. It unwraps to ErrInvalidUTF8.
type utf8Error struct {
	path   string // empty for in-memory text
	offset int    // byte offset of the first byte that does not start a valid sequence
}

func (e *utf8Error) Error() string {
	if e.path == "" {
		return fmt.Sprintf("%v at byte %d (save the file as UTF-8)", ErrInvalidUTF8, e.offset)
	}
	return fmt.Sprintf("%v in %s at byte %d (save the file as UTF-8)", ErrInvalidUTF8, e.path, e.offset)
}

func (e *utf8Error) Unwrap() error { return ErrInvalidUTF8 }

// firstInvalid returns the byte offset of the first byte of text that does
// not begin a valid UTF-8 sequence (overlong forms and surrogates included),
// or -1 when text is valid.
func firstInvalid(text []byte) int {
	if utf8.Valid(text) {
		return -1
	}
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1 // unreachable: utf8.Valid said otherwise
}

// Encode returns one token per byte of text. Text that is not valid UTF-8
// gives an error wrapping ErrInvalidUTF8 whose message names the offset of
// the first bad byte, e.g. "data: invalid UTF-8 at byte 1234 (save the file
// as UTF-8)".
func Encode(text []byte) ([]int32, error) {
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{offset: off}
	}
	tokens := make([]int32, len(text))
	for i, b := range text {
		tokens[i] = int32(b)
	}
	return tokens, nil
}

// Decode turns tokens back into the bytes they stand for. A token outside
// 0..VocabSize-1 is an error. The bytes need not be valid UTF-8 (a sample can
// stop in the middle of a character); use DecodeString for display.
func Decode(tokens []int32) ([]byte, error) {
	out := make([]byte, len(tokens))
	for i, t := range tokens {
		if t < 0 || t >= VocabSize {
			return nil, fmt.Errorf("data: token %d at position %d is outside the byte vocabulary 0..%d "+
				"(byte-level decoding needs a vocab-%d model; GPT-2 token ids cannot be decoded here)",
				t, i, VocabSize-1, VocabSize)
		}
		out[i] = byte(t)
	}
	return out, nil
}

// DecodeString turns tokens into valid UTF-8 for display. Each run of tokens
// that do not form valid UTF-8 (an incomplete character at either end of a
// sample, a stray continuation byte, a token outside 0..VocabSize-1) becomes
// one U+FFFD replacement character.
func DecodeString(tokens []int32) string {
	b := make([]byte, len(tokens))
	for i, t := range tokens {
		if t >= 0 && t < VocabSize {
			b[i] = byte(t)
		} else {
			b[i] = 0xff // never valid in UTF-8, so it is replaced below
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
