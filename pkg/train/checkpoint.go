package train

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// Checkpoint files inside a run's output folder.
const (
	ModelFile = "model.safetensors" // weights, Hugging Face GPT-2 names, config in metadata
	StateFile = "state.safetensors" // optimizer moments, step, scaler, RNG, data position
)

// hfName maps a druto segment name to its Hugging Face GPT-2 tensor name and
// reports whether the tensor is stored transposed (Conv1D keeps (in, out)
// where druto, like nn.Linear, keeps (out, in)).
func hfName(name string) (string, bool) {
	switch name {
	case "wte", "wpe":
		return "transformer." + name + ".weight", false
	}
	conv1d := strings.HasSuffix(name, ".weight") && (strings.Contains(name, "attn.c_") || strings.Contains(name, "mlp.c_"))
	return "transformer." + name, conv1d
}

func transpose(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	transposeInto(out, v, rows, cols)
	return out
}

// transposeInto writes the (cols, rows) transpose of v (rows, cols) into
// out, in tiles that stay in cache.
func transposeInto(out, v []float32, rows, cols int) {
	const tile = 32
	for r0 := 0; r0 < rows; r0 += tile {
		for c0 := 0; c0 < cols; c0 += tile {
			for r := r0; r < min(r0+tile, rows); r++ {
				row := v[r*cols : (r+1)*cols]
				for c := c0; c < min(c0+tile, cols); c++ {
					out[c*rows+r] = row[c]
				}
			}
		}
	}
}

// configMeta is the model configuration as Hugging Face GPT2Config keys.
func configMeta(c gpt.Config) map[string]string {
	return map[string]string{
		"format":      "pt",
		"vocab_size":  strconv.Itoa(c.Vocab),
		"n_positions": strconv.Itoa(c.MaxSeq),
		"n_layer":     strconv.Itoa(c.Layers),
		"n_head":      strconv.Itoa(c.Heads),
		"n_embd":      strconv.Itoa(c.Channels),
	}
}

// SaveModel writes fp32 parameters (in cfg's layout order) as a safetensors
// file that transformers.GPT2LMHeadModel loads (lm_head tied to wte). It
// returns the SHA-256 of the data section stored in the file's metadata.
func SaveModel(path string, cfg gpt.Config, params []float32) (string, error) {
	return saveModel(path, cfg, params, nil)
}

// saveModel is SaveModel with extra metadata (the tokenizer).
func saveModel(path string, cfg gpt.Config, params []float32, extra map[string]string) (string, error) {
	return saveModelAs(path, cfg, params, extra, tensor.F32)
}

// SaveModelAs is SaveModel storing the weights as dt: F32, or BF16 or F16
// for a file half the size (the weights rounded to nearest even).
func SaveModelAs(path string, cfg gpt.Config, params []float32, dt tensor.DType) (string, error) {
	return saveModelAs(path, cfg, params, nil, dt)
}

// saveModelAs is saveModel storing the weights as dt.
func saveModelAs(path string, cfg gpt.Config, params []float32, extra map[string]string, dt tensor.DType) (string, error) {
	l := cfg.Layout()
	if len(params) != l.Total {
		return "", fmt.Errorf("train: %d parameters for a model of %d", len(params), l.Total)
	}
	ts := make([]stTensor, 0, len(l.Segments))
	for _, s := range l.Segments {
		v := params[s.Offset : s.Offset+s.Numel()]
		name, conv := hfName(s.Name)
		shape := append([]int(nil), s.Shape...)
		if conv {
			v = transpose(v, s.Shape[0], s.Shape[1])
			shape[0], shape[1] = s.Shape[1], s.Shape[0]
		}
		ts = append(ts, stTensor{Name: name, Shape: shape, Data: v})
	}
	meta := configMeta(cfg)
	for k, v := range extra {
		meta[k] = v
	}
	return writeSafetensorsAs(path, ts, meta, dt)
}

// LoadModel reads a checkpoint written by SaveModel (or any GPT-2
// safetensors file with the same names and F32 data) and returns its config
// and parameters in druto's layout order.
func LoadModel(path string) (gpt.Config, []float32, error) {
	cfg, params, _, err := loadModel(path)
	return cfg, params, err
}

// maxParams is the largest model LoadModel accepts (2^31 parameters, 8 GiB
// of fp32 weights).
const maxParams = 2 << 30

// loadModel is LoadModel that also returns the file's data checksum.
func loadModel(path string) (gpt.Config, []float32, string, error) {
	ts, meta, err := readSafetensors(path, 4*maxParams)
	if err == nil { // a file transformers wrote: to druto's names, config and vocabulary (hf.go)
		ts, meta, err = fromTransformers(path, ts, meta)
	}
	if err != nil {
		return gpt.Config{}, nil, "", err
	}
	cfg, params, err := modelFromTensors(ts, meta)
	if err != nil {
		return cfg, nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return cfg, params, meta[checksumKey], nil
}

// modelFromTensors checks a parsed model file (config and tensors together)
// and returns its config and parameters in druto's layout order.
func modelFromTensors(ts []stTensor, meta map[string]string) (gpt.Config, []float32, error) {
	cfg, err := configFromMeta(meta)
	if err != nil {
		return cfg, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// The model needs 12 tensors a layer plus 4: a config naming more
	// layers than the file has tensors (beyond one, whose missing tensors
	// are named below) is refused before its layout (which has a segment
	// per tensor) is built.
	if cfg.Layers > (len(ts)-4)/12+1 {
		return cfg, nil, fmt.Errorf("%w: config %v needs %d layers of tensors, the file holds %d tensors", ErrCorrupt, cfg, cfg.Layers, len(ts))
	}
	by := make(map[string]stTensor, len(ts))
	for _, t := range ts {
		by[t.Name] = t
	}
	// Every tensor is present with its shape before anything is allocated,
	// so the parameters take no more memory than the file's data; and the
	// file holds no tensor the config does not have (one more layer, a
	// foreign name): druto's files and transformers' are held alike.
	l := cfg.Layout()
	expected := make(map[string]bool, len(l.Segments))
	var missing, extra []string
	for _, s := range l.Segments {
		name, _ := hfName(s.Name)
		expected[name] = true
		if _, ok := by[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range by {
		if !expected[name] {
			extra = append(extra, name)
		}
	}
	switch {
	case len(missing) > 0:
		return cfg, nil, fmt.Errorf("%w: config %v needs %s, missing from the file", ErrCorrupt, cfg, someNames(missing))
	case len(extra) > 0:
		return cfg, nil, fmt.Errorf("%w: the file holds %s, which config %v does not have", ErrCorrupt, someNames(extra), cfg)
	}
	for _, s := range l.Segments {
		name, conv := hfName(s.Name)
		t := by[name]
		want := append([]int(nil), s.Shape...)
		if conv {
			want[0], want[1] = s.Shape[1], s.Shape[0]
		}
		if fmt.Sprint(t.Shape) != fmt.Sprint(want) {
			return cfg, nil, fmt.Errorf("%w: tensor %s has shape %v, the config needs %v", ErrCorrupt, name, t.Shape, want)
		}
		if i := nonFinite(t.Data); i >= 0 {
			return cfg, nil, fmt.Errorf("tensor %s holds %v at element %d: the weights are not finite, so the model cannot be used (saved from a diverged run?)", name, t.Data[i], i)
		}
	}
	params := make([]float32, l.Total)
	var wg sync.WaitGroup
	for _, s := range l.Segments { // the large ones in parallel
		name, conv := hfName(s.Name)
		v, dst := by[name].Data, params[s.Offset:s.Offset+s.Numel()]
		put := func() {
			if conv {
				transposeInto(dst, v, s.Shape[1], s.Shape[0])
			} else {
				copy(dst, v)
			}
		}
		if len(v) < 1<<16 {
			put()
		} else {
			wg.Go(put)
		}
	}
	wg.Wait()
	return cfg, params, nil
}

// someNames names tensors in a message: sorted, the first three, and how
// many more.
func someNames(names []string) string {
	names = slices.Sorted(slices.Values(names))
	if len(names) == 1 {
		return "tensor " + names[0]
	}
	s := fmt.Sprintf("%d tensors: %s", len(names), strings.Join(names[:min(3, len(names))], ", "))
	if len(names) > 3 {
		s += fmt.Sprintf(" and %d more", len(names)-3)
	}
	return s
}

// nonFinite returns the index of the first NaN or infinite value of v, or -1.
func nonFinite(v []float32) int {
	for i, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// configFromMeta reads the model configuration from a checkpoint's
// metadata and checks it, with arithmetic that cannot overflow, before
// anything is sized from it.
func configFromMeta(meta map[string]string) (gpt.Config, error) {
	var cfg gpt.Config
	for _, f := range []struct {
		key string
		dst *int
	}{{"vocab_size", &cfg.Vocab}, {"n_positions", &cfg.MaxSeq}, {"n_layer", &cfg.Layers}, {"n_head", &cfg.Heads}, {"n_embd", &cfg.Channels}} {
		v, err := strconv.ParseInt(meta[f.key], 10, 32)
		if err != nil {
			return cfg, fmt.Errorf("metadata %q missing or not a number below 2^31", f.key)
		}
		*f.dst = int(v)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	// Each size is below 2^31, so this float64 count is exact enough to
	// compare and never overflows.
	V, T, L, C := float64(cfg.Vocab), float64(cfg.MaxSeq), float64(cfg.Layers), float64(cfg.Channels)
	if n := (V+T)*C + L*(12*C*C+13*C) + 2*C; n > maxParams {
		return cfg, fmt.Errorf("config %v has %.3g parameters, more than the %d druto loads", cfg, n, maxParams)
	}
	return cfg, nil
}

// state is everything besides the weights that an exact resume needs.
type state struct {
	Step      int     `json:"step"`              // training steps done
	OptSteps  int     `json:"opt_steps"`         // AdamW steps taken (skipped steps excluded)
	Scale     float32 `json:"scale"`             // GradScaler
	GoodSteps int     `json:"good_steps"`        //
	Skipped   int     `json:"skipped"`           //
	RNG       uint64  `json:"rng"`               // sampling RNG state
	DataPos   int     `json:"data_pos"`          // next training batch's token offset
	ModelSum  string  `json:"model_sha256"`      // checksum of the matching model file
	Options   string  `json:"options"`           // the run's options, to refuse a mismatched resume
	Data      string  `json:"data"`              // fingerprint of the training tokens, to refuse other data on resume
	Moments   string  `json:"moments,omitempty"` // "bf16" for bf16 AdamW moments, stored as BF16; empty: fp32
	// FP8 is the fp8 policy's scaling state: its tensor count, history and
	// margin; the values are the tensors fp8.st and fp8.meta (F32).
	FP8 *fp8Dims `json:"fp8,omitempty"`
}

// fp8Dims are the sizes of an amp.FP8Scales.
type fp8Dims struct {
	K      int `json:"k"`
	H      int `json:"history"`
	Margin int `json:"margin"`
}

// fp8Tensors returns the state file's tensors of s: St as is, Meta as
// float32 (small integers, exact).
func fp8Tensors(s *amp.FP8Scales) []stTensor {
	meta := make([]float32, len(s.Meta))
	for i, v := range s.Meta {
		meta[i] = float32(v)
	}
	return []stTensor{
		{Name: "fp8.st", Shape: []int{len(s.St)}, Data: s.St, DType: tensor.F32},
		{Name: "fp8.meta", Shape: []int{len(meta)}, Data: meta, DType: tensor.F32},
	}
}

// saveState writes the state file: the moments in their dtype (st.Moments
// "bf16": BF16, whose values m and v hold exactly; else F32), and under
// fp8 the scaling state (fp8 not nil; F32).
func saveState(path string, st state, m, v []float32, fp8 *amp.FP8Scales) error {
	ts := []stTensor{
		{Name: "adamw.m", Shape: []int{len(m)}, Data: m},
		{Name: "adamw.v", Shape: []int{len(v)}, Data: v},
	}
	if fp8 != nil {
		st.FP8 = &fp8Dims{K: fp8.K, H: fp8.H, Margin: fp8.Margin}
		ts = append(ts, fp8Tensors(fp8)...)
	}
	js, err := json.Marshal(st)
	if err != nil {
		return err
	}
	dt := tensor.F32
	if st.Moments == "bf16" {
		dt = tensor.BF16
	}
	_, err = writeSafetensorsAs(path, ts, map[string]string{"druto_state": string(js)}, dt)
	return err
}

// maxFP8StateBytes bounds the fp8 scaling state a state file may add to
// the moments: 4 bytes a value, gpt2-xl's 48 blocks of 12 tensors with a
// history of 4096 steps fit.
const maxFP8StateBytes = 16 << 20

// loadState reads a state file for a model of n parameters: its size is
// checked against n before it is read, and every field is checked. The
// fp8 scaling state, when the file has one, is returned in fp8 (its
// values checked against the model's tensors by gpt.Model.SetFP8Scales).
func loadState(path string, n int) (st state, m, v []float32, fp8 *amp.FP8Scales, err error) {
	ts, meta, err := readSafetensors(path, 8*int64(n)+maxFP8StateBytes)
	if err != nil {
		return st, nil, nil, nil, err
	}
	st, m, v, fp8, err = stateFromTensors(ts, meta, n)
	if err != nil {
		return st, nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, m, v, fp8, nil
}

// stateFromTensors checks a parsed state file for a model of n parameters.
func stateFromTensors(ts []stTensor, meta map[string]string, n int) (state, []float32, []float32, *amp.FP8Scales, error) {
	st, err := parseState(meta)
	if err != nil {
		return st, nil, nil, nil, err
	}
	var fp8 *amp.FP8Scales
	if st.FP8 != nil {
		d := st.FP8
		var fst, fmeta []float32
		rest := ts[:0:0]
		for _, t := range ts {
			switch t.Name {
			case "fp8.st":
				fst = t.Data
			case "fp8.meta":
				fmeta = t.Data
			default:
				rest = append(rest, t)
			}
		}
		if d.K < 0 || d.H < 0 || d.K > maxFP8StateBytes || d.H > maxFP8StateBytes ||
			fst == nil || fmeta == nil || len(fst) != amp.FP8StLen(d.K, d.H) || len(fmeta) != d.K*amp.FP8MetaLen {
			return st, nil, nil, nil, fmt.Errorf("%w: the fp8 state (%d tensors, history %d) wants fp8.st and fp8.meta of their sizes", ErrCorrupt, d.K, d.H)
		}
		fp8 = &amp.FP8Scales{K: d.K, H: d.H, Margin: d.Margin, St: fst, Meta: make([]int32, len(fmeta))}
		for i, x := range fmeta {
			if x != float32(int32(x)) {
				return st, nil, nil, nil, fmt.Errorf("%w: fp8.meta holds %v at element %d", ErrCorrupt, x, i)
			}
			fp8.Meta[i] = int32(x)
		}
		ts = rest
	}
	if len(ts) != 2 || ts[0].Name != "adamw.m" || ts[1].Name != "adamw.v" || len(ts[0].Data) != n || len(ts[1].Data) != n {
		return st, nil, nil, nil, fmt.Errorf("%w: want adamw.m and adamw.v of %d values", ErrCorrupt, n)
	}
	for _, t := range ts {
		for i, v := range t.Data {
			if !finite(float64(v)) || t.Name == "adamw.v" && v < 0 {
				return st, nil, nil, nil, fmt.Errorf("%w: %s holds %v at element %d", ErrCorrupt, t.Name, v, i)
			}
		}
	}
	return st, ts[0].Data, ts[1].Data, fp8, nil
}

// maxScale bounds a loss scale read from a state file: a scale that large
// (torch's starts at 2^16) could only grow to +Inf, which never recovers.
const maxScale = 1 << 64

// parseState decodes and checks the state metadata.
func parseState(meta map[string]string) (state, error) {
	var st state
	js, ok := meta["druto_state"]
	if !ok {
		return st, fmt.Errorf("%w: no druto_state metadata (not a druto state file)", ErrCorrupt)
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		return st, fmt.Errorf("%w: state metadata: %v", ErrCorrupt, err)
	}
	switch {
	case !(st.Scale > 0 && st.Scale <= maxScale): // false for NaN too
		return st, fmt.Errorf("%w: loss scale %g must be above 0 and at most 2^64", ErrCorrupt, st.Scale)
	case st.Step < 0 || st.OptSteps < 0 || st.OptSteps > st.Step || st.Skipped < 0 || st.Skipped > st.Step:
		return st, fmt.Errorf("%w: step %d, optimizer steps %d and skipped steps %d do not add up", ErrCorrupt, st.Step, st.OptSteps, st.Skipped)
	case st.GoodSteps < 0:
		return st, fmt.Errorf("%w: negative scaler step count %d", ErrCorrupt, st.GoodSteps)
	case st.DataPos < 0:
		return st, fmt.Errorf("%w: negative data position %d", ErrCorrupt, st.DataPos)
	case st.Moments != "" && st.Moments != "bf16":
		return st, fmt.Errorf("%w: moments %q (want bf16, or none for fp32)", ErrCorrupt, st.Moments)
	}
	return st, nil
}
