package nbui

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/druto/druto/pkg/train"
	"github.com/druto/druto/plotting"
)

// SampleRecords returns the generation measurements committed in
// bench/results: every sample-*.json (druto bench --sample) and, beside
// each, the PyTorch anchor's output of the same run (the same name ending
// -torch.jsonl, torch_sample_bench.py's lines), for plotting.Generation.
// Only batch-1 records are kept, as PyTorch's are.
func SampleRecords() ([]plotting.Decode, error) {
	files, err := filepath.Glob(filepath.Join(Repo(), "bench", "results", "sample-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []plotting.Decode
	for _, f := range files {
		recs, err := plotting.ReadSample(f)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Batch == 1 {
				out = append(out, r)
			}
		}
		torch := strings.TrimSuffix(f, ".json") + "-torch.jsonl"
		if _, err := os.Stat(torch); err == nil && len(recs) > 0 {
			tr, err := plotting.ReadTorchSample(torch, "gpt2-124M")
			if err != nil {
				return nil, err
			}
			out = append(out, tr...)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("nbui: no generation records in %s (druto bench --sample --json writes them)", filepath.Join(Repo(), "bench", "results"))
	}
	return out, nil
}

// ShowGeneration notes how fast a sampler's last generation went and
// shows it as plotting.Generation's figure beside the committed records
// (SampleRecords): "druto (here)" for the model of preset.
func ShowGeneration(lang, preset string, st train.SampleStats) error {
	Note(lang, "Here: %d new tokens from the trained checkpoint, the first after %.1f ms, then %.0f tokens/s over the key/value cache.",
		st.Tokens, float64(st.Prefill.Microseconds())/1000, st.DecodeRate())
	recs, err := SampleRecords()
	if err != nil {
		return err
	}
	here := plotting.Decode{System: "druto (here)", Config: preset, Batch: 1, TokensPerS: st.DecodeRate()}
	p, err := plotting.Generation(append([]plotting.Decode{here}, recs...), PlotOptions(lang)...)
	if err != nil {
		return err
	}
	return plotting.Show(p)
}
