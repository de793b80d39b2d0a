package plotting_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/druto/druto/plotting"
	"gonum.org/v1/plot"
)

// Loss curves of two runs (pkg/train metrics files), in Bangla with Bengali
// digits, on a log axis, shown inline in a GoNB notebook (nothing happens
// outside one) and saved as SVG.
func ExampleLossCurves() {
	dir, err := os.MkdirTemp("", "druto-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Two short runs as pkg/train writes them: one JSON line per step.
	for name, losses := range map[string][]float64{"fused.jsonl": {5.5, 3.1, 2.2}, "decomposed.jsonl": {5.5, 3.2, 2.3}} {
		var lines []byte
		for i, l := range losses {
			lines = fmt.Appendf(lines, "{\"step\": %d, \"loss\": %g, \"lr\": 0.0006}\n", i+1, l)
		}
		if err := os.WriteFile(filepath.Join(dir, name), lines, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fused, err := plotting.ReadMetrics(filepath.Join(dir, "fused.jsonl"), plotting.RunLabel("fused+bf16"))
	if err != nil {
		log.Fatal(err)
	}
	plain, err := plotting.ReadMetrics(filepath.Join(dir, "decomposed.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	p, err := plotting.LossCurves([]plotting.Run{fused, plain},
		plotting.Lang("bn"), plotting.BanglaDigits(true), plotting.LogY(true))
	if err != nil {
		log.Fatal(err)
	}
	if err := plotting.Show(p); err != nil {
		log.Fatal(err)
	}
	if err := plotting.Save(p, filepath.Join(dir, "loss.svg"), 0, 0); err != nil {
		log.Fatal(err)
	}
	fmt.Println(fused.Label, len(fused.Metrics), "steps;", plain.Label, len(plain.Metrics), "steps")
	fmt.Println("title:", p.Title.Text)
	// Output:
	// fused+bf16 3 steps; decomposed 3 steps
	// title: প্রশিক্ষণের ক্ষতি
}

// The benchmark plots from one pkg/bench results file (the committed H200
// run of the tiny and small presets), saved as PNG and PDF.
func ExampleSpeedUp() {
	b, err := plotting.ReadBench("../bench/results/bench-tiny-small-h200.json")
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "druto-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := plotting.SpeedUp(b.Records)
	if err != nil {
		log.Fatal(err)
	}
	if err := plotting.Save(p, filepath.Join(dir, "speedup.png"), 0, 0); err != nil {
		log.Fatal(err)
	}
	for _, d := range []struct {
		file string
		draw func([]plotting.BenchRecord, ...plotting.Option) (*plot.Plot, error)
	}{
		{"throughput.pdf", plotting.Throughput},
		{"memory.pdf", plotting.Memory},
	} {
		p, err := d.draw(b.Records)
		if err != nil {
			log.Fatal(err)
		}
		if err := plotting.Save(p, filepath.Join(dir, d.file), 0, 0); err != nil {
			log.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	fmt.Println(len(b.Records), "records;", len(files), "files;", p.Title.Text)
	// Output:
	// 16 records; 3 files; Speed-up over the baseline
}
