package data

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shardBytes builds shard bytes by hand (independently of encodeShard), with
// the given header fields and raw uint16 tokens.
func shardBytes(magic, version, count int32, tokens []uint16) []byte {
	b := make([]byte, 1024+2*len(tokens))
	binary.LittleEndian.PutUint32(b[0:], uint32(magic))
	binary.LittleEndian.PutUint32(b[4:], uint32(version))
	binary.LittleEndian.PutUint32(b[8:], uint32(count))
	for i, t := range tokens {
		binary.LittleEndian.PutUint16(b[1024+2*i:], t)
	}
	return b
}

func TestShardRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tokens := range [][]int32{{}, {0}, {1, 2, 3, 65535, 50256, 0, 42}, mustEncode(t, Corpus(2, 10000))} {
		path := filepath.Join(dir, "s.bin")
		if err := WriteShard(path, tokens); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 1024+2*len(tokens) {
			t.Fatalf("shard of %d tokens is %d bytes, want %d", len(tokens), len(b), 1024+2*len(tokens))
		}
		if m, v, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:]); m != 20240520 || v != 1 || int(n) != len(tokens) {
			t.Fatalf("header magic %d version %d count %d, want 20240520 1 %d", m, v, n, len(tokens))
		}
		for i := 3; i < 256; i++ {
			if binary.LittleEndian.Uint32(b[4*i:]) != 0 {
				t.Fatalf("reserved header int %d is not zero", i)
			}
		}
		got, err := ReadShard(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tokens) {
			t.Fatalf("ReadShard after WriteShard: got %d tokens, differ from the %d written", len(got), len(tokens))
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the folder holds %d entries after the writes, want only s.bin (temporary files left?)", len(entries))
	}
}

func TestParseShardHandBuilt(t *testing.T) {
	got, err := ParseShard(shardBytes(20240520, 1, 4, []uint16{7, 65535, 0, 50256}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{7, 65535, 0, 50256}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseShardErrors(t *testing.T) {
	good := shardBytes(20240520, 1, 3, []uint16{1, 2, 3})
	cases := []struct {
		name string
		b    []byte
		want []string // substrings of the message
	}{
		{"empty", nil, []string{"data: shard:", "0 bytes", "1024-byte header"}},
		{"shorter than the header", good[:100], []string{"100 bytes", "shorter than the 1024-byte header"}},
		{"wrong magic", shardBytes(12345, 1, 3, []uint16{1, 2, 3}), []string{"magic number is 12345, want 20240520", "not an llm.c token shard"}},
		{"text file named .bin", append([]byte("Rina has 3 books.\n"), make([]byte, 2000)...), []string{"magic number", "give text files a name not ending in .bin"}},
		{"wrong version", shardBytes(20240520, 3, 3, []uint16{1, 2, 3}), []string{"version 3 is not supported", "druto reads version 1"}},
		{"llama-3 version 2", shardBytes(20240520, 2, 3, []uint16{1, 2, 3}), []string{"version 2", "uint32", "re-tokenise"}},
		{"negative count", shardBytes(20240520, 1, -1, []uint16{1, 2, 3}), []string{"token count is -1", "regenerate"}},
		{"truncated mid-token", good[:len(good)-1], []string{"truncated", "header says 3 tokens (6 bytes", "has only 5 (2 whole tokens)", "copy or regenerate"}},
		{"truncated by whole tokens", good[:len(good)-4], []string{"truncated", "has only 2 (1 whole tokens)"}},
		{"count larger than the file", shardBytes(20240520, 1, 1000000, []uint16{1, 2, 3}), []string{"truncated", "header says 1000000 tokens", "has only 6"}},
		{"extra bytes", append(append([]byte{}, good...), 9, 9, 9), []string{"3 bytes more than the header's 3 tokens need", "regenerate"}},
		{"count smaller than the file", shardBytes(20240520, 1, 1, []uint16{1, 2, 3}), []string{"4 bytes more than the header's 1 tokens need"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tokens, err := ParseShard(c.b)
			if err == nil {
				t.Fatalf("ParseShard = %d tokens, want an error", len(tokens))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "data: shard: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with \"data: shard: \"", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

func TestReadShardNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.bin")
	if err := os.WriteFile(path, shardBytes(1, 1, 0, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadShard(path)
	if err == nil || !strings.Contains(err.Error(), "data: shard "+path+": magic number is 1") {
		t.Fatalf("ReadShard error %v, want it to name %s and the magic number", err, path)
	}
	_, err = ReadShard(filepath.Join(t.TempDir(), "missing.bin"))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadShard of a missing file: %v, want a not-exist error", err)
	}
}

func TestWriteShardRejectsBigTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.bin")
	for _, tokens := range [][]int32{{1, 65536}, {-1}} {
		err := WriteShard(path, tokens)
		if err == nil || !strings.Contains(err.Error(), "does not fit uint16") {
			t.Fatalf("WriteShard(%v) error %v, want \"does not fit uint16\"", tokens, err)
		}
		if _, statErr := os.Stat(path); !os.IsNotExist(statErr) {
			t.Fatalf("WriteShard(%v) failed but left a file: %v", tokens, statErr)
		}
	}
}

func TestWriteShardReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.bin")
	if err := WriteShard(path, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := WriteShard(path, []int32{4, 5}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadShard(path)
	if err != nil || !slices.Equal(got, []int32{4, 5}) {
		t.Fatalf("after overwrite: %v, %v", got, err)
	}
	if err := WriteShard(filepath.Join(dir, "no", "such", "dir.bin"), []int32{1}); err == nil {
		t.Fatal("WriteShard into a missing folder succeeded")
	}
}

func mustEncode(t testing.TB, b []byte) []int32 {
	t.Helper()
	tokens, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}
