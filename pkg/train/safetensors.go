package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/pkg/tensor"
)

// ErrCorrupt is returned (wrapped) for a checkpoint file that is truncated,
// malformed or fails its checksum.
var ErrCorrupt = errors.New("train: corrupt checkpoint")

// stTensor is one fp32 tensor of a safetensors file.
type stTensor struct {
	Name  string
	Shape []int
	Data  []float32
	DType tensor.DType // stored as this (writeSafetensorsAs); 0: the file's dtype
}

type stEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// checksumKey is the metadata entry holding the SHA-256 of the data section.
const checksumKey = "druto_sha256"

// metaSumKey is the metadata entry holding the SHA-256 of the rest of the
// metadata (metaSum): the config, the tokenizer and the training state are
// as covered as the tensors. Files written before it have none, and their
// metadata is checked by its readers alone.
const metaSumKey = "druto_meta_sha256"

// metaSum returns the SHA-256 of meta without metaSumKey, as JSON with its
// keys sorted (encoding/json's order for a map), in hex.
func metaSum(meta map[string]string) string {
	rest := make(map[string]string, len(meta))
	for k, v := range meta {
		if k != metaSumKey {
			rest[k] = v
		}
	}
	b, _ := json.Marshal(rest)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// writeSafetensors writes tensors and metadata to path atomically (a temp
// file in the same folder, fsync, rename). The metadata gains the SHA-256 of
// the data section, which readSafetensors verifies; it is also returned.
func writeSafetensors(path string, tensors []stTensor, meta map[string]string) (string, error) {
	return writeSafetensorsAs(path, tensors, meta, tensor.F32)
}

// writeSafetensorsAs is writeSafetensors storing the values as fileDT
// (F32, BF16 or F16, rounded to nearest even), or as a tensor's own DType
// where it has one.
func writeSafetensorsAs(path string, tensors []stTensor, meta map[string]string, fileDT tensor.DType) (string, error) {
	header := map[string]any{}
	var data bytes.Buffer
	for _, t := range tensors {
		dt := fileDT
		if t.DType != 0 {
			dt = t.DType
		}
		name, ok := map[tensor.DType]string{tensor.F32: "F32", tensor.BF16: "BF16", tensor.F16: "F16"}[dt]
		if !ok {
			return "", fmt.Errorf("train: checkpoints are saved as f32, bf16 or f16, not %s", dt)
		}
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != len(t.Data) {
			return "", fmt.Errorf("train: tensor %s has %d values for shape %v", t.Name, len(t.Data), t.Shape)
		}
		start := int64(data.Len())
		buf := make([]byte, dt.Size()*len(t.Data))
		for i, v := range t.Data {
			switch dt {
			case tensor.BF16:
				binary.LittleEndian.PutUint16(buf[2*i:], tensor.BF16FromF32(v))
			case tensor.F16:
				binary.LittleEndian.PutUint16(buf[2*i:], tensor.F16FromF32(v))
			default:
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
			}
		}
		data.Write(buf)
		header[t.Name] = stEntry{DType: name, Shape: t.Shape, Offsets: [2]int64{start, int64(data.Len())}}
	}
	md := map[string]string{}
	for k, v := range meta {
		md[k] = v
	}
	sum := sha256.Sum256(data.Bytes())
	md[checksumKey] = hex.EncodeToString(sum[:])
	md[metaSumKey] = metaSum(md)
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

// wrapWriter, when set (by tests), wraps the writer of every file written
// by writeAtomic: the seam that simulates a full disk.
var wrapWriter func(io.Writer) io.Writer

// writeAtomic writes b to path atomically (see atomicfile), through
// wrapWriter when set.
func writeAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFileVia(path, b, wrapWriter); err != nil {
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
	if hl > uint64(len(b)-8) || hl > maxHeader {
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
	if want, ok := meta[metaSumKey]; ok && metaSum(meta) != want {
		return nil, nil, fmt.Errorf("%w: its metadata (config, tokenizer, training state) does not match its checksum: edited or damaged", ErrCorrupt)
	}
	// The checksum is computed beside the checks and the decoding below
	// (a checkpoint's load is otherwise one core's work), and waited for
	// before anything is returned.
	sumOK := make(chan bool, 1)
	if want, ok := meta[checksumKey]; ok {
		go func() {
			sum := sha256.Sum256(data)
			sumOK <- hex.EncodeToString(sum[:]) == want
		}()
	} else {
		sumOK <- true
	}
	checked := false
	defer func() {
		if !checked {
			<-sumOK // no goroutine outlives the call
		}
	}()
	// Check every entry before allocating anything: each tensor's data lie
	// inside the data section and no two tensors share bytes, so the
	// decoded tensors never take more than twice the file's memory (F32 as
	// it is, F16 and BF16 widened to F32).
	type span struct {
		name   string
		dtype  string
		shape  []int
		lo, hi int64
	}
	spans := make([]span, 0, len(raw))
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
		}
		for _, d := range e.Shape { // saturating at more elements than bytes, which cannot fit
			switch {
			case d == 0:
				n = 0
			case n > int64(len(data))/int64(d):
				n = int64(len(data)) + 1
			default:
				n *= int64(d)
			}
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != size*n {
			return nil, nil, fmt.Errorf("%w: tensor %q data [%d,%d) does not fit %d bytes (truncated?)", ErrCorrupt, name, lo, hi, len(data))
		}
		spans = append(spans, span{name, e.DType, e.Shape, lo, hi})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].lo != spans[j].lo {
			return spans[i].lo < spans[j].lo
		}
		return spans[i].hi < spans[j].hi
	})
	for i := 1; i < len(spans); i++ {
		if p, c := spans[i-1], spans[i]; c.lo < p.hi {
			return nil, nil, fmt.Errorf("%w: tensors %q and %q share data bytes", ErrCorrupt, p.name, c.name)
		}
	}
	out := make([]stTensor, 0, len(spans))
	for _, sp := range spans {
		out = append(out, stTensor{Name: sp.name, Shape: sp.shape, Data: decodeFloats(sp.dtype, data[sp.lo:sp.hi])})
	}
	checked = true
	if !<-sumOK {
		return nil, nil, fmt.Errorf("%w: checksum mismatch (the file was truncated or modified)", ErrCorrupt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, meta, nil
}

// maxHeader is the largest safetensors header read (the reference
// implementation's limit).
const maxHeader = 100 << 20

// readSafetensors reads and parses path, a regular file of at most
// maxData+maxHeader+8 bytes (the size is checked before reading).
func readSafetensors(path string, maxData int64) ([]stTensor, map[string]string, error) {
	b, err := boundedread.ReadFile(path, maxData+maxHeader+8)
	if errors.Is(err, boundedread.ErrNotRegular) {
		return nil, nil, fmt.Errorf("train: checkpoint %v; give a .safetensors file", err)
	}
	if errors.Is(err, boundedread.ErrTooLarge) {
		return nil, nil, fmt.Errorf("train: checkpoint %v (larger than any checkpoint druto loads)", err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("train: %w", err)
	}
	t, m, err := parseSafetensors(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, m, nil
}
