package data

// A byte-level BPE in the style of Andrej Karpathy's minbpe, written here
// from scratch as a lab exercise: it is small enough to read in one sitting
// (training is the loop in TrainBPE, encoding the loop in encodeChunk), and
// it is the cure for Bangla's three bytes a character. It is not meant to
// compete with production tokenizers on speed.

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/internal/boundedread"
)

// bpeHeader opens a BPE file; the rest is one merge a line, "a b": the ids
// of the pair that line i (from 0) merges into token 256+i.
const bpeHeader = "druto bpe v1"

// BPE is a byte-level byte-pair encoding: tokens 0..255 are bytes, and each
// later token is the merge of two earlier ones. Text is first split into
// chunks (a run of letters and combining marks, of digits, of other
// symbols, each with at most one leading space; whitespace on its own), and
// merges never cross a chunk boundary. Unlike GPT-2's split, combining marks
// count as letters, so a Bangla word with vowel signs stays one chunk.
// A BPE is safe for concurrent use.
type BPE struct {
	merges [][2]int32         // merge i makes token 256+i
	rank   map[[2]int32]int32 // pair -> the token it merges into
	tokens [][]byte           // id -> bytes

	mu    sync.Mutex
	cache map[string][]int32 // chunk -> ids
}

// TrainBPE learns a BPE of vocab tokens (256 bytes plus vocab-256 merges)
// on text: it counts the chunks of text, then repeatedly merges the most
// frequent adjacent pair of tokens (ties: the smallest pair) into a new
// token. It stops early when no pair occurs twice. vocab must be in
// 257..65536 (so that ids fit llm.c's uint16 shards).
func TrainBPE(text []byte, vocab int) (*BPE, error) {
	if vocab <= VocabSize || vocab > 1<<16 {
		return nil, fmt.Errorf("data: BPE vocabulary %d must be in %d..%d", vocab, VocabSize+1, 1<<16)
	}
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{offset: off}
	}
	counts := map[string]int{}
	splitChunks(text, func(c []byte) { counts[string(c)]++ })
	type word struct {
		ids []int32
		n   int
	}
	words := make([]word, 0, len(counts))
	for c, n := range counts {
		ids := make([]int32, len(c))
		for i := 0; i < len(c); i++ {
			ids[i] = int32(c[i])
		}
		words = append(words, word{ids, n})
	}
	var merges [][2]int32
	pairs := map[[2]int32]int{}
	for next := int32(VocabSize); int(next) < vocab; next++ {
		clear(pairs)
		for _, w := range words {
			for i := 0; i+1 < len(w.ids); i++ {
				pairs[[2]int32{w.ids[i], w.ids[i+1]}] += w.n
			}
		}
		best, bestN := [2]int32{}, 1
		for p, n := range pairs {
			if n > bestN || n == bestN && bestN > 1 && (p[0] < best[0] || p[0] == best[0] && p[1] < best[1]) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break // nothing left worth merging
		}
		merges = append(merges, best)
		for wi := range words {
			words[wi].ids = mergePair(words[wi].ids, best, next)
		}
	}
	return newBPE(merges)
}

// mergePair replaces every occurrence of pair in ids by id, in place.
func mergePair(ids []int32, pair [2]int32, id int32) []int32 {
	out := ids[:0]
	for i := 0; i < len(ids); i++ {
		if i+1 < len(ids) && ids[i] == pair[0] && ids[i+1] == pair[1] {
			out = append(out, id)
			i++
		} else {
			out = append(out, ids[i])
		}
	}
	return out
}

// maxBPETableBytes bounds the bytes of all a BPE's tokens together, checked
// before they are built: merges can double a token's length each, so 40
// lines of a file could ask for 2^40 bytes. A real vocabulary of 2^16
// tokens takes well under 1 MiB.
const maxBPETableBytes = 64 << 20

func newBPE(merges [][2]int32) (*BPE, error) {
	// The lengths first (each at most the bound + 1, so no sum overflows).
	lens := make([]int64, VocabSize, VocabSize+len(merges))
	for i := range lens {
		lens[i] = 1
	}
	total := int64(VocabSize)
	for i, m := range merges {
		id := int32(VocabSize + i)
		if m[0] < 0 || m[0] >= id || m[1] < 0 || m[1] >= id {
			return nil, fmt.Errorf("merge %d (%d %d) uses a token that does not exist before it", i, m[0], m[1])
		}
		n := min(lens[m[0]]+lens[m[1]], maxBPETableBytes+1)
		lens = append(lens, n)
		if total += n; total > maxBPETableBytes {
			return nil, fmt.Errorf("merge %d makes the tokens longer than %d MiB together (token %d alone is %d bytes or more); a real vocabulary takes under 1 MiB: the file is corrupt or crafted",
				i, maxBPETableBytes>>20, id, n)
		}
	}
	b := &BPE{merges: merges, rank: make(map[[2]int32]int32, len(merges)), cache: map[string][]int32{}}
	b.tokens = make([][]byte, VocabSize, VocabSize+len(merges))
	for i := range b.tokens {
		b.tokens[i] = []byte{byte(i)}
	}
	for i, m := range merges {
		id := int32(VocabSize + i)
		if m[0] < 0 || m[0] >= id || m[1] < 0 || m[1] >= id {
			return nil, fmt.Errorf("merge %d (%d %d) uses a token that does not exist before it", i, m[0], m[1])
		}
		if _, dup := b.rank[m]; dup {
			return nil, fmt.Errorf("merge %d (%d %d) repeats an earlier merge", i, m[0], m[1])
		}
		b.rank[m] = id
		b.tokens = append(b.tokens, append(append([]byte(nil), b.tokens[m[0]]...), b.tokens[m[1]]...))
	}
	return b, nil
}

// Name returns "bpe".
func (*BPE) Name() string { return "bpe" }

// Vocab returns 256 plus the number of merges.
func (b *BPE) Vocab() int { return len(b.tokens) }

// Token returns the bytes of token id.
func (b *BPE) Token(id int32) []byte {
	if id < 0 || int(id) >= len(b.tokens) {
		return nil
	}
	return b.tokens[id]
}

// Decode returns the bytes of tokens.
func (b *BPE) Decode(tokens []int32) ([]byte, error) { return decodeWith(b, tokens) }

// Encode splits text into chunks and applies the merges to each, earliest
// merge first, as they were learned.
func (b *BPE) Encode(text []byte) ([]int32, error) {
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{offset: off}
	}
	out := make([]int32, 0, len(text)/2)
	splitChunks(text, func(c []byte) { out = append(out, b.encodeChunk(c)...) })
	return out, nil
}

func (b *BPE) encodeChunk(c []byte) []int32 {
	b.mu.Lock()
	ids, ok := b.cache[string(c)]
	b.mu.Unlock()
	if ok {
		return ids
	}
	ids = make([]int32, len(c))
	for i := range c {
		ids[i] = int32(c[i])
	}
	for len(ids) >= 2 {
		// The pair whose merge was learned first is applied first.
		best, bestID := [2]int32{}, int32(-1)
		for i := 0; i+1 < len(ids); i++ {
			p := [2]int32{ids[i], ids[i+1]}
			if id, ok := b.rank[p]; ok && (bestID < 0 || id < bestID) {
				best, bestID = p, id
			}
		}
		if bestID < 0 {
			break
		}
		ids = mergePair(ids, best, bestID)
	}
	b.mu.Lock()
	if len(b.cache) < 1<<20 {
		b.cache[string(c)] = ids
	}
	b.mu.Unlock()
	return ids
}

// Chunks returns the chunks a BPE splits text into before it merges (see
// BPE): joined, they are text, and no merge crosses from one to the next.
func Chunks(text []byte) [][]byte {
	var out [][]byte
	splitChunks(text, func(c []byte) { out = append(out, c) })
	return out
}

// chunk classes of splitChunks.
const (
	classSpace = iota
	classLetter
	classDigit
	classOther
)

// runeClass is the class of r; marks (Bangla vowel signs, the virama)
// count as letters when marks is set (druto's BPE) and as other symbols
// otherwise (GPT-2).
func runeClass(r rune, marks bool) int {
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsLetter(r) || marks && unicode.IsMark(r):
		return classLetter
	case unicode.IsNumber(r):
		return classDigit
	}
	return classOther
}

// splitChunks calls emit with each chunk of text, in order; the chunks
// joined are text. A chunk is a run of one class (letters and marks, digits,
// other symbols) with at most one leading space, or whitespace: a run of
// whitespace before a non-space is emitted without its last character, which
// is the next chunk's leading space when it is ' ' and a chunk of its own
// otherwise (GPT-2's rule, without its regular expression).
func splitChunks(text []byte, emit func([]byte)) { split(text, true, false, emit) }

// gpt2Contractions are matched first at the start of a GPT-2 chunk.
var gpt2Contractions = []string{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}

// split is splitChunks with marks counted as letters or not, and GPT-2's
// contractions ('s, 't, 're, 've, 'm, 'll, 'd) as chunks of their own or
// not. With marks false and contractions true it is GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out.
func split(text []byte, marks, contractions bool, emit func([]byte)) {
	n := len(text)
	for i := 0; i < n; {
		r, size := utf8.DecodeRune(text[i:])
		start := i
		if contractions && r == '\'' {
			if c := contraction(text[i:]); c > 0 {
				emit(text[i : i+c])
				i += c
				continue
			}
		}
		if runeClass(r, marks) == classSpace {
			j, last := i, i
			for j < n {
				r2, s2 := utf8.DecodeRune(text[j:])
				if runeClass(r2, marks) != classSpace {
					break
				}
				last = j
				j += s2
			}
			if j == n {
				emit(text[i:j])
				return
			}
			if last > i {
				emit(text[i:last])
			}
			if text[last] != ' ' {
				emit(text[last:j])
				i = j
				continue
			}
			start, i = last, last+1
			r, size = utf8.DecodeRune(text[i:])
		}
		cls := runeClass(r, marks)
		i += size
		for i < n {
			r2, s2 := utf8.DecodeRune(text[i:])
			if runeClass(r2, marks) != cls {
				break
			}
			i += s2
		}
		emit(text[start:i])
	}
}

// contraction returns the length of the GPT-2 contraction b starts with, or 0.
func contraction(b []byte) int {
	for _, c := range gpt2Contractions {
		if bytes.HasPrefix(b, []byte(c)) {
			return len(c)
		}
	}
	return 0
}

// MarshalText returns the BPE in its file format: a header line, then one
// merge a line.
func (b *BPE) MarshalText() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(bpeHeader + "\n")
	for _, m := range b.merges {
		fmt.Fprintf(&buf, "%d %d\n", m[0], m[1])
	}
	return buf.Bytes(), nil
}

// ParseBPE reads a BPE from the bytes MarshalText wrote.
func ParseBPE(text []byte) (*BPE, error) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != bpeHeader {
		return nil, fmt.Errorf("data: not a druto BPE (the first line is not %q); make one with 'druto tokenizer train'", bpeHeader)
	}
	var merges [][2]int32
	for line := 2; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		a, err1 := strconv.ParseInt(f[0], 10, 32)
		var b int64
		var err2 error = fmt.Errorf("missing")
		if len(f) == 2 {
			b, err2 = strconv.ParseInt(f[1], 10, 32)
		}
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("data: BPE line %d is %q, want two token ids", line, sc.Text())
		}
		merges = append(merges, [2]int32{int32(a), int32(b)})
	}
	if len(merges)+VocabSize > 1<<16 {
		return nil, fmt.Errorf("data: BPE has %d merges; at most %d fit uint16 token ids", len(merges), 1<<16-VocabSize)
	}
	bp, err := newBPE(merges)
	if err != nil {
		return nil, fmt.Errorf("data: BPE: %v", err)
	}
	return bp, nil
}

// Save writes the BPE to path atomically.
func (b *BPE) Save(path string) error {
	t, _ := b.MarshalText()
	if err := atomicfile.WriteFile(path, t); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}

// maxBPEBytes bounds a BPE file read (a vocabulary of 2^16 tokens takes
// well under 1 MiB).
const maxBPEBytes = 64 << 20

// LoadBPE reads a BPE file written by Save: a regular file, its size
// checked before reading.
func LoadBPE(path string) (*BPE, error) {
	t, err := boundedread.ReadFile(path, maxBPEBytes)
	if err != nil {
		return nil, fmt.Errorf("data: read BPE: %w", err)
	}
	b, err := ParseBPE(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
