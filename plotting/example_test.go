package plotting_test

import (
	"log"

	"github.com/druto/druto/plotting"
	"gonum.org/v1/plot"
)

// Loss curves of two runs, in Bangla with Bengali digits, on a log axis,
// shown inline in a GoNB notebook and saved as SVG.
func ExampleLossCurves() {
	fused, err := plotting.ReadMetrics("runs/fused.jsonl", plotting.RunLabel("fused+bf16"))
	if err != nil {
		log.Fatal(err)
	}
	plain, err := plotting.ReadMetrics("runs/decomposed.jsonl")
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
	if err := plotting.Save(p, "loss.svg", 0, 0); err != nil {
		log.Fatal(err)
	}
}

// The benchmark plots from one pkg/bench results file.
func ExampleSpeedUp() {
	b, err := plotting.ReadBench("bench/results/h200.json")
	if err != nil {
		log.Fatal(err)
	}
	p, err := plotting.SpeedUp(b.Records)
	if err != nil {
		log.Fatal(err)
	}
	if err := plotting.Save(p, "speedup.png", 0, 0); err != nil {
		log.Fatal(err)
	}
	for name, draw := range map[string]func([]plotting.BenchRecord, ...plotting.Option) (*plot.Plot, error){
		"throughput.pdf": plotting.Throughput,
		"memory.pdf":     plotting.Memory,
		"util.pdf":       plotting.Utilisation,
		"bandwidth.pdf":  plotting.Bandwidth,
	} {
		p, err := draw(b.Records)
		if err != nil {
			log.Fatal(err)
		}
		if err := plotting.Save(p, name, 0, 0); err != nil {
			log.Fatal(err)
		}
	}
}
