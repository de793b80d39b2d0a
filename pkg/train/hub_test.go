package train

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/hub/hubtest"
	"github.com/druto/druto/pkg/tensor"
)

// writeHF writes a transformers GPT-2 (hubtest's writer, independent of
// this package) with config.json and, when vocab is not nil, vocab.json.
func writeHF(t *testing.T, cfg gpt.Config, params []float32, dt tensor.DType, vocab []byte) string {
	t.Helper()
	dir := t.TempDir()
	config, model, err := hubtest.GPT2Files(cfg, params, dt)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644)
	if vocab != nil {
		os.WriteFile(filepath.Join(dir, "vocab.json"), vocab, 0o644)
	}
	p := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(p, model, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadModelConfig: the shape read from the header alone is the one a
// full load finds, for transformers' files and druto's; a truncated file
// or a config.json that disagrees with the tensors is refused.
func TestReadModelConfig(t *testing.T) {
	cfg := gpt.Config{Vocab: 300, MaxSeq: 16, Layers: 3, Heads: 5, Channels: 40}
	params := hubtest.RandomGPT2(cfg, 3)
	p := writeHF(t, cfg, params, tensor.F16, nil)
	got, err := ReadModelConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := LoadModel(p)
	if err != nil || got != full || got.Vocab != PaddedVocab(300) || got.Layers != 3 || got.Heads != 5 {
		t.Errorf("header %v, full load %v (%v)", got, full, err)
	}
	own := filepath.Join(t.TempDir(), "own.safetensors")
	if _, err := SaveModel(own, full, make([]float32, full.NumParams())); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadModelConfig(own); err != nil || got != full {
		t.Errorf("druto's file: %v %v", got, err)
	}
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-100], 0o644)
	if _, err := ReadModelConfig(p); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: %v", err)
	}
	os.WriteFile(p, b, 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(p), "config.json"), []byte(`{"model_type": "gpt2", "n_layer": 4, "n_head": 5, "n_embd": 40, "n_positions": 16}`), 0o644)
	if _, err := ReadModelConfig(p); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("config.json with a layer too many: %v", err)
	}
}

// TestSaveModelAs: a bf16 or f16 model file is half the size and loads to
// the weights rounded to that dtype, exactly.
func TestSaveModelAs(t *testing.T) {
	cfg := gpt.Config{Vocab: 256, MaxSeq: 16, Layers: 2, Heads: 2, Channels: 32}
	params := hubtest.RandomGPT2(cfg, 5)
	dir := t.TempDir()
	f32 := filepath.Join(dir, "f32.safetensors")
	if _, err := SaveModelAs(f32, cfg, params, tensor.F32); err != nil {
		t.Fatal(err)
	}
	i32, _ := os.Stat(f32)
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		p := filepath.Join(dir, dt.String()+".safetensors")
		if _, err := SaveModelAs(p, cfg, params, dt); err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(p)
		if data := 4 * int64(len(params)); i32.Size()-info.Size() < data/2-1024 {
			t.Errorf("%s file %d bytes, f32 %d: not half the data", dt, info.Size(), i32.Size())
		}
		got, back, err := LoadModel(p)
		if err != nil || got != cfg {
			t.Fatalf("%s: %v %v", dt, got, err)
		}
		for i, v := range params {
			if back[i] != tensor.Round(dt, v) {
				t.Fatalf("%s: element %d is %v, want %v", dt, i, back[i], tensor.Round(dt, v))
			}
		}
	}
	if _, err := SaveModelAs(filepath.Join(dir, "x"), cfg, params, tensor.I32); err == nil {
		t.Error("an i32 model file was written")
	}
}

// TestHFTokenizerChecked: a transformers GPT-2 whose vocab.json is GPT-2's
// gets druto's GPT-2 tokenizer; another vocabulary is refused in one line.
func TestHFTokenizerChecked(t *testing.T) {
	cfg := gpt.Config{Vocab: data.GPT2Vocab, MaxSeq: 8, Layers: 1, Heads: 1, Channels: 8}
	params := hubtest.RandomGPT2(cfg, 9)
	vocab, err := data.GPT2VocabJSON()
	if err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(writeHF(t, cfg, params, tensor.BF16, vocab))
	if err != nil || ck.Tokenizer == nil || ck.Tokenizer.Name() != "gpt2" || ck.From != "transformers" {
		t.Fatalf("%+v %v", ck, err)
	}
	_, err = LoadCheckpoint(writeHF(t, cfg, params, tensor.BF16, []byte(`{"a": 0, "b": 1}`)))
	if err == nil || !strings.Contains(err.Error(), "vocab.json") || strings.Contains(err.Error(), "\n") {
		t.Errorf("another vocabulary: %v", err)
	}
}
