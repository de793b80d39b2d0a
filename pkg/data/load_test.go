package data

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.txt")
	text := "Rina has 3 books.\nরিনার ৩টি বই আছে।\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustEncode(t, []byte(text)); !slices.Equal(got, want) {
		t.Fatalf("Load = %v, want %v", got, want)
	}
}

func TestLoadShard(t *testing.T) {
	dir := t.TempDir()
	tokens := []int32{50256, 1, 2, 3, 65535}
	for _, name := range []string{"train.bin", "TRAIN.BIN"} {
		path := filepath.Join(dir, name)
		if err := WriteShard(path, tokens); err != nil {
			t.Fatal(err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tokens) {
			t.Fatalf("Load(%s) = %v, want %v", name, got, tokens)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing.txt")
	empty := write("empty.txt", nil)
	latin1 := write("latin1.txt", []byte("caf\xe9 au lait\n"))
	badShard := write("text.bin", []byte(strings.Repeat("not a shard\n", 100)))
	emptyShard := filepath.Join(dir, "empty.bin")
	if err := WriteShard(emptyShard, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		is   error
		want []string
	}{
		{missing, fs.ErrNotExist, []string{"data: training file " + missing + " does not exist", "check the path"}},
		{empty, nil, []string{"data: training file " + empty + " is empty", "UTF-8 text"}},
		{latin1, ErrInvalidUTF8, []string{"data: invalid UTF-8 in " + latin1 + " at byte 3 (save the file as UTF-8)"}},
		{dir, nil, []string{"data: " + dir + " is a folder", "text file"}},
		{badShard, nil, []string{"data: shard " + badShard + ":", "magic number", "not ending in .bin"}},
		{emptyShard, nil, []string{"data: token shard " + emptyShard + " holds no tokens"}},
	}
	for _, c := range cases {
		tokens, err := Load(c.path)
		if err == nil {
			t.Errorf("Load(%s) = %d tokens, want an error", c.path, len(tokens))
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || strings.Count(msg, "data:") != 1 {
			t.Errorf("Load(%s): %q is not one line with one \"data:\" prefix", c.path, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Load(%s): %q does not say %q", c.path, msg, w)
			}
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("Load(%s): %v does not wrap %v", c.path, err, c.is)
		}
	}
}

func TestSplit(t *testing.T) {
	tokens := make([]int32, 100)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	cases := []struct {
		frac   float64
		nTrain int
	}{{0.1, 90}, {0.29, 71}, {0, 100}, {1, 0}, {0.5, 50}, {-1, 100}, {2, 0}}
	for _, c := range cases {
		train, val := Split(tokens, c.frac)
		if len(train) != c.nTrain || len(train)+len(val) != len(tokens) {
			t.Fatalf("Split(100, %g) = %d + %d tokens, want %d + %d", c.frac, len(train), len(val), c.nTrain, 100-c.nTrain)
		}
		if !slices.Equal(slices.Concat(train, val), tokens) {
			t.Fatalf("Split(100, %g): train then val is not the input", c.frac)
		}
	}
	train, val := Split(tokens, 0.1)
	_ = append(train, -1) // must not overwrite val[0]
	if val[0] != 90 {
		t.Fatalf("appending to train overwrote val: val[0] = %d", val[0])
	}
	if tr, v := Split(nil, 0.1); len(tr) != 0 || len(v) != 0 {
		t.Fatalf("Split(nil) = %v, %v", tr, v)
	}
}
