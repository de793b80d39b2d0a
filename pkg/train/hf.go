package train

// Checkpoints that Hugging Face transformers wrote (GPT2LMHeadModel's
// save_pretrained, safetensors), the tokenizer a checkpoint records, and
// LoadCheckpoint, which returns both. Kept apart from checkpoint.go: its
// only hooks there are fromTransformers in loadModel and saveModel's extra
// metadata; in safetensors.go, dtypeSize, decodeFloats and isBuffer.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// dtypeSize returns the bytes per element of the safetensors dtypes druto
// reads, 0 for the others.
func dtypeSize(dt string) int64 {
	switch dt {
	case "F32":
		return 4
	case "F16", "BF16":
		return 2
	}
	return 0
}

// decodeFloats converts little-endian F32, F16 or BF16 data to float32. On
// a little-endian machine aligned F32 data are returned as they are, a view
// of b (which the caller then must not change).
func decodeFloats(dt string, b []byte) []float32 {
	n := int64(len(b)) / dtypeSize(dt)
	if n == 0 {
		return []float32{}
	}
	var v []float32
	if dt != "F32" || !nativeLittle || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 != 0 {
		v = make([]float32, n)
	}
	switch dt {
	case "F32":
		if nativeLittle && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
			return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n) // the file's bytes are the values: no copy
		}
		if nativeLittle {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*n), b)
		} else {
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
	case "F16":
		for i := range v {
			v[i] = tensor.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case "BF16":
		for i := range v {
			v[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
	return v
}

// nativeLittle reports a little-endian machine, where an F32 tensor's bytes
// copy as they are.
var nativeLittle = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// isBuffer reports the causal-mask buffers that older transformers versions
// saved with GPT-2's weights (attn.bias, a bool or uint8 triangle, and
// attn.masked_bias); they are not parameters and are skipped.
func isBuffer(name string) bool {
	return strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")
}

// PaddedVocab returns the vocabulary druto gives a model whose tokenizer has
// v tokens: v rounded up to a multiple of 128 (GPT-2's 50257 becomes 50304,
// as in llm.c), so the classifier's matmul has friendly sizes. The extra
// rows of the embedding are zero and no tokenizer id maps to them.
func PaddedVocab(v int) int { return (v + 127) / 128 * 128 }

// gpt2Param matches the tensor names of GPT2LMHeadModel without the
// "transformer." prefix.
var gpt2Param = regexp.MustCompile(`^(wte\.weight|wpe\.weight|ln_f\.(weight|bias)|h\.[0-9]+\.(ln_1|ln_2|attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.(weight|bias))$`)

// hfConfig is the part of transformers' config.json that decides whether
// druto computes the same function.
type hfConfig struct {
	ModelType      string   `json:"model_type"`
	Architectures  []string `json:"architectures"`
	Vocab          *int     `json:"vocab_size"`
	Positions      *int     `json:"n_positions"`
	Layers         *int     `json:"n_layer"`
	Heads          *int     `json:"n_head"`
	Channels       *int     `json:"n_embd"`
	Inner          *int     `json:"n_inner"`
	Activation     *string  `json:"activation_function"`
	LNEps          *float64 `json:"layer_norm_epsilon"`
	ScaleAttn      *bool    `json:"scale_attn_weights"`
	ScaleByLayer   *bool    `json:"scale_attn_by_inverse_layer_idx"`
	CrossAttention *bool    `json:"add_cross_attention"`
	Tied           *bool    `json:"tie_word_embeddings"`
}

// differs returns what in c druto's GPT-2 does not compute, "" when
// nothing.
func (c hfConfig) differs() string {
	var d []string
	if c.ModelType != "" && c.ModelType != "gpt2" {
		d = append(d, fmt.Sprintf("model_type %q (druto runs gpt2)", c.ModelType))
	}
	if c.Activation != nil && *c.Activation != "gelu_new" && *c.Activation != "gelu_pytorch_tanh" {
		d = append(d, fmt.Sprintf("activation_function %q (druto's GELU is the tanh form, gelu_new)", *c.Activation))
	}
	if c.LNEps != nil && math.Abs(*c.LNEps-1e-5) > 1e-12 {
		d = append(d, fmt.Sprintf("layer_norm_epsilon %g (druto: 1e-5)", *c.LNEps))
	}
	if c.Inner != nil && c.Channels != nil && *c.Inner != 4**c.Channels {
		d = append(d, fmt.Sprintf("n_inner %d (druto: 4 x n_embd = %d)", *c.Inner, 4**c.Channels))
	}
	if c.ScaleAttn != nil && !*c.ScaleAttn {
		d = append(d, "scale_attn_weights false")
	}
	if c.ScaleByLayer != nil && *c.ScaleByLayer {
		d = append(d, "scale_attn_by_inverse_layer_idx true")
	}
	if c.CrossAttention != nil && *c.CrossAttention {
		d = append(d, "add_cross_attention true")
	}
	if c.Tied != nil && !*c.Tied {
		d = append(d, "tie_word_embeddings false (druto ties lm_head to wte)")
	}
	return strings.Join(d, ", ")
}

// maxHFConfig bounds the config.json read beside a transformers checkpoint
// (GPT-2's is under 1 KiB).
const maxHFConfig = 1 << 20

// fromTransformers brings a safetensors file that transformers wrote to the
// form druto's own checkpoints have: names with the "transformer." prefix
// (added when missing), no attention-mask buffers, no lm_head (it must be
// the tied copy of wte), the config in the metadata (from config.json
// beside the file when the metadata lacks it) and the vocabulary padded
// with zero rows to PaddedVocab. A druto checkpoint passes unchanged. A
// model that is not GPT-2 gets one error naming what differs.
func fromTransformers(path string, ts []stTensor, meta map[string]string) ([]stTensor, map[string]string, error) {
	if _, ok := meta["n_embd"]; ok && meta[checksumKey] != "" {
		return ts, meta, nil // druto's own
	}
	var cfg hfConfig
	cfgPath := filepath.Join(filepath.Dir(path), "config.json")
	cfgFound := false
	b, err := boundedread.ReadFile(cfgPath, maxHFConfig)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, nil, fmt.Errorf("%s: %v; fix or remove it", cfgPath, err)
		}
		cfgFound = true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("train: %v; fix or remove it", err)
	}
	var out []stTensor
	var lmHead *stTensor
	var foreign []string
	for i := range ts {
		t := ts[i]
		name := strings.TrimPrefix(t.Name, "transformer.")
		switch {
		case isBuffer(name):
			continue
		case name == "lm_head.weight":
			lmHead = &ts[i]
			continue
		case !gpt2Param.MatchString(name):
			foreign = append(foreign, t.Name)
			continue
		}
		t.Name = "transformer." + name
		out = append(out, t)
	}
	if len(foreign) > 0 || cfgFound && cfg.differs() != "" {
		what := cfg.differs()
		if len(foreign) > 0 {
			sort.Strings(foreign)
			if what != "" {
				what += "; "
			}
			what += fmt.Sprintf("%d tensors GPT-2 does not have, e.g. %s", len(foreign), foreign[0])
		}
		arch := ""
		if len(cfg.Architectures) > 0 {
			arch = " (" + strings.Join(cfg.Architectures, ", ") + ")"
		}
		return nil, nil, fmt.Errorf("%s is not a GPT-2 checkpoint druto can run%s: %s", path, arch, what)
	}
	by := map[string]*stTensor{}
	for i := range out {
		by[out[i].Name] = &out[i]
	}
	wte := by["transformer.wte.weight"]
	if wte == nil && lmHead != nil { // the tied pair saved under the head's name
		out = append(out, stTensor{Name: "transformer.wte.weight", Shape: lmHead.Shape, Data: lmHead.Data})
		wte, lmHead = &out[len(out)-1], nil
	}
	if wte == nil || len(wte.Shape) != 2 {
		return nil, nil, fmt.Errorf("%s: %w: no 2-D transformer.wte.weight (is this a GPT-2 model file?)", path, ErrCorrupt)
	}
	if lmHead != nil && !slices.Equal(lmHead.Data, wte.Data) {
		return nil, nil, fmt.Errorf("%s is not a GPT-2 checkpoint druto can run: lm_head.weight differs from wte (an untied output head; druto ties lm_head to wte)", path)
	}
	// The config: metadata first (druto's keys), then config.json.
	m := map[string]string{}
	for k, v := range meta {
		m[k] = v
	}
	for key, p := range map[string]*int{"vocab_size": cfg.Vocab, "n_positions": cfg.Positions,
		"n_layer": cfg.Layers, "n_head": cfg.Heads, "n_embd": cfg.Channels} {
		if _, ok := m[key]; !ok && p != nil {
			m[key] = strconv.Itoa(*p)
		}
	}
	for _, key := range []string{"n_positions", "n_layer", "n_head", "n_embd"} {
		if _, ok := m[key]; !ok {
			return nil, nil, fmt.Errorf("%s holds no model config (%s missing): put transformers' config.json beside it", path, key)
		}
	}
	V, C := wte.Shape[0], wte.Shape[1]
	if v, ok := m["vocab_size"]; ok && v != strconv.Itoa(V) {
		return nil, nil, fmt.Errorf("%s: %w: vocab_size %s but wte has %d rows", path, ErrCorrupt, v, V)
	}
	Vp := PaddedVocab(V)
	if Vp != V {
		pad := make([]float32, Vp*C)
		copy(pad, wte.Data)
		wte.Data, wte.Shape = pad, []int{Vp, C}
	}
	m["vocab_size"] = strconv.Itoa(Vp)
	return out, m, nil
}

// Metadata keys of the tokenizer a checkpoint was trained with.
const (
	tokenizerKey = "druto_tokenizer"     // "bytes", "gpt2" or "bpe"
	bpeKey       = "druto_tokenizer_bpe" // the BPE file, for "bpe"
)

// tokenizerMeta returns the metadata that records tok (nil: nothing).
func tokenizerMeta(tok data.Tokenizer) map[string]string {
	if tok == nil {
		return nil
	}
	m := map[string]string{tokenizerKey: tok.Name()}
	if b, ok := tok.(*data.BPE); ok {
		t, _ := b.MarshalText()
		m[bpeKey] = string(t)
	}
	return m
}

// Checkpoint is a model file's contents: what sample, eval and fine-tuning
// need.
type Checkpoint struct {
	Config    gpt.Config
	Params    []float32      // in Config's layout order
	Tokenizer data.Tokenizer // recorded in the file, or implied by it; nil when unknown
	From      string         // "druto" or "transformers"
}

// LoadCheckpoint reads a model file that druto or transformers wrote (see
// LoadModel) and the tokenizer it records. A file that records none
// implies bytes for a vocabulary of 256 and GPT-2's for a transformers file
// or a vocabulary of 50257 padded; otherwise Tokenizer is nil.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	cfg, params, err := LoadModel(path)
	if err != nil {
		return nil, err
	}
	meta, err := readMeta(path)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Config: cfg, Params: params, From: "druto"}
	if meta[checksumKey] == "" || meta["n_embd"] == "" {
		ck.From = "transformers"
	}
	switch name := meta[tokenizerKey]; name {
	case "":
		switch {
		case cfg.Vocab == data.VocabSize:
			ck.Tokenizer = data.Bytes{}
		case ck.From == "transformers" || cfg.Vocab == PaddedVocab(data.GPT2Vocab):
			if ck.From == "transformers" {
				if err := checkHFTokenizer(path); err != nil {
					return nil, err
				}
			}
			if ck.Tokenizer, err = data.GPT2(); err != nil {
				return nil, err
			}
		}
	case "bpe":
		b, err := data.ParseBPE([]byte(meta[bpeKey]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: recorded tokenizer: %v", path, ErrCorrupt, err)
		}
		ck.Tokenizer = b
	default:
		if ck.Tokenizer, err = data.ParseTokenizer(name); err != nil {
			return nil, fmt.Errorf("%s: %w: recorded tokenizer %q: %v", path, ErrCorrupt, name, err)
		}
	}
	if ck.Tokenizer != nil && ck.Tokenizer.Vocab() > cfg.Vocab {
		return nil, fmt.Errorf("%s: %w: its %s tokenizer has %d tokens, the model %d", path, ErrCorrupt, ck.Tokenizer.Name(), ck.Tokenizer.Vocab(), cfg.Vocab)
	}
	return ck, nil
}

// readMeta reads only the metadata of a safetensors file.
func readMeta(path string) (map[string]string, error) {
	f, _, err := boundedread.Open(path, 4*maxParams+maxHeader+8)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil || n > maxHeader {
		return nil, fmt.Errorf("%s: %w: bad header", path, ErrCorrupt)
	}
	h := make([]byte, n)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	var raw struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(h, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w: header: %v", path, ErrCorrupt, err)
	}
	if raw.Meta == nil {
		raw.Meta = map[string]string{}
	}
	return raw.Meta, nil
}

// ReadModelConfig returns the configuration of a model file (druto's, or
// a GPT-2 that transformers wrote, with config.json beside it) from its
// header alone, without reading the weights: what a dry run needs of a
// 6 GB gpt2-xl. The header's tensors must have the shapes the
// configuration asks for and lie inside the file.
func ReadModelConfig(path string) (gpt.Config, error) {
	f, size, err := boundedread.Open(path, 4*maxParams+maxHeader+8)
	if err != nil {
		return gpt.Config{}, fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil || n > maxHeader || int64(n) > size-8 {
		return gpt.Config{}, fmt.Errorf("%s: %w: bad header (truncated?)", path, ErrCorrupt)
	}
	h := make([]byte, n)
	if _, err := io.ReadFull(f, h); err != nil {
		return gpt.Config{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(h, &raw); err != nil {
		return gpt.Config{}, fmt.Errorf("%s: %w: header is not JSON: %v", path, ErrCorrupt, err)
	}
	meta := map[string]string{}
	if m, ok := raw["__metadata__"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return gpt.Config{}, fmt.Errorf("%s: %w: metadata: %v", path, ErrCorrupt, err)
		}
		delete(raw, "__metadata__")
	}
	shapes := map[string][]int{}
	for name, r := range raw {
		var e stEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return gpt.Config{}, fmt.Errorf("%s: %w: entry %q: %v", path, ErrCorrupt, name, err)
		}
		if e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > size-8-int64(n) {
			return gpt.Config{}, fmt.Errorf("%s: %w: tensor %q lies outside the file (truncated?)", path, ErrCorrupt, name)
		}
		if isBuffer(name) {
			continue
		}
		if dtypeSize(e.DType) == 0 {
			return gpt.Config{}, fmt.Errorf("train: tensor %q is %s; druto reads F32, F16 and BF16 checkpoints", name, e.DType)
		}
		key := strings.TrimPrefix(name, "transformer.")
		if key == "lm_head.weight" {
			if _, ok := raw["wte.weight"]; !ok {
				if _, ok := raw["transformer.wte.weight"]; !ok {
					key = "wte.weight"
				}
			}
		}
		shapes["transformer."+key] = e.Shape
	}
	if _, druto := meta["n_embd"]; !druto || meta[checksumKey] == "" {
		var cfg hfConfig
		cfgPath := filepath.Join(filepath.Dir(path), "config.json")
		if b, err := boundedread.ReadFile(cfgPath, maxHFConfig); err == nil {
			if err := json.Unmarshal(b, &cfg); err != nil {
				return gpt.Config{}, fmt.Errorf("%s: %v; fix or remove it", cfgPath, err)
			}
			if d := cfg.differs(); d != "" {
				return gpt.Config{}, fmt.Errorf("%s is not a GPT-2 checkpoint druto can run: %s", path, d)
			}
		}
		for key, p := range map[string]*int{"n_positions": cfg.Positions, "n_layer": cfg.Layers, "n_head": cfg.Heads, "n_embd": cfg.Channels} {
			if _, ok := meta[key]; !ok && p != nil {
				meta[key] = strconv.Itoa(*p)
			}
		}
		wte := shapes["transformer.wte.weight"]
		if len(wte) != 2 {
			return gpt.Config{}, fmt.Errorf("%s: %w: no 2-D transformer.wte.weight (is this a GPT-2 model file?)", path, ErrCorrupt)
		}
		meta["vocab_size"] = strconv.Itoa(PaddedVocab(wte[0]))
		shapes["transformer.wte.weight"] = []int{PaddedVocab(wte[0]), wte[1]}
	}
	cfg, err := configFromMeta(meta)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w: %v (put transformers' config.json beside it)", path, ErrCorrupt, err)
	}
	for _, s := range cfg.Layout().Segments {
		name, conv := hfName(s.Name)
		want := append([]int(nil), s.Shape...)
		if conv {
			want[0], want[1] = want[1], want[0]
		}
		got, ok := shapes[name]
		if !ok {
			return cfg, fmt.Errorf("%s: %w: tensor %s missing", path, ErrCorrupt, name)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return cfg, fmt.Errorf("%s: %w: tensor %s has shape %v, the config needs %v", path, ErrCorrupt, name, got, want)
		}
	}
	return cfg, nil
}

// checkHFTokenizer checks that the tokenizer files beside a transformers
// checkpoint (vocab.json, else tokenizer.json), when there, are GPT-2's,
// the tokenizer druto gives such a checkpoint.
func checkHFTokenizer(path string) error {
	for _, name := range []string{"vocab.json", "tokenizer.json"} {
		p := filepath.Join(filepath.Dir(path), name)
		b, err := boundedread.ReadFile(p, 64<<20)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("train: %v", err)
		}
		if err := data.CheckGPT2Vocab(b); err != nil {
			return fmt.Errorf("%s: %v; druto runs GPT-2's BPE, so this model's text cannot be tokenised as it was trained", p, err)
		}
		return nil
	}
	return nil
}
