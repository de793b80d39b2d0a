package data

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/druto/druto/internal/boundedread"
)

// loadError is a one-line message for the user that still unwraps to the
// underlying cause (fs.ErrNotExist, ErrInvalidUTF8, ...) for errors.Is.
type loadError struct {
	msg string
	err error
}

func (e *loadError) Error() string { return e.msg }
func (e *loadError) Unwrap() error { return e.err }

// Load reads a training file: a name ending in .bin is read as an llm.c token
// shard (ReadShard), anything else as UTF-8 text, one token per byte
// (Encode). A missing file, an empty one, a folder or text that is not UTF-8
// each give a one-line error that names the file and says what to do.
func Load(path string) ([]int32, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &loadError{fmt.Sprintf("data: training file %s does not exist "+
			"(check the path, or train on the built-in corpus)", path), err}
	case err != nil:
		return nil, &loadError{fmt.Sprintf("data: cannot open training file %s: %v", path, unwrapPath(err)), err}
	case info.IsDir():
		return nil, fmt.Errorf("data: %s is a folder; give a text file (UTF-8) or an llm.c token shard (.bin)", path)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("data: %s is not a regular file (a device, FIFO or socket); give a text file (UTF-8) or an llm.c token shard (.bin)", path)
	case info.Size() > MaxFileBytes:
		return nil, fmt.Errorf("data: %s holds %d bytes, more than the %d druto reads from one file; split it into llm.c token shards (.bin)", path, info.Size(), int64(MaxFileBytes))
	}
	if strings.EqualFold(filepath.Ext(path), ".bin") {
		tokens, err := ReadShard(path)
		if err != nil {
			return nil, err
		}
		if len(tokens) == 0 {
			return nil, fmt.Errorf("data: token shard %s holds no tokens; give a shard with data in it", path)
		}
		return tokens, nil
	}
	text, err := readFile(path)
	if err != nil {
		return nil, &loadError{fmt.Sprintf("data: cannot read training file %s: %v", path, unwrapPath(err)), err}
	}
	if len(text) == 0 {
		return nil, fmt.Errorf("data: training file %s is empty; put some UTF-8 text in it", path)
	}
	if off := firstInvalid(text); off >= 0 {
		return nil, &utf8Error{path: path, offset: off}
	}
	return Encode(text)
}

// MaxFileBytes is the largest data file Load reads (2 GiB: 8 GiB of tokens).
const MaxFileBytes = 2 << 30

// readFile reads a regular file of at most MaxFileBytes, its size checked
// from stat before reading; it refuses devices and FIFOs without blocking.
func readFile(path string) ([]byte, error) {
	b, err := boundedread.ReadFile(path, MaxFileBytes)
	if errors.Is(err, boundedread.ErrNotRegular) || errors.Is(err, boundedread.ErrTooLarge) {
		return nil, &loadError{fmt.Sprintf("data: %v", err), err}
	}
	return b, err
}

// unwrapPath drops the *fs.PathError wrapper, whose message repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Split returns the first (1-frac) of tokens for training and the last frac
// for validation; frac is clamped to [0, 1] and the validation part is
// rounded to the nearest whole token. Both results share tokens' memory but have no
// spare capacity, so appending to one never overwrites the other.
func Split(tokens []int32, frac float64) (train, val []int32) {
	if math.IsNaN(frac) || frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	nval := int(math.Round(float64(len(tokens)) * frac))
	cut := len(tokens) - nval
	return tokens[:cut:cut], tokens[cut:len(tokens):len(tokens)]
}
