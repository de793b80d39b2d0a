package plotting

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

// TestGeneration: a bench --sample report and a torch_sample_bench.py output
// read and draw in both languages; bad values and files are refused.
func TestGeneration(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "sample.json")
	torch := filepath.Join(dir, "torch.jsonl")
	if err := os.WriteFile(rep, []byte(`{"device": "cpu", "records": null, "sample": [
		{"config": "gpt2-124M", "mode": "fused+fp32", "batch": 1, "decode_tokens_per_s": 31.5, "bound_tokens_per_s": 40.2},
		{"config": "gpt2-124M", "mode": "fused+bf16", "batch": 1, "decode_tokens_per_s": 50.1, "bound_tokens_per_s": 80.4},
		{"config": "tiny", "mode": "fused+fp32", "batch": 4, "decode_tokens_per_s": 9000}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(torch, []byte(`{"mode": "kv-cache", "tok_s": 8.8}
{"mode": "recompute", "tok_s": 2.3}
{"greedy_tokens_equal": true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadSample(rep)
	if err != nil || len(recs) != 3 || recs[0].System != "druto fused+fp32" || recs[2].Batch != 4 {
		t.Fatalf("ReadSample: %+v, %v", recs, err)
	}
	tr, err := ReadTorchSample(torch, "gpt2-124M")
	if err != nil || len(tr) != 2 || tr[0].System != "PyTorch kv-cache" || tr[0].TokensPerS != 8.8 {
		t.Fatalf("ReadTorchSample: %+v, %v", tr, err)
	}
	for _, lang := range []string{"en", "bn"} {
		p, err := Generation(append(recs, tr...), Lang(lang))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "gen-"+lang+".png")
		if d := os.Getenv("GEN_PNG_DIR"); d != "" {
			out = filepath.Join(d, "gen-"+lang+".png")
		}
		if err := Save(p, out, 6*vg.Inch, 4*vg.Inch); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(out); err != nil || st.Size() < 5000 {
			t.Fatalf("%s: %v, %v", out, st, err)
		}
		if lang == "bn" && !strings.Contains(p.Title.Text, "লেখা") {
			t.Errorf("Bangla title %q", p.Title.Text)
		}
	}
	for _, bad := range [][]Decode{nil, {{System: "a", Config: "c", TokensPerS: -1}}, {{System: "a", Config: "c", TokensPerS: 1}, {System: "a", Config: "c", TokensPerS: 2}}} {
		if _, err := Generation(bad); err == nil {
			t.Errorf("%+v drawn", bad)
		}
	}
	if _, err := ReadSample(torch); err == nil {
		t.Error("a torch output read as a druto report")
	}
}
