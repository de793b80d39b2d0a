package data

import "testing"

// BenchmarkCorpus measures generation speed; MB/s is bytes of corpus a second.
func BenchmarkCorpus(b *testing.B) {
	const n = 1 << 20
	b.SetBytes(n)
	for b.Loop() {
		if c := Corpus(uint64(b.N), n); len(c) < n*19/20 {
			b.Fatalf("short corpus: %d bytes", len(c))
		}
	}
}

// BenchmarkEncode measures the tokenizer on the corpus.
func BenchmarkEncode(b *testing.B) {
	text := Corpus(1, 1<<20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := Encode(text); err != nil {
			b.Fatal(err)
		}
	}
}
