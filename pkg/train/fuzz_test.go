package train

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// FuzzParseSafetensors: the checkpoint reader never panics, and whatever it
// accepts decodes to tensors whose data fit their shapes. The seed corpus
// (testdata/fuzz/FuzzParseSafetensors) holds a real small checkpoint and
// damaged copies of it.
func FuzzParseSafetensors(f *testing.F) {
	cfg := gpt.Config{Vocab: 8, MaxSeq: 4, Layers: 1, Heads: 1, Channels: 4}
	path := filepath.Join(f.TempDir(), "m.safetensors")
	if _, err := SaveModel(path, cfg, gpt.InitParams(cfg, 1)); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, _, err := parseSafetensors(b)
		if err != nil {
			if bytes.Equal(b, good) {
				t.Fatalf("the file SaveModel wrote does not parse: %v", err)
			}
			return
		}
		for _, x := range ts {
			n := 1
			for _, d := range x.Shape {
				n *= d
			}
			if n != len(x.Data) {
				t.Fatalf("%s: %d values for shape %v", x.Name, len(x.Data), x.Shape)
			}
		}
	})
}

// fuzzCfg is a model small enough to keep the fuzz seeds small.
var fuzzCfg = gpt.Config{Vocab: 4, MaxSeq: 2, Layers: 1, Heads: 1, Channels: 2}

// FuzzLoadModel: the model loader as a whole (file, config metadata and
// tensors together) never panics, and a model it accepts has a valid
// config, the config's parameter count and finite weights. Seeds: a real
// small model file and copies with crafted config numbers.
func FuzzLoadModel(f *testing.F) {
	noConfig := f.TempDir() // no config.json beside the fuzzed file
	path := filepath.Join(f.TempDir(), "m.safetensors")
	if _, err := SaveModel(path, fuzzCfg, gpt.InitParams(fuzzCfg, 1)); err != nil {
		f.Fatal(err)
	}
	good := addSeeds(f, path)
	for _, kv := range [][2]string{{`"n_layer":"1"`, `"n_layer":"9"`}, {`"vocab_size":"4"`, `"vocab_size":"4611686018427387904"`}, {`"n_embd":"2"`, `"n_embd":"-2"`}} {
		f.Add(bytes.Replace(good, []byte(kv[0]), []byte(kv[1]), 1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, meta, err := parseSafetensors(b)
		if err == nil { // as loadModel: a transformers file is brought to druto's form
			ts, meta, err = fromTransformers(filepath.Join(noConfig, "m.safetensors"), ts, meta)
		}
		if err != nil {
			return
		}
		cfg, params, err := modelFromTensors(ts, meta)
		if err != nil {
			if bytes.Equal(b, good) {
				t.Fatalf("the file SaveModel wrote does not load: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config %v: %v", cfg, err)
		}
		// F16 and BF16 take 2 bytes a weight; the vocabulary of a
		// transformers file is padded by fewer than 128 rows.
		if len(params) != cfg.NumParams() || len(params) > len(b)/2+127*cfg.Channels {
			t.Fatalf("%d parameters for config %v from a file of %d bytes", len(params), cfg, len(b))
		}
		for i, v := range params {
			if !finite(float64(v)) {
				t.Fatalf("accepted weight %d = %v", i, v)
			}
		}
	})
}

// FuzzStateFile: the state file reader never panics, and a state it
// accepts has a usable loss scale, counts that add up and finite moments.
func FuzzStateFile(f *testing.F) {
	n := fuzzCfg.NumParams()
	path := filepath.Join(f.TempDir(), "s.safetensors")
	m, v := make([]float32, n), make([]float32, n)
	for i := range m {
		m[i], v[i] = float32(i)/10, float32(i)/100
	}
	st := state{Step: 5, OptSteps: 4, Scale: 32768, GoodSteps: 3, Skipped: 1, RNG: 9, DataPos: 64, ModelSum: "ab", Options: "{}", Data: "x"}
	if err := saveState(path, st, m, v, nil); err != nil {
		f.Fatal(err)
	}
	good := addSeeds(f, path)
	f.Add(bytes.Replace(good, []byte(`\"scale\":32768`), []byte(`\"scale\":0`), 1))
	// An fp8 run's state: the scaling state of 3 tensors, history 2.
	sc, err := amp.NewFP8Scales([]tensor.FP8Format{tensor.E4M3, tensor.E4M3, tensor.E5M2}, amp.FP8Recipe{History: 2})
	if err != nil {
		f.Fatal(err)
	}
	path8 := filepath.Join(f.TempDir(), "s8.safetensors")
	if err := saveState(path8, st, m, v, sc); err != nil {
		f.Fatal(err)
	}
	good8 := addSeeds(f, path8)
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, meta, err := parseSafetensors(b)
		if err != nil {
			return
		}
		got, gm, gv, g8, err := stateFromTensors(ts, meta, n)
		if err != nil {
			if bytes.Equal(b, good) || bytes.Equal(b, good8) {
				t.Fatalf("the file saveState wrote does not load: %v", err)
			}
			return
		}
		if bytes.Equal(b, good8) && (g8 == nil || g8.K != 3 || g8.H != 2) {
			t.Fatalf("the fp8 state came back as %+v", g8)
		}
		if g8 != nil && (len(g8.St) != amp.FP8StLen(g8.K, g8.H) || len(g8.Meta) != g8.K*amp.FP8MetaLen) {
			t.Fatalf("accepted an fp8 state of %d and %d values for %d tensors, history %d", len(g8.St), len(g8.Meta), g8.K, g8.H)
		}
		if !(got.Scale > 0 && got.Scale <= maxScale) || got.Step < 0 || got.OptSteps > got.Step || got.Skipped > got.Step || got.DataPos < 0 {
			t.Fatalf("accepted state %+v", got)
		}
		if len(gm) != n || len(gv) != n {
			t.Fatalf("moments of %d and %d values, want %d", len(gm), len(gv), n)
		}
		for i := range gm {
			if !finite(float64(gm[i])) || !finite(float64(gv[i])) || gv[i] < 0 {
				t.Fatalf("accepted moments %v %v at %d", gm[i], gv[i], i)
			}
		}
	})
}

// noChecksum renames druto's checksum keys in a file's header (same
// length, so the offsets hold): the reader then verifies neither the data
// nor the metadata.
func noChecksum(b []byte) []byte {
	b = bytes.Replace(b, []byte(`"`+checksumKey+`"`), []byte(`"druto_nosum0"`), 1)
	return bytes.Replace(b, []byte(`"`+metaSumKey+`"`), []byte(`"druto_nometasum00"`), 1)
}

// addSeeds adds the file at path to f's seeds, and a copy without the
// checksum (as other writers' files are), so that mutations of the data
// section are explored too; it returns the file.
func addSeeds(f *testing.F, path string) []byte {
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(noChecksum(good))
	return good
}

// FuzzHFConfig reads a transformers GPT-2 (testdata/hf-gpt2-tiny) with any
// bytes as the config.json beside it (ReadModelConfig: the --init and Hub
// path's config reader). It never panics; a config it accepts is valid
// (positive sizes, heads dividing the width, below 2^31 and maxParams) and
// agrees with the file's tensors: the vocabulary, context, depth and width
// are the tiny model's, whatever the JSON said. Seeds: the real config.json
// and edits of it.
func FuzzHFConfig(f *testing.F) {
	src := filepath.Join("testdata", "hf-gpt2-tiny")
	real, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		f.Fatal(err)
	}
	want := gpt.Config{Vocab: PaddedVocab(50257), MaxSeq: 128, Layers: 2, Heads: 4, Channels: 64}
	f.Add(real)
	for _, kv := range [][2]string{
		{`"n_head": 4`, `"n_head": 3`}, {`"n_head": 4`, `"n_head": 0`}, {`"n_layer": 2`, `"n_layer": 2147483648`},
		{`"n_positions": 128`, `"n_positions": -128`}, {`"n_embd": 64`, `"n_embd": 1e300`}, {`"model_type": "gpt2"`, `"model_type": "llama"`},
		{`"n_inner": null`, `"n_inner": 7`}, {`"vocab_size": 50257`, `"vocab_size": "50257"`},
	} {
		f.Add(bytes.Replace(real, []byte(kv[0]), []byte(kv[1]), 1))
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := ReadModelConfig(path)
		if err != nil {
			if bytes.Equal(b, real) {
				t.Fatalf("the real config.json does not load: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config %v: %v", cfg, err)
		}
		if cfg.Vocab != want.Vocab || cfg.MaxSeq != want.MaxSeq || cfg.Layers != want.Layers || cfg.Channels != want.Channels {
			t.Fatalf("accepted config %v for the tensors of %v", cfg, want)
		}
		if cfg.Heads < 1 || cfg.Channels%cfg.Heads != 0 || cfg.NumParams() > maxParams {
			t.Fatalf("accepted config %v", cfg)
		}
		if bytes.Equal(b, real) && cfg != want {
			t.Fatalf("the real config.json reads as %v, want %v", cfg, want)
		}
	})
}
