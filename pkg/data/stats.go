package data

import (
	"unicode"
	"unicode/utf8"
)

// TokensPerChar returns the tokens per character of text under tok: over
// all of it, over its lines without Bangla letters (English, in druto's
// corpus) and over its lines with them. Each line is encoded on its own.
func TokensPerChar(tok Tokenizer, text []byte) (all, en, bn float64, err error) {
	var n, c [2]int
	for len(text) > 0 {
		i := 0
		for i < len(text) && text[i] != '\n' {
			i++
		}
		if i < len(text) {
			i++ // the newline belongs to its line
		}
		line := text[:i]
		text = text[i:]
		ids, err := tok.Encode(line)
		if err != nil {
			return 0, 0, 0, err
		}
		k := 0
		for _, r := range string(line) {
			if unicode.Is(unicode.Bengali, r) {
				k = 1
				break
			}
		}
		n[k] += len(ids)
		c[k] += utf8.RuneCount(line)
	}
	div := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return div(n[0]+n[1], c[0]+c[1]), div(n[0], c[0]), div(n[1], c[1]), nil
}
