package lab

// Lab 6: byte-pair encoding on Bangla text, by druto's rules
// (pkg/data/bpe.go).

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/tensor"
)

// CountPairsFunc counts each adjacent pair of token ids within each
// sequence of seqs (a pair never spans two sequences).
type CountPairsFunc func(seqs [][]int32) map[[2]int32]int

// MergeFunc returns ids with each occurrence of pair, found left to
// right, replaced by id (it may reuse ids' storage).
type MergeFunc func(ids []int32, pair [2]int32, id int32) []int32

// TrainBPEFunc learns at most n merges on seqs (the chunks of a text as
// byte ids), as data.TrainBPE: merge i makes token 256+i from the most
// frequent pair (ties: the smallest pair), and training stops early when
// no pair occurs twice. It may change seqs.
type TrainBPEFunc func(seqs [][]int32, n int) [][2]int32

// EncodeBPEFunc encodes text with merges as data.BPE.Encode: each chunk
// of text (Chunks) from its bytes, applying the merge learned first among
// the pairs present until none applies.
type EncodeBPEFunc func(text string, merges [][2]int32) []int32

// bpeSeed is the built-in corpus lab 6 reads its Bangla lines from.
const bpeSeed = 6

// BanglaLines returns the Bangla lines from..to-1 (from 0) of druto's
// built-in bilingual corpus (data.Corpus), each ending in '\n'.
func BanglaLines(from, to int) string {
	var b strings.Builder
	k := 0
	for _, l := range strings.SplitAfter(string(data.Corpus(bpeSeed, 400*to+8192)), "\n") {
		if !strings.ContainsFunc(l, func(r rune) bool { return unicode.Is(unicode.Bengali, r) }) {
			continue
		}
		if k >= from && k < to {
			b.WriteString(l)
		}
		k++
	}
	return b.String()
}

// Chunks returns the chunks druto's BPE splits text into before it merges
// (data.Chunks): a run of letters and their marks, of digits or of other
// symbols, with at most one leading space; or whitespace.
func Chunks(text string) []string {
	var out []string
	for _, c := range data.Chunks([]byte(text)) {
		out = append(out, string(c))
	}
	return out
}

// ---- the reference, and its mistakes ----

// bpeIDs is a chunk's first ids: its bytes, or (mistake "runes") its
// runes.
func bpeIDs(chunk string, mistake string) []int32 {
	var ids []int32
	if mistake == "runes" {
		for _, r := range chunk {
			ids = append(ids, r)
		}
		return ids
	}
	for i := range len(chunk) {
		ids = append(ids, int32(chunk[i]))
	}
	return ids
}

// countModel counts pairs as druto does, or with a mistake: "overlap" (a
// run of one token counted as non-overlapping pairs), "crossseq" (seqs
// joined into one), "lastpair" (each sequence's last pair left out),
// "once" (a pair counted once a sequence).
func countModel(seqs [][]int32, mistake string) map[[2]int32]int {
	if mistake == "crossseq" {
		seqs = [][]int32{slices.Concat(seqs...)}
	}
	counts := map[[2]int32]int{}
	for _, s := range seqs {
		seen := map[[2]int32]bool{}
		end := len(s) - 1
		if mistake == "lastpair" {
			end--
		}
		for i := 0; i < end; i++ {
			p := [2]int32{s[i], s[i+1]}
			if mistake == "once" && seen[p] {
				continue
			}
			seen[p] = true
			counts[p]++
			if mistake == "overlap" && i+2 < len(s) && s[i] == s[i+1] && s[i+1] == s[i+2] {
				i++
			}
		}
	}
	return counts
}

// mergeModel is data's mergePair, or with a mistake: "overlapmerge" (no
// skip past a match: 'aaa' gives [X X a]), "fromright" (matched right to
// left), "firstonly" (the first occurrence only), "swapped" (the pair
// matched as b, a).
func mergeModel(ids []int32, pair [2]int32, id int32, mistake string) []int32 {
	if mistake == "swapped" {
		pair = [2]int32{pair[1], pair[0]}
	}
	if mistake == "fromright" {
		r := slices.Clone(ids)
		slices.Reverse(r)
		r = mergeModel(r, [2]int32{pair[1], pair[0]}, id, "")
		slices.Reverse(r)
		return r
	}
	out, done := []int32{}, false
	for i := 0; i < len(ids); i++ {
		if !done && i+1 < len(ids) && ids[i] == pair[0] && ids[i+1] == pair[1] {
			out = append(out, id)
			done = mistake == "firstonly"
			if mistake != "overlapmerge" {
				i++
			}
		} else {
			out = append(out, ids[i])
		}
	}
	return out
}

// pairLess orders pairs by their first id, then their second.
func pairLess(p, q [2]int32) bool { return p[0] < q[0] || p[0] == q[0] && p[1] < q[1] }

// trainModel is data.TrainBPE on seqs (each a chunk's ids, a chunk as
// often as it occurs), or with a mistake: "tie" (variant 0 the largest of
// equal pairs, 1 the first seen in seqs), "stop" (variant 0 pairs seen
// once merged too, 1 pairs seen twice not), "newid" (merge i makes
// 257+i, or 255+i), "recount" (pairs counted once, before any merge),
// "apply" (merges not applied to seqs), and count's and merge's mistakes
// "overlap" and "overlapmerge".
func trainModel(seqs [][]int32, n int, mistake string, variant int) [][2]int32 {
	work := make([][]int32, len(seqs))
	for i, s := range seqs {
		work[i] = slices.Clone(s)
	}
	countMistake, mergeMistake := "", ""
	switch mistake {
	case "overlap":
		countMistake = mistake
	case "overlapmerge":
		mergeMistake = mistake
	}
	minCount := 2
	if mistake == "stop" {
		minCount = 1 + 2*variant
	}
	merges := [][2]int32{}
	var first map[[2]int32]int
	for k := range n {
		counts := countModel(work, countMistake)
		if mistake == "recount" {
			if first == nil {
				first = counts
			}
			counts = first
		}
		best, bestN := [2]int32{}, 0
		for p, c := range counts {
			better := pairLess(p, best)
			if mistake == "tie" && variant == 0 {
				better = pairLess(best, p)
			}
			if c > bestN || c == bestN && better {
				best, bestN = p, c
			}
		}
		if mistake == "tie" && variant == 1 {
			best = firstSeen(work, counts, bestN)
		}
		if bestN < minCount {
			break
		}
		merges = append(merges, best)
		delete(first, best)
		id := int32(data.VocabSize + k)
		if mistake == "newid" {
			id += int32(1 - 2*variant)
		}
		if mistake == "apply" {
			continue
		}
		for i := range work {
			work[i] = mergeModel(work[i], best, id, mergeMistake)
		}
	}
	return merges
}

// firstSeen is the first pair of seqs, in order, counted n times.
func firstSeen(seqs [][]int32, counts map[[2]int32]int, n int) [2]int32 {
	for _, s := range seqs {
		for i := 0; i+1 < len(s); i++ {
			if p := [2]int32{s[i], s[i+1]}; counts[p] == n {
				return p
			}
		}
	}
	return [2]int32{}
}

// encodeModel is data.BPE.Encode, or with a mistake: "runes" (a chunk
// starts as its runes), "order" (variant 0 the merge learned last first,
// 1 the leftmost pair that has a merge first), "nosplit" (the text as one
// chunk), "newid" (merge i makes 257+i), "overlapmerge".
func encodeModel(text string, merges [][2]int32, mistake string, variant int) []int32 {
	rank := map[[2]int32]int32{}
	for i, m := range merges {
		id := int32(data.VocabSize + i)
		if mistake == "newid" {
			id++
		}
		if _, ok := rank[m]; !ok {
			rank[m] = id
		}
	}
	chunks := Chunks(text)
	if mistake == "nosplit" {
		chunks = []string{text}
	}
	out := []int32{}
	for _, c := range chunks {
		ids := bpeIDs(c, mistake)
		for {
			best, bestID := [2]int32{}, int32(-1)
			for i := 0; i+1 < len(ids); i++ {
				p := [2]int32{ids[i], ids[i+1]}
				id, ok := rank[p]
				if !ok || bestID >= 0 && mistake == "order" && variant == 1 {
					continue
				}
				if bestID < 0 || (id < bestID) != (mistake == "order" && variant == 0) {
					best, bestID = p, id
				}
			}
			if bestID < 0 {
				break
			}
			mm := ""
			if mistake == "overlapmerge" {
				mm = mistake
			}
			ids = mergeModel(ids, best, bestID, mm)
		}
		out = append(out, ids...)
	}
	return out
}

// druto trains and encodes with pkg/data itself where the text is valid
// UTF-8: the lab's reference models above must agree with it
// (TestBPEModels).

// drutoMerges is data.TrainBPE's merges of text, at most n.
func drutoMerges(text string, n int) [][2]int32 {
	b, err := data.TrainBPE([]byte(text), data.VocabSize+n)
	if err != nil {
		panic("lab: " + err.Error())
	}
	merges := make([][2]int32, 0, b.Vocab()-data.VocabSize)
	t, _ := b.MarshalText()
	for _, l := range strings.Split(string(t), "\n")[1:] {
		var m [2]int32
		if _, err := fmt.Sscan(l, &m[0], &m[1]); err == nil {
			merges = append(merges, m)
		}
	}
	return merges
}

// drutoEncode is data.BPE.Encode of text with merges.
func drutoEncode(text string, merges [][2]int32) []int32 {
	var b strings.Builder
	b.WriteString("druto bpe v1\n")
	for _, m := range merges {
		fmt.Fprintf(&b, "%d %d\n", m[0], m[1])
	}
	bp, err := data.ParseBPE([]byte(b.String()))
	if err != nil {
		panic("lab: " + err.Error())
	}
	ids, err := bp.Encode([]byte(text))
	if err != nil {
		panic("lab: " + err.Error())
	}
	return ids
}

func chunkIDs(text string) [][]int32 {
	var seqs [][]int32
	for _, c := range Chunks(text) {
		seqs = append(seqs, bpeIDs(c, ""))
	}
	return seqs
}

func cloneSeqs(seqs [][]int32) [][]int32 {
	out := make([][]int32, len(seqs))
	for i, s := range seqs {
		out[i] = slices.Clone(s)
	}
	return out
}

// randSeqs draws n sequences of 0..maxLen-1 ids from [lo, lo+k).
func randSeqs(rng *tensor.RNG, n, maxLen, lo, k int) [][]int32 {
	seqs := make([][]int32, n)
	for i := range seqs {
		seqs[i] = make([]int32, rng.Intn(maxLen))
		for j := range seqs[i] {
			seqs[i][j] = int32(lo + rng.Intn(k))
		}
	}
	return seqs
}

// randText draws n characters from alphabet.
func randText(rng *tensor.RNG, n int, alphabet string) string {
	rs := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(rs[rng.Intn(len(rs))])
	}
	return b.String()
}

// ---- what the feedback shows ----

// seqText writes ids as Go prints them, "[97 256]", at most 16 of them
// around index at.
func seqText(ids []int32, at int) string {
	lo := max(0, min(at-4, len(ids)-16))
	hi := min(len(ids), lo+16)
	s := fmt.Sprint(ids[lo:hi])
	if lo > 0 {
		s = "[… " + s[1:]
	}
	if hi < len(ids) {
		s = s[:len(s)-1] + " …]"
	}
	return s
}

// quoteText is text in Go's quotes, at most 24 characters of it.
func quoteText(text string) string {
	if r := []rune(text); len(r) > 24 {
		return fmt.Sprintf("%q…", string(r[:24]))
	}
	return fmt.Sprintf("%q", text)
}

// firstDiff is the first index where a and b differ (len of the shorter
// when one is the other's prefix), -1 when they are equal.
func firstDiff[E comparable](a, b []E) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) == len(b) {
		return -1
	}
	return min(len(a), len(b))
}

// seqFailure is a failure of output's sequence got against want, nil when
// they are equal.
func seqFailure(output string, got, want []int32) *Failure {
	k := firstDiff(got, want)
	if k < 0 {
		return nil
	}
	return &Failure{Output: output, GotText: seqText(got, k), WantText: seqText(want, k)}
}

// bpeModel is a mistake's output, for diagnoseBPE.
type bpeModel[T any] struct {
	hint string
	out  func() T
}

// diagnoseBPE is the first mistake whose model gives got, "" when none.
func diagnoseBPE[T any](got T, eq func(a, b T) bool, ms []bpeModel[T]) string {
	for _, m := range ms {
		if eq(got, m.out()) {
			return m.hint
		}
	}
	return ""
}

// ---- the exercises ----

// bpeCase is one case of a lab 6 exercise: its label and its run.
func bpeCase(format string, args []any, run func() *Failure) testCase {
	return testCase{what: label{format: format, args: args}, run: run}
}

// CountPairs is the exercise of fn: pair counts on random byte
// sequences, on the chunks of Bangla lines, on empty and one-token
// sequences and on runs of one byte ('aaa' holds its pair twice).
func CountPairs(fn CountPairsFunc) Exercise {
	check := func(seqs [][]int32) *Failure {
		got, want := fn(cloneSeqs(seqs)), countModel(seqs, "")
		keys := map[[2]int32]bool{}
		for p := range got {
			keys[p] = true
		}
		for p := range want {
			keys[p] = true
		}
		var diff [][2]int32
		for p := range keys {
			if got[p] != want[p] {
				diff = append(diff, p)
			}
		}
		if len(diff) == 0 {
			return nil
		}
		p := slices.MinFunc(diff, func(a, b [2]int32) int {
			if pairLess(a, b) {
				return -1
			}
			return 1
		})
		f := &Failure{Output: "count", Index: fmt.Sprint("[", p, "]"), GotText: fmt.Sprint(got[p]), WantText: fmt.Sprint(want[p])}
		if len(got) == 0 {
			f.Hint = "nothing"
			return f
		}
		var ms []bpeModel[map[[2]int32]int]
		for _, h := range []string{"overlap", "crossseq", "lastpair", "once"} {
			ms = append(ms, bpeModel[map[[2]int32]int]{h, func() map[[2]int32]int { return countModel(seqs, h) }})
		}
		f.Hint = diagnoseBPE(got, mapsEqual, ms)
		return f
	}
	all := func(seqs ...[][]int32) *Failure {
		for _, s := range seqs {
			if f := check(s); f != nil {
				return f
			}
		}
		return nil
	}
	return Exercise{Name: "count-pairs", cases: []testCase{
		bpeCase("random byte sequences", nil, func() *Failure { return check(randSeqs(tensor.NewRNG(80), 12, 10, 'a', 4)) }),
		bpeCase("random bytes 0-255", nil, func() *Failure { return check(randSeqs(tensor.NewRNG(81), 6, 40, 0, 256)) }),
		bpeCase("%d lines of Bangla", []any{20}, func() *Failure { return check(chunkIDs(BanglaLines(0, 20))) }),
		bpeCase("empty and one-token sequences", nil, func() *Failure { return all([][]int32{{}, {7}, {}, {7, 9}, {9}}, nil) }),
		bpeCase("overlapping pairs (aaa)", nil, func() *Failure { return check([][]int32{{97, 97, 97}, {98, 97, 97, 97, 97}}) }),
	}}
}

func mapsEqual(a, b map[[2]int32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for p, n := range a {
		if b[p] != n {
			return false
		}
	}
	return true
}

type mergeCall struct {
	ids  []int32
	pair [2]int32
	id   int32
}

// MergePair is the exercise of fn: one merge on random byte sequences, on
// Bangla chunks (the two bytes every Bangla character starts with), on
// empty, one-token and pair-less sequences, and on runs of one byte.
func MergePair(fn MergeFunc) Exercise {
	run := func(calls []mergeCall) *Failure {
		for _, c := range calls {
			want := mergeModel(c.ids, c.pair, c.id, "")
			got := fn(slices.Clone(c.ids), c.pair, c.id)
			out := fmt.Sprintf("merge(%s, %v, %d)", seqText(c.ids, 0), c.pair, c.id)
			if f := seqFailure(out, got, want); f != nil {
				if len(got) == 0 {
					f.Hint = "nothing"
					return f
				}
				var ms []bpeModel[[]int32]
				for _, h := range []string{"overlapmerge", "fromright", "firstonly", "swapped"} {
					ms = append(ms, bpeModel[[]int32]{h, func() []int32 { return mergeModel(c.ids, c.pair, c.id, h) }})
				}
				f.Hint = diagnoseBPE(got, slices.Equal, ms)
				return f
			}
		}
		return nil
	}
	random := func() []mergeCall {
		rng := tensor.NewRNG(82)
		var calls []mergeCall
		for _, s := range randSeqs(rng, 8, 13, 'a', 3) {
			calls = append(calls, mergeCall{s, [2]int32{int32('a' + rng.Intn(3)), int32('a' + rng.Intn(3))}, int32(256 + rng.Intn(10))})
		}
		return calls
	}
	bangla := func() []mergeCall {
		var calls []mergeCall
		for _, s := range chunkIDs(BanglaLines(0, 2)) {
			calls = append(calls, mergeCall{s, [2]int32{0xe0, 0xa6}, 256})
		}
		return calls
	}
	return Exercise{Name: "merge", cases: []testCase{
		bpeCase("random byte sequences", nil, func() *Failure { return run(random()) }),
		bpeCase("%d lines of Bangla", []any{2}, func() *Failure { return run(bangla()) }),
		bpeCase("empty and one-token sequences", nil, func() *Failure {
			return run([]mergeCall{{[]int32{}, [2]int32{97, 98}, 256}, {[]int32{97}, [2]int32{97, 97}, 256}, {[]int32{97, 98}, [2]int32{98, 97}, 300}})
		}),
		bpeCase("overlapping pairs (aaa)", nil, func() *Failure {
			aa := [2]int32{97, 97}
			return run([]mergeCall{{[]int32{97, 97, 97}, aa, 256}, {[]int32{97, 97, 97, 97}, aa, 256}, {[]int32{98, 97, 97, 97, 98}, aa, 256}})
		}),
	}}
}

// TrainBPE is the exercise of fn: merges learned on random byte
// sequences, on pairs of equal counts (the tie rule), on the chunks of
// Bangla lines (against data.TrainBPE), on runs of one byte, and where
// training must stop early.
func TrainBPE(fn TrainBPEFunc) Exercise {
	run := func(seqs [][]int32, n int, want [][2]int32) *Failure {
		got := fn(cloneSeqs(seqs), n)
		k := firstDiff(got, want)
		if k < 0 {
			return nil
		}
		f := &Failure{Output: "merges", Index: fmt.Sprintf("[%d]", k)}
		switch {
		case k < len(got) && k < len(want):
			f.GotText, f.WantText = fmt.Sprint(got[k]), fmt.Sprint(want[k])
		default:
			f.Output, f.Index, f.GotText, f.WantText = "len(merges)", "", fmt.Sprint(len(got)), fmt.Sprint(len(want))
		}
		if len(got) == 0 {
			f.Hint = "nothing"
			return f
		}
		var ms []bpeModel[[][2]int32]
		for _, m := range []struct {
			hint     string
			variants int
		}{{"tie", 2}, {"stop", 2}, {"newid", 2}, {"recount", 1}, {"apply", 1}, {"overlap", 1}, {"overlapmerge", 1}} {
			for v := range m.variants {
				ms = append(ms, bpeModel[[][2]int32]{m.hint, func() [][2]int32 { return trainModel(seqs, n, m.hint, v) }})
			}
		}
		if f.Hint = diagnoseBPE(got, slices.Equal, ms); f.Hint == "" && k < len(got) && k < len(want) {
			// Ties broken another way (a map's order, say): the first
			// wrong merge has the right merge's count after the merges
			// before it, which are the reference's.
			counts := countModel(mergedBy(seqs, want[:k]), "")
			if counts[got[k]] == counts[want[k]] {
				f.Hint = "tie"
			}
		}
		return f
	}
	random := randSeqs(tensor.NewRNG(83), 10, 13, 'a', 4)
	ties := [][]int32{{3, 4, 9}, {1, 5}, {1, 2}, {3, 4, 9}, {1, 5}, {1, 2}}
	aaa := [][]int32{{97, 97, 97, 97, 97}, {97, 97, 97}}
	return Exercise{Name: "bpe-train", cases: []testCase{
		bpeCase("random byte sequences, %d merges", []any{8}, func() *Failure { return run(random, 8, trainModel(random, 8, "", 0)) }),
		bpeCase("ties between equal counts", nil, func() *Failure { return run(ties, 10, trainModel(ties, 10, "", 0)) }),
		bpeCase("%d lines of Bangla, %d merges", []any{30, 30}, func() *Failure {
			text := BanglaLines(0, 30)
			return run(chunkIDs(text), 30, drutoMerges(text, 30))
		}),
		bpeCase("overlapping pairs (aaa)", nil, func() *Failure { return run(aaa, 5, trainModel(aaa, 5, "", 0)) }),
		bpeCase("a pair seen once, and no sequences", nil, func() *Failure {
			once := [][]int32{{1, 2, 3}, {1, 2, 4}, {5, 6}}
			if f := run(once, 5, [][2]int32{{1, 2}}); f != nil {
				return f
			}
			return run(nil, 3, nil)
		}),
	}}
}

// mergedBy is seqs with merges applied in order (merge i makes 256+i).
func mergedBy(seqs [][]int32, merges [][2]int32) [][]int32 {
	out := cloneSeqs(seqs)
	for k, m := range merges {
		for i := range out {
			out[i] = mergeModel(out[i], m, int32(data.VocabSize+k), "")
		}
	}
	return out
}

// EncodeBPE is the exercise of fn: random text and Bangla lines encoded
// with merges data.TrainBPE learned (against data.BPE.Encode), empty text
// and one byte, runs of one byte, merges whose order matters, and merges
// that would cross a chunk boundary.
func EncodeBPE(fn EncodeBPEFunc) Exercise {
	run := func(text string, merges [][2]int32) *Failure {
		got, want := fn(text, slices.Clone(merges)), drutoEncode(text, merges)
		f := seqFailure(fmt.Sprintf("encode(%s)", quoteText(text)), got, want)
		if f == nil {
			return nil
		}
		if len(got) == 0 {
			f.Hint = "nothing"
			return f
		}
		var ms []bpeModel[[]int32]
		for _, m := range []struct {
			hint     string
			variants int
		}{{"runes", 1}, {"order", 2}, {"nosplit", 1}, {"newid", 1}, {"overlapmerge", 1}} {
			for v := range m.variants {
				ms = append(ms, bpeModel[[]int32]{m.hint, func() []int32 { return encodeModel(text, merges, m.hint, v) }})
			}
		}
		f.Hint = diagnoseBPE(got, slices.Equal, ms)
		return f
	}
	all := func(fs ...func() *Failure) *Failure {
		for _, f := range fs {
			if r := f(); r != nil {
				return r
			}
		}
		return nil
	}
	return Exercise{Name: "bpe-encode", cases: []testCase{
		bpeCase("random text", nil, func() *Failure {
			rng := tensor.NewRNG(84)
			merges := drutoMerges(randText(rng, 300, "aab bc  "), 12)
			return run(randText(rng, 60, "aab bc  "), merges)
		}),
		bpeCase("%d lines of Bangla, %d merges", []any{3, 60}, func() *Failure {
			return run(BanglaLines(60, 63), drutoMerges(BanglaLines(0, 60), 60))
		}),
		bpeCase("empty text and one byte", nil, func() *Failure {
			m := [][2]int32{{97, 97}}
			return all(func() *Failure { return run("", m) }, func() *Failure { return run("a", m) }, func() *Failure { return run("ক", nil) })
		}),
		bpeCase("overlapping pairs (aaa)", nil, func() *Failure {
			return all(func() *Failure { return run("aaaaa", [][2]int32{{97, 97}}) },
				func() *Failure { return run("aaa", [][2]int32{{97, 97}, {256, 97}}) })
		}),
		bpeCase("merge order", nil, func() *Failure { return run("abc cab", [][2]int32{{98, 99}, {97, 98}}) }),
		bpeCase("chunk boundaries", nil, func() *Failure { return run("ab ba", [][2]int32{{98, 32}}) }),
	}}
}

// ---- what the notebook shows ----

// tokenBytes is the bytes of each token of merges (nil for a merge of a
// token that does not exist before it).
func tokenBytes(merges [][2]int32) [][]byte {
	toks := make([][]byte, data.VocabSize, data.VocabSize+len(merges))
	for i := range toks {
		toks[i] = []byte{byte(i)}
	}
	for _, m := range merges {
		var t []byte
		if m[0] >= 0 && m[1] >= 0 && int(m[0]) < len(toks) && int(m[1]) < len(toks) && toks[m[0]] != nil && toks[m[1]] != nil {
			t = slices.Concat(toks[m[0]], toks[m[1]])
		}
		toks = append(toks, t)
	}
	return toks
}

// ShowBytes shows text's characters and the UTF-8 bytes of each.
func ShowBytes(lang, text string) {
	var b strings.Builder
	b.WriteString(msg(lang, "%s: %d characters, %d bytes in UTF-8:", quoteText(text), utf8.RuneCountInString(text), len(text)) + "\n")
	for _, r := range text {
		fmt.Fprintf(&b, "  %q  % x\n", r, string(r))
	}
	display(b.String())
}

// ShowMerges shows each token merges learned and the text it stands for,
// and how many of them are whole characters.
func ShowMerges(lang string, merges [][2]int32) {
	if len(merges) == 0 {
		display(msg(lang, "No merges yet: train returned none."))
		return
	}
	toks := tokenBytes(merges)
	var b strings.Builder
	whole := 0
	for i, m := range merges {
		t := toks[data.VocabSize+i]
		if t != nil && utf8.Valid(t) {
			whole++
		}
		fmt.Fprintf(&b, "%d = %d + %d  %q\n", data.VocabSize+i, m[0], m[1], t)
	}
	display(msg(lang, "%d of the %d new tokens are whole characters or more (valid UTF-8); the rest are pieces of a character's bytes.", whole, len(merges)) + "\n" + b.String())
}

// ShowEncoding shows how many tokens a character text takes as bytes and
// as ids (encoded with merges), and text's first line cut into its
// tokens.
func ShowEncoding(lang, text string, ids []int32, merges [][2]int32) {
	if len(ids) == 0 {
		display(msg(lang, "Your encode returned no tokens yet."))
		return
	}
	toks := tokenBytes(merges)
	var all []byte
	var pieces []string
	for _, id := range ids {
		var t []byte
		if id >= 0 && int(id) < len(toks) {
			t = toks[id]
		}
		if !bytes.Contains(all, []byte("\n")) {
			pieces = append(pieces, fmt.Sprintf("%q", t))
		}
		all = append(all, t...)
	}
	chars := float64(utf8.RuneCountInString(text))
	s := msg(lang, "%d characters, %d bytes: the byte tokenizer needs %.2f tokens a character; your BPE with %d merges needs %.2f (%d tokens).",
		int(chars), len(text), float64(len(text))/chars, len(merges), float64(len(ids))/chars, len(ids))
	if string(all) != text {
		s += " " + msg(lang, "Decoded, your tokens are not the text again: check encode.")
	}
	display(s + "\n" + msg(lang, "The first line in tokens:") + "\n" + strings.Join(pieces, " "))
}
