package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// The llm.c token shard format: a header of shardHeaderInts little-endian
// int32 values (magic, version, token count, the rest zero), then the tokens
// as little-endian uint16 (version 1, GPT-2 vocabulary). Version 2 (uint32
// tokens, for Llama 3) exists in llm.c but is not read here.
const (
	shardMagic      = 20240520
	shardVersion    = 1
	shardHeaderInts = 256
	shardHeaderSize = 4 * shardHeaderInts
)

// ReadShard reads an llm.c token shard (see ParseShard for the format and the
// checks); errors name the file.
func ReadShard(path string) ([]int32, error) {
	b, err := readFile(path)
	var le *loadError
	if errors.As(err, &le) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("data: read shard: %w", err)
	}
	tokens, err := parseShard(b)
	if err != nil {
		return nil, fmt.Errorf("data: shard %s: %v", path, err)
	}
	return tokens, nil
}

// ParseShard decodes an llm.c token shard held in b: a header of 256
// little-endian int32 (magic 20240520, version 1, token count, the rest
// reserved), then count little-endian uint16 tokens. It checks the magic,
// the version and that the file holds exactly count tokens, and says what to
// do when it does not.
func ParseShard(b []byte) ([]int32, error) {
	tokens, err := parseShard(b)
	if err != nil {
		return nil, fmt.Errorf("data: shard: %v", err)
	}
	return tokens, nil
}

// parseShard is ParseShard without the "data: shard" prefix, so that callers
// can name the file in it.
func parseShard(b []byte) ([]int32, error) {
	if len(b) < shardHeaderSize {
		return nil, fmt.Errorf("%d bytes is shorter than the %d-byte header of an llm.c token shard "+
			"(the file is truncated, or it is not a shard: give text files a name not ending in .bin)",
			len(b), shardHeaderSize)
	}
	magic := int32(binary.LittleEndian.Uint32(b[0:]))
	version := int32(binary.LittleEndian.Uint32(b[4:]))
	count := int32(binary.LittleEndian.Uint32(b[8:]))
	if magic != shardMagic {
		return nil, fmt.Errorf("magic number is %d, want %d: this is not an llm.c token shard "+
			"(give text files a name not ending in .bin)", magic, shardMagic)
	}
	if version != shardVersion {
		hint := "re-export it with llm.c's version-1 (uint16, GPT-2) writer"
		if version == 2 {
			hint = "version 2 holds uint32 Llama 3 tokens; re-tokenise the data for GPT-2 (version 1, uint16)"
		}
		return nil, fmt.Errorf("version %d is not supported, druto reads version %d (%s)", version, shardVersion, hint)
	}
	if count < 0 {
		return nil, fmt.Errorf("the header's token count is %d, negative: the header is corrupt, regenerate the shard", count)
	}
	body := len(b) - shardHeaderSize
	want := 2 * int(count)
	switch {
	case body < want:
		return nil, fmt.Errorf("truncated: the header says %d tokens (%d bytes after the header) but the file has only %d "+
			"(%d whole tokens); copy or regenerate the shard", count, want, body, body/2)
	case body > want:
		return nil, fmt.Errorf("%d bytes more than the header's %d tokens need (a wrong count in the header, or files "+
			"joined together); regenerate the shard", body-want, count)
	}
	tokens := make([]int32, count)
	for i := range tokens {
		tokens[i] = int32(binary.LittleEndian.Uint16(b[shardHeaderSize+2*i:]))
	}
	return tokens, nil
}

// encodeShard returns the llm.c version-1 shard bytes of tokens.
func encodeShard(tokens []int32) ([]byte, error) {
	if len(tokens) > math.MaxInt32 {
		return nil, fmt.Errorf("%d tokens do not fit one shard (at most %d); split them over several", len(tokens), math.MaxInt32)
	}
	b := make([]byte, shardHeaderSize+2*len(tokens))
	binary.LittleEndian.PutUint32(b[0:], shardMagic)
	binary.LittleEndian.PutUint32(b[4:], shardVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(tokens)))
	for i, t := range tokens {
		if t < 0 || t > math.MaxUint16 {
			return nil, fmt.Errorf("token %d at position %d does not fit uint16 (0..%d)", t, i, math.MaxUint16)
		}
		binary.LittleEndian.PutUint16(b[shardHeaderSize+2*i:], uint16(t))
	}
	return b, nil
}

// WriteShard writes tokens, each of which must fit uint16, as an llm.c
// version-1 token shard. It writes a temporary file in the same folder and
// renames it over path, so a reader never sees a half-written shard.
func WriteShard(path string, tokens []int32) error {
	b, err := encodeShard(tokens)
	if err != nil {
		return fmt.Errorf("data: write shard %s: %v", path, err)
	}
	if err := writeFileAtomic(path, b); err != nil {
		return fmt.Errorf("data: write shard: %w", err)
	}
	return nil
}

// writeFileAtomic writes b to a temporary file beside path, syncs it and
// renames it to path. On any error the temporary file is removed.
func writeFileAtomic(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
