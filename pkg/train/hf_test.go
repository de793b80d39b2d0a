package train

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// rawTensor is one tensor of a hand-built safetensors file.
type rawTensor struct {
	name, dtype string
	shape       []int
	data        []byte
}

func encodeAs(dt string, v []float32) []byte {
	var b bytes.Buffer
	for _, x := range v {
		switch dt {
		case "F32":
			binary.Write(&b, binary.LittleEndian, math.Float32bits(x))
		case "F16":
			binary.Write(&b, binary.LittleEndian, tensor.F16FromF32(x))
		case "BF16":
			binary.Write(&b, binary.LittleEndian, tensor.BF16FromF32(x))
		}
	}
	return b.Bytes()
}

func roundAs(dt string, v float32) float32 {
	switch dt {
	case "F16":
		return tensor.Round(tensor.F16, v)
	case "BF16":
		return tensor.Round(tensor.BF16, v)
	}
	return v
}

// writeRawSafetensors writes tensors the way the reference writer lays
// them out (header JSON, 8-byte aligned, then the data in order).
func writeRawSafetensors(t *testing.T, path string, ts []rawTensor, meta map[string]string) {
	t.Helper()
	header := map[string]any{}
	var body bytes.Buffer
	for _, x := range ts {
		start := body.Len()
		body.Write(x.data)
		header[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{start, body.Len()}}
	}
	if meta != nil {
		header["__metadata__"] = meta
	}
	h, _ := json.Marshal(header)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(body.Bytes())
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hfTensors returns params of cfg as transformers names them (prefix
// optional), in dtype.
func hfTensors(cfg gpt.Config, params []float32, prefix bool, dt string) []rawTensor {
	var ts []rawTensor
	for _, s := range cfg.Layout().Segments {
		name, conv := hfName(s.Name)
		if !prefix {
			name = strings.TrimPrefix(name, "transformer.")
		}
		v, shape := params[s.Offset:s.Offset+s.Numel()], append([]int(nil), s.Shape...)
		if conv {
			v = transpose(v, s.Shape[0], s.Shape[1])
			shape[0], shape[1] = s.Shape[1], s.Shape[0]
		}
		ts = append(ts, rawTensor{name, dt, shape, encodeAs(dt, v)})
	}
	return ts
}

const hfConfigJSON = `{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
 "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 16, "n_inner": null, "layer_norm_epsilon": 1e-05,
 "scale_attn_weights": true, "scale_attn_by_inverse_layer_idx": false, "tie_word_embeddings": true,
 "torch_dtype": "float16", "transformers_version": "4.46.0", "vocab_size": 50257}`

// TestTransformersKeyVariants loads synthetic files in the forms transformers
// writes GPT-2: with and without the "transformer." prefix, with and without
// the tied lm_head and the attention-mask buffers, F32, F16 and BF16, the
// config in config.json or in the metadata. Each loads as the padded druto
// model with GPT-2's tokenizer, and padding leaves the logits unchanged.
func TestTransformersKeyVariants(t *testing.T) {
	real := gpt.Config{Vocab: data.GPT2Vocab, MaxSeq: 16, Layers: 2, Heads: 2, Channels: 16}
	padded := real
	padded.Vocab = PaddedVocab(real.Vocab)
	if padded.Vocab != 50304 {
		t.Fatalf("PaddedVocab(50257) = %d, want 50304", padded.Vocab)
	}
	rng := tensor.NewRNG(11)
	params := make([]float32, real.NumParams())
	for i := range params {
		params[i] = float32(rng.Norm() * 0.1)
	}
	wte := real.Layout().Segments[0]
	dtypes := []string{"F32", "F16", "BF16"}
	for k := 0; k < 9; k++ { // k 8: the tied pair saved as lm_head.weight only
		prefix, head, buffers := k&1 != 0, k&2 != 0 || k == 8, k&4 != 0
		dt := dtypes[k%3]
		name := fmt.Sprintf("prefix=%v,lm_head=%v,buffers=%v,%s,no wte=%v", prefix, head, buffers, dt, k == 8)
		dir := t.TempDir()
		ts := hfTensors(real, params, prefix, dt)
		if k == 8 {
			ts = ts[1:] // wte is the first segment
		}
		if head {
			ts = append(ts, rawTensor{"lm_head.weight", dt, []int{real.Vocab, real.Channels}, encodeAs(dt, params[:wte.Numel()])})
		}
		if buffers {
			for l := 0; l < real.Layers; l++ {
				p := fmt.Sprintf("transformer.h.%d.attn.", l)
				if !prefix {
					p = p[len("transformer."):]
				}
				mask := make([]byte, 16*16)
				ts = append(ts, rawTensor{p + "bias", "BOOL", []int{1, 1, 16, 16}, mask},
					rawTensor{p + "masked_bias", "F32", []int{}, encodeAs("F32", []float32{-1e4})})
			}
		}
		meta := map[string]string{"format": "pt"}
		if k == 7 { // config in the metadata instead of config.json
			meta = configMeta(real)
		} else if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(hfConfigJSON), 0o644); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "model.safetensors")
		writeRawSafetensors(t, path, ts, meta)
		ck, err := LoadCheckpoint(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ck.Config != padded || ck.From != "transformers" || ck.Tokenizer == nil || ck.Tokenizer.Name() != "gpt2" {
			t.Fatalf("%s: config %v from %s tokenizer %v; want %v from transformers, gpt2", name, ck.Config, ck.From, ck.Tokenizer, padded)
		}
		// Every value where druto's layout puts it; the padding rows zero.
		V, C := real.Vocab, real.Channels
		for i, v := range ck.Params {
			var want float32
			switch {
			case i < V*C:
				want = roundAs(dt, params[i])
			case i < padded.Vocab*C:
				want = 0
			default:
				want = roundAs(dt, params[i-(padded.Vocab-V)*C])
			}
			if v != want {
				t.Fatalf("%s: parameter %d = %g, want %g", name, i, v, want)
			}
		}
		if k == 0 {
			checkPaddingKeepsLogits(t, real, ck)
		}
	}
}

// checkPaddingKeepsLogits runs the padded model and the unpadded one on the
// same tokens: the first V logits agree.
func checkPaddingKeepsLogits(t *testing.T, real gpt.Config, ck *Checkpoint) {
	mp := randomModel(t, ck.Config, 1)
	if err := mp.SetParams(ck.Params); err != nil {
		t.Fatal(err)
	}
	mr := randomModel(t, real, 1)
	C := real.Channels
	unpadded := append(append([]float32(nil), ck.Params[:real.Vocab*C]...), ck.Params[ck.Config.Vocab*C:]...)
	if err := mr.SetParams(unpadded); err != nil {
		t.Fatal(err)
	}
	in := []int32{15496, 995, 11, 50256, 0, 7}
	var lp, lr []float32
	for _, m := range []*gpt.Model{mp, mr} {
		if _, err := m.Forward(in, nil, 1, len(in)); err != nil {
			t.Fatal(err)
		}
		l, err := m.Logits()
		if err != nil {
			t.Fatal(err)
		}
		if m == mp {
			lp = l
		} else {
			lr = l
		}
	}
	for p := range in {
		got := lp[p*ck.Config.Vocab : p*ck.Config.Vocab+real.Vocab]
		want := lr[p*real.Vocab : (p+1)*real.Vocab]
		if err := tensor.CloseF32(got, want, tensor.F32, 1); err != nil {
			t.Fatalf("position %d: padded logits differ from unpadded: %v", p, err)
		}
	}
}

// TestTransformersRefusals checks one-line errors for files druto cannot
// run: an untied head, another architecture, another activation, no config.
func TestTransformersRefusals(t *testing.T) {
	real := gpt.Config{Vocab: 300, MaxSeq: 16, Layers: 1, Heads: 2, Channels: 16}
	params := gpt.InitParams(real, 1)
	cases := []struct {
		name   string
		config string
		edit   func([]rawTensor) []rawTensor
		want   []string
	}{
		{"untied head", hfConfigJSON, func(ts []rawTensor) []rawTensor {
			return append(ts, rawTensor{"lm_head.weight", "F32", []int{300, 16}, encodeAs("F32", make([]float32, 300*16))})
		}, []string{"untied", "lm_head"}},
		{"llama", `{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu"}`, func([]rawTensor) []rawTensor {
			return []rawTensor{{"model.layers.0.self_attn.q_proj.weight", "BF16", []int{16, 16}, encodeAs("BF16", make([]float32, 256))},
				{"model.embed_tokens.weight", "BF16", []int{300, 16}, encodeAs("BF16", make([]float32, 300*16))}}
		}, []string{"LlamaForCausalLM", "model_type \"llama\"", "model.embed_tokens.weight"}},
		{"relu", strings.Replace(hfConfigJSON, "gelu_new", "relu", 1), nil, []string{"activation_function \"relu\""}},
		{"no config", "", nil, []string{"config.json"}},
	}
	for _, c := range cases {
		dir := t.TempDir()
		ts := hfTensors(real, params, true, "F32")
		if c.edit != nil {
			ts = c.edit(ts)
		}
		if c.config != "" {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644)
		}
		path := filepath.Join(dir, "model.safetensors")
		writeRawSafetensors(t, path, ts, map[string]string{"format": "pt"})
		_, err := LoadCheckpoint(path)
		if err == nil {
			t.Errorf("%s: loaded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q should name %q on one line", c.name, err, w)
			}
		}
	}
}

// TestCheckpointRecordsTokenizer checks that a run's checkpoint records its
// tokenizer (a BPE travels inside the file) and LoadCheckpoint returns it.
func TestCheckpointRecordsTokenizer(t *testing.T) {
	bpe, err := data.TrainBPE(data.Corpus(1, 32<<10), 300)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(2, 0)
	o.Config.Vocab = PaddedVocab(bpe.Vocab())
	o.Tokenizer = bpe
	toks, err := bpe.Encode(data.Corpus(1, 32<<10))
	if err != nil {
		t.Fatal(err)
	}
	tr, va := data.Split(toks, 0.1)
	tt, err := New(randomModel(t, testCfg, 1).Device(), o, tr, va)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Close()
	dir := t.TempDir()
	if err := tt.Save(dir); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if ck.From != "druto" || ck.Tokenizer == nil || ck.Tokenizer.Name() != "bpe" || data.TokenizerID(ck.Tokenizer) != data.TokenizerID(bpe) {
		t.Fatalf("from %s, tokenizer %v", ck.From, ck.Tokenizer)
	}
	if err := tt.Resume(dir); err != nil {
		t.Fatalf("resume with the same tokenizer: %v", err)
	}
	// An old byte checkpoint records nothing and implies bytes.
	path := filepath.Join(dir, "old.safetensors")
	if _, err := SaveModel(path, testCfg, gpt.InitParams(testCfg, 1)); err != nil {
		t.Fatal(err)
	}
	if ck, err := LoadCheckpoint(path); err != nil || ck.Tokenizer == nil || ck.Tokenizer.Name() != "bytes" {
		t.Fatalf("old checkpoint: %v, %v", ck, err)
	}
}

// hfTestdata is the folder scripts/make_hf_testdata.py writes on a machine
// with transformers.
const hfTestdata = "testdata/hf-gpt2-tiny"

// TestTransformersGPT2 loads a checkpoint that transformers itself wrote
// (save_pretrained of a random-init GPT2LMHeadModel in float16) and
// compares druto's logits with transformers' (F32 tolerance rule, scale 4,
// at the stored ids, plus each row's logsumexp over the whole vocabulary
// and its argmax), and 20 greedy tokens, which must be identical.
func TestTransformersGPT2(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(hfTestdata, "expected.json"))
	if os.IsNotExist(err) {
		testreq.Skip(t, "DRUTO_TESTDATA_TESTS", "%s is absent: run 'python3 scripts/make_hf_testdata.py pkg/train/%s' on a machine with torch and transformers and commit the folder", hfTestdata, hfTestdata)
	}
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		InputIDs  []int32     `json:"input_ids"`
		LogitIDs  []int       `json:"logit_ids"`
		Logits    [][]float64 `json:"logits"`
		LogSumExp []float64   `json:"logsumexp"`
		Argmax    []int       `json:"argmax"`
		Greedy    []int32     `json:"greedy"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(filepath.Join(hfTestdata, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.From != "transformers" || ck.Config.Vocab != 50304 || ck.Tokenizer == nil || ck.Tokenizer.Name() != "gpt2" {
		t.Fatalf("loaded %v from %s with tokenizer %v", ck.Config, ck.From, ck.Tokenizer)
	}
	m := randomModel(t, ck.Config, 1)
	if err := m.SetParams(ck.Params); err != nil {
		t.Fatal(err)
	}
	T, V := len(exp.InputIDs), ck.Config.Vocab
	if _, err := m.Forward(exp.InputIDs, nil, 1, T); err != nil {
		t.Fatal(err)
	}
	logits, err := m.Logits()
	if err != nil {
		t.Fatal(err)
	}
	var got, want, gotL, wantL []float64
	for p := 0; p < T; p++ {
		row := logits[p*V : p*V+data.GPT2Vocab]
		for j, id := range exp.LogitIDs {
			got, want = append(got, float64(row[id])), append(want, exp.Logits[p][j])
		}
		mx, best := math.Inf(-1), 0
		for i, v := range row {
			if float64(v) > mx {
				mx, best = float64(v), i
			}
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		gotL, wantL = append(gotL, mx+math.Log(z)), append(wantL, exp.LogSumExp[p])
		if best != exp.Argmax[p] {
			t.Errorf("position %d: argmax %d, transformers %d", p, best, exp.Argmax[p])
		}
	}
	if err := tensor.Close(got, want, tensor.F32, 4); err != nil {
		t.Fatalf("logits vs transformers: %v", err)
	}
	if err := tensor.Close(gotL, wantL, tensor.F32, 4); err != nil {
		t.Fatalf("logsumexp over the vocabulary vs transformers: %v", err)
	}
	// Greedy decoding over GPT-2's 50257 ids (the padding is never a token).
	seq := append([]int32(nil), exp.InputIDs...)
	for len(seq) < T+len(exp.Greedy) {
		if _, err := m.Forward(seq, nil, 1, len(seq)); err != nil {
			t.Fatal(err)
		}
		l, err := m.Logits()
		if err != nil {
			t.Fatal(err)
		}
		row := l[(len(seq)-1)*V : (len(seq)-1)*V+data.GPT2Vocab]
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		seq = append(seq, int32(best))
	}
	if fmt.Sprint(seq[T:]) != fmt.Sprint(exp.Greedy) {
		t.Fatalf("greedy tokens %v, transformers %v", seq[T:], exp.Greedy)
	}
	t.Logf("logits within the F32 rule (scale 4) at %d values, %d greedy tokens identical", len(got), len(exp.Greedy))
}
