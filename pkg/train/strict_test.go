package train

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
)

// TestStrictLoader: druto's checkpoints and transformers' are held to the
// same rule: every tensor the config has, and no other. A file with one
// more layer than its config, a foreign tensor or a missing one is refused
// as corrupt, naming the tensors, whoever wrote it.
func TestStrictLoader(t *testing.T) {
	one := gpt.Config{Vocab: 256, MaxSeq: 16, Layers: 1, Heads: 2, Channels: 8}
	two := one
	two.Layers = 2
	dir := t.TempDir()
	src := filepath.Join(dir, "two.safetensors")
	if _, err := SaveModel(src, two, gpt.InitParams(two, 1)); err != nil {
		t.Fatal(err)
	}
	ts2, _, err := readSafetensors(src, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var ts1 []stTensor // the one-layer model's tensors
	for _, x := range ts2 {
		if !strings.HasPrefix(x.Name, "transformer.h.1.") {
			ts1 = append(ts1, x)
		}
	}
	foreign := stTensor{Name: "transformer.extra.weight", Shape: []int{2}, Data: []float32{1, 2}}
	for _, c := range []struct {
		name string
		ts   []stTensor
		want string
	}{
		{"as saved", ts1, ""},
		{"one more layer", ts2, "the file holds 12 tensors: transformer.h.1.attn.c_attn.bias, transformer.h.1.attn.c_attn.weight, transformer.h.1.attn.c_proj.bias and 9 more, which config"},
		{"a foreign tensor", append(append([]stTensor(nil), ts1...), foreign), "the file holds tensor transformer.extra.weight, which config"},
		{"a missing tensor", ts1[1:], "needs tensor " + ts1[0].Name + ", missing from the file"},
	} {
		// druto's own file: its checksums are right, its tensors are not.
		p := filepath.Join(dir, "druto.safetensors")
		if _, err := writeSafetensors(p, c.ts, configMeta(one)); err != nil {
			t.Fatal(err)
		}
		_, err := LoadCheckpoint(p)
		check(t, "druto: "+c.name, err, c.want)

		// The same tensors as transformers writes them, config.json beside.
		hdir := filepath.Join(dir, "hf-"+strings.ReplaceAll(c.name, " ", "-"))
		os.MkdirAll(hdir, 0o755)
		var raw []rawTensor
		for _, x := range c.ts {
			if x.Name == "transformer.wte.weight" { // GPT-2's vocabulary: 50257 rows
				x = stTensor{Name: x.Name, Shape: []int{data.GPT2Vocab, one.Channels}, Data: make([]float32, data.GPT2Vocab*one.Channels)}
			}
			raw = append(raw, rawTensor{strings.TrimPrefix(x.Name, "transformer."), "F32", x.Shape, encodeAs("F32", x.Data)})
		}
		writeRawSafetensors(t, filepath.Join(hdir, "model.safetensors"), raw, map[string]string{"format": "pt"})
		cfgJSON := strings.NewReplacer(`"n_embd": 16`, `"n_embd": 8`, `"n_layer": 2`, `"n_layer": 1`).Replace(hfConfigJSON)
		os.WriteFile(filepath.Join(hdir, "config.json"), []byte(cfgJSON), 0o644)
		_, err = LoadCheckpoint(filepath.Join(hdir, "model.safetensors"))
		if c.name == "a foreign tensor" { // refused before: not GPT-2 (a model druto cannot run), naming it
			if err == nil || !strings.Contains(err.Error(), "GPT-2 does not have, e.g. extra.weight") {
				t.Errorf("transformers: %s: %v", c.name, err)
			}
			continue
		}
		check(t, "transformers: "+c.name, err, strings.ReplaceAll(c.want, "V256", "V50304"))
	}
}

// check fails t unless err is nil (want "") or a corrupt checkpoint saying want.
func check(t *testing.T, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: %v, want a corrupt checkpoint saying %q", name, err, want)
	}
}
