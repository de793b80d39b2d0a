package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/druto/druto/internal/atomicfile"
)

// ErrCorrupt is returned (wrapped) for a checkpoint file that is truncated,
// malformed or fails its checksum.
var ErrCorrupt = errors.New("train: corrupt checkpoint")

// stTensor is one fp32 tensor of a safetensors file.
type stTensor struct {
	Name  string
	Shape []int
	Data  []float32
}

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// checksumKey is the metadata entry holding the SHA-256 of the data section.
const checksumKey = "druto_sha256"

// writeSafetensors writes tensors and metadata to path atomically (a temp
// file in the same folder, fsync, rename). The metadata gains the SHA-256 of
// the data section, which readSafetensors verifies; it is also returned.
func writeSafetensors(path string, tensors []stTensor, meta map[string]string) (string, error) {
	header := map[string]any{}
	var data bytes.Buffer
	for _, t := range tensors {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != len(t.Data) {
			return "", fmt.Errorf("train: tensor %s has %d values for shape %v", t.Name, len(t.Data), t.Shape)
		}
		start := int64(data.Len())
		buf := make([]byte, 4*len(t.Data))
		for i, v := range t.Data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		data.Write(buf)
		header[t.Name] = stEntry{DType: "F32", Shape: t.Shape, Offsets: [2]int64{start, int64(data.Len())}}
	}
	md := map[string]string{}
	for k, v := range meta {
		md[k] = v
	}
	sum := sha256.Sum256(data.Bytes())
	md[checksumKey] = hex.EncodeToString(sum[:])
	header["__metadata__"] = md
	hj, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	for len(hj)%8 != 0 { // align the data section, as the reference writer does
		hj = append(hj, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(hj)))
	out.Write(hj)
	out.Write(data.Bytes())
	return md[checksumKey], writeAtomic(path, out.Bytes())
}

// writeAtomic writes b to path through a temp file and a rename, so a crash
// never leaves a half-written file under path.
func writeAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// parseSafetensors decodes a safetensors file holding F32 tensors and
// verifies druto's checksum when present. Tensors come back sorted by name.
func parseSafetensors(b []byte) ([]stTensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("%w: %d bytes, too short for a safetensors header", ErrCorrupt, len(b))
	}
	hl := binary.LittleEndian.Uint64(b)
	if hl > uint64(len(b)-8) || hl > 100<<20 {
		return nil, nil, fmt.Errorf("%w: header of %d bytes in a file of %d (truncated?)", ErrCorrupt, hl, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hl], &raw); err != nil {
		return nil, nil, fmt.Errorf("%w: header is not JSON: %v", ErrCorrupt, err)
	}
	data := b[8+hl:]
	meta := map[string]string{}
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, nil, fmt.Errorf("%w: metadata: %v", ErrCorrupt, err)
		}
		delete(raw, "__metadata__")
	}
	if want, ok := meta[checksumKey]; ok {
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != want {
			return nil, nil, fmt.Errorf("%w: checksum mismatch (the file was truncated or modified)", ErrCorrupt)
		}
	}
	var out []stTensor
	for name, r := range raw {
		var e stEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, nil, fmt.Errorf("%w: entry %q: %v", ErrCorrupt, name, err)
		}
		size := dtypeSize(e.DType) // hf.go: F32, F16, BF16
		if size == 0 {
			if isBuffer(name) { // attention-mask buffers of transformers' files
				continue
			}
			return nil, nil, fmt.Errorf("train: tensor %q is %s; druto reads F32, F16 and BF16 checkpoints", name, e.DType)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || d > 1<<31 {
				return nil, nil, fmt.Errorf("%w: tensor %q has shape %v", ErrCorrupt, name, e.Shape)
			}
			n *= int64(d)
			if n > int64(len(data)) {
				break
			}
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != size*n {
			return nil, nil, fmt.Errorf("%w: tensor %q data [%d,%d) does not fit %d bytes (truncated?)", ErrCorrupt, name, lo, hi, len(data))
		}
		v := decodeFloats(e.DType, data[lo:hi])
		out = append(out, stTensor{Name: name, Shape: e.Shape, Data: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, meta, nil
}

// readSafetensors reads and parses path.
func readSafetensors(path string) ([]stTensor, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	t, m, err := parseSafetensors(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, m, nil
}
