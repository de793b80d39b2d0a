package hubtest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// RandomGPT2 returns parameters for cfg in druto's layout order: weights
// N(0, 0.02), layernorm gains near 1, small biases, from seed.
func RandomGPT2(cfg gpt.Config, seed uint64) []float32 {
	l := cfg.Layout()
	p := make([]float32, l.Total)
	r := tensor.NewRNG(seed)
	for _, s := range l.Segments {
		v := p[s.Offset : s.Offset+s.Numel()]
		switch {
		case strings.HasPrefix(s.Name, "ln") || strings.Contains(s.Name, ".ln_"):
			for i := range v {
				if strings.HasSuffix(s.Name, ".weight") {
					v[i] = 1 + float32(0.1*r.Norm())
				} else {
					v[i] = float32(0.02 * r.Norm())
				}
			}
		case strings.HasSuffix(s.Name, ".bias"):
			for i := range v {
				v[i] = float32(0.01 * r.Norm())
			}
		default:
			for i := range v {
				v[i] = float32(0.02 * r.Norm())
			}
		}
	}
	return p
}

// GPT2Files returns config.json and model.safetensors as transformers'
// GPT2LMHeadModel.save_pretrained writes them for params (druto's layout
// order, cfg.Vocab the tokenizer's unpadded size) in dtype (F32, F16 or
// BF16): names without the "transformer." prefix as on the Hub, Conv1D
// weights stored (in, out), no lm_head (tied), metadata {"format": "pt"}.
// It is written here, independently of pkg/train's reader, so that a test
// checks one against the other.
func GPT2Files(cfg gpt.Config, params []float32, dtype tensor.DType) (config, model []byte, err error) {
	config, err = json.MarshalIndent(map[string]any{
		"architectures": []string{"GPT2LMHeadModel"}, "model_type": "gpt2",
		"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
		"vocab_size": cfg.Vocab, "n_positions": cfg.MaxSeq, "n_ctx": cfg.MaxSeq,
		"n_layer": cfg.Layers, "n_head": cfg.Heads, "n_embd": cfg.Channels,
		"bos_token_id": 50256, "eos_token_id": 50256, "torch_dtype": map[tensor.DType]string{tensor.F32: "float32", tensor.F16: "float16", tensor.BF16: "bfloat16"}[dtype],
	}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	model, err = SafetensorsHeader(cfg, dtype, params)
	return config, model, err
}

// SafetensorsHeader is GPT2Files' model file; with params nil it returns
// only the header (8-byte length and JSON), for a test that makes a file
// of the full size sparse (a full-size gpt2-xl without its 3 GB of data).
func SafetensorsHeader(cfg gpt.Config, dtype tensor.DType, params []float32) ([]byte, error) {
	l := cfg.Layout()
	if params != nil && len(params) != l.Total {
		return nil, fmt.Errorf("hubtest: %d parameters for a layout of %d", len(params), l.Total)
	}
	es := int64(dtype.Size())
	if dtype != tensor.F32 && dtype != tensor.F16 && dtype != tensor.BF16 {
		return nil, fmt.Errorf("hubtest: dtype %s", dtype)
	}
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	segs := append([]tensor.Segment(nil), l.Segments...)
	sort.Slice(segs, func(i, j int) bool { return hfName(segs[i].Name) < hfName(segs[j].Name) })
	var off int64
	type piece struct {
		seg  tensor.Segment
		conv bool
	}
	var pieces []piece
	for _, s := range segs {
		shape := []int(append(tensor.Shape(nil), s.Shape...))
		conv := isConv1D(s.Name)
		if conv {
			shape[0], shape[1] = shape[1], shape[0]
		}
		n := int64(s.Numel()) * es
		header[hfName(s.Name)] = entry{DType: dtypeName(dtype), Shape: shape, Offsets: [2]int64{off, off + n}}
		off += n
		pieces = append(pieces, piece{s, conv})
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	out := make([]byte, 8, 8+len(hj)+int(off)*b2i(params != nil))
	binary.LittleEndian.PutUint64(out, uint64(len(hj)))
	out = append(out, hj...)
	if params == nil {
		return out, nil
	}
	for _, pc := range pieces {
		v := params[pc.seg.Offset : pc.seg.Offset+pc.seg.Numel()]
		if pc.conv { // (out, in) -> (in, out)
			r, c := pc.seg.Shape[0], pc.seg.Shape[1]
			t := make([]float32, len(v))
			for i := 0; i < r; i++ {
				for j := 0; j < c; j++ {
					t[j*r+i] = v[i*c+j]
				}
			}
			v = t
		}
		for _, x := range v {
			switch dtype {
			case tensor.F32:
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
			case tensor.F16:
				out = binary.LittleEndian.AppendUint16(out, tensor.F16FromF32(x))
			case tensor.BF16:
				out = binary.LittleEndian.AppendUint16(out, tensor.BF16FromF32(x))
			}
		}
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hfName is the tensor name on the Hub's GPT-2 files (no "transformer.").
func hfName(name string) string {
	if name == "wte" || name == "wpe" {
		return name + ".weight"
	}
	return name
}

func isConv1D(name string) bool {
	return strings.HasSuffix(name, ".weight") && (strings.Contains(name, "attn.c_") || strings.Contains(name, "mlp.c_"))
}

func dtypeName(d tensor.DType) string {
	switch d {
	case tensor.F16:
		return "F16"
	case tensor.BF16:
		return "BF16"
	}
	return "F32"
}
