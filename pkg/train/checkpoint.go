package train

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/druto/druto/pkg/gpt"
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
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = v[r*cols+c]
		}
	}
	return out
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
	return writeSafetensors(path, ts, meta)
}

// LoadModel reads a checkpoint written by SaveModel (or any GPT-2
// safetensors file with the same names and F32 data) and returns its config
// and parameters in druto's layout order.
func LoadModel(path string) (gpt.Config, []float32, error) {
	cfg, params, _, err := loadModel(path)
	return cfg, params, err
}

// loadModel is LoadModel that also returns the file's data checksum.
func loadModel(path string) (gpt.Config, []float32, string, error) {
	ts, meta, err := readSafetensors(path)
	if err == nil { // a file transformers wrote: to druto's names, config and vocabulary (hf.go)
		ts, meta, err = fromTransformers(path, ts, meta)
	}
	if err != nil {
		return gpt.Config{}, nil, "", err
	}
	var cfg gpt.Config
	for key, dst := range map[string]*int{"vocab_size": &cfg.Vocab, "n_positions": &cfg.MaxSeq,
		"n_layer": &cfg.Layers, "n_head": &cfg.Heads, "n_embd": &cfg.Channels} {
		v, err := strconv.Atoi(meta[key])
		if err != nil {
			return cfg, nil, "", fmt.Errorf("%s: %w: metadata %q missing or not a number", path, ErrCorrupt, key)
		}
		*dst = v
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, "", fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if cfg.NumParams() > 2<<30 {
		return cfg, nil, "", fmt.Errorf("%s: %w: config %v is implausibly large", path, ErrCorrupt, cfg)
	}
	by := make(map[string]stTensor, len(ts))
	for _, t := range ts {
		by[t.Name] = t
	}
	l := cfg.Layout()
	params := make([]float32, l.Total)
	for _, s := range l.Segments {
		name, conv := hfName(s.Name)
		t, ok := by[name]
		if !ok {
			return cfg, nil, "", fmt.Errorf("%s: %w: tensor %s missing", path, ErrCorrupt, name)
		}
		want := append([]int(nil), s.Shape...)
		if conv {
			want[0], want[1] = s.Shape[1], s.Shape[0]
		}
		if fmt.Sprint(t.Shape) != fmt.Sprint(want) {
			return cfg, nil, "", fmt.Errorf("%s: %w: tensor %s has shape %v, the config needs %v", path, ErrCorrupt, name, t.Shape, want)
		}
		v := t.Data
		if conv {
			v = transpose(v, want[0], want[1])
		}
		copy(params[s.Offset:], v)
	}
	return cfg, params, meta[checksumKey], nil
}

// state is everything besides the weights that an exact resume needs.
type state struct {
	Step      int     `json:"step"`         // training steps done
	OptSteps  int     `json:"opt_steps"`    // AdamW steps taken (skipped steps excluded)
	Scale     float32 `json:"scale"`        // GradScaler
	GoodSteps int     `json:"good_steps"`   //
	Skipped   int     `json:"skipped"`      //
	RNG       uint64  `json:"rng"`          // sampling RNG state
	DataPos   int     `json:"data_pos"`     // next training batch's token offset
	ModelSum  string  `json:"model_sha256"` // checksum of the matching model file
	Options   string  `json:"options"`      // the run's options, to refuse a mismatched resume
}

func saveState(path string, st state, m, v []float32) error {
	js, err := json.Marshal(st)
	if err != nil {
		return err
	}
	_, err = writeSafetensors(path, []stTensor{
		{Name: "adamw.m", Shape: []int{len(m)}, Data: m},
		{Name: "adamw.v", Shape: []int{len(v)}, Data: v},
	}, map[string]string{"druto_state": string(js)})
	return err
}

func loadState(path string, n int) (state, []float32, []float32, error) {
	var st state
	ts, meta, err := readSafetensors(path)
	if err != nil {
		return st, nil, nil, err
	}
	if err := json.Unmarshal([]byte(meta["druto_state"]), &st); err != nil {
		return st, nil, nil, fmt.Errorf("%s: %w: state metadata: %v", path, ErrCorrupt, err)
	}
	if len(ts) != 2 || ts[0].Name != "adamw.m" || ts[1].Name != "adamw.v" || len(ts[0].Data) != n || len(ts[1].Data) != n {
		return st, nil, nil, fmt.Errorf("%s: %w: want adamw.m and adamw.v of %d values", path, ErrCorrupt, n)
	}
	return st, ts[0].Data, ts[1].Data, nil
}
