package plotting

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// FuzzLossCurves plots metrics files of any bytes: ParseMetrics reads or
// refuses them, and what it reads is plotted (linear and log) and rendered
// to SVG without a panic or a hang, or refused with an error (a log axis
// given a loss at or below zero, a run with nothing finite).
func FuzzLossCurves(f *testing.F) {
	for _, s := range []string{
		`{"step":1,"loss":5}` + "\n" + `{"step":2,"loss":4,"val_loss":4.5}`,
		`{"step":1,"loss":1e308}` + "\n" + `{"step":2,"loss":-1e308}`,
		`{"step":1,"loss":1.7976931348623157e308}`,
		`{"step":1,"loss":5e-324}` + "\n" + `{"step":2,"loss":0}`,
		`{"step":-9223372036854775808,"loss":1}` + "\n" + `{"step":9223372036854775807,"loss":1}`,
		`{"step":1,"loss":1e299}` + "\n" + `{"step":2,"loss":1.0000000000000001e299}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, log bool) {
		run, err := ParseMetrics(strings.NewReader(string(b)), "r")
		if err != nil || len(run.Metrics) == 0 {
			return
		}
		p, err := LossCurves([]Run{run}, LogY(log))
		if err != nil {
			return
		}
		wt, err := p.WriterTo(400, 300, "svg")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wt.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParseBench reads bench results files of any bytes (the loader of
// druto plot --bench): ParseBench refuses them with an error, or returns
// at least one record, each with a config and a mode and only finite
// non-negative numbers, and one baseline for each config with step times.
// What it accepts is plotted by each of druto plot's helpers without a
// panic (an error is allowed). Seeds: the committed bench/results files.
func FuzzParseBench(f *testing.F) {
	seeds, _ := filepath.Glob("../bench/results/*.json")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 64<<10 { // the detect report is no bench file, and too big a seed
			f.Add(b, uint8(0))
		}
	}
	f.Add([]byte(`{"records":[{"config":"tiny","mode":"fused","baseline":true,"step_ms":1e308}]}`), uint8(1))
	f.Add([]byte(`{"records":[{"config":"tiny","mode":"k","kernels":[{"name":"ln","mode":"fused","ms":1,"gbps":2}]}]}`), uint8(4))
	helpers := []func([]BenchRecord, ...Option) (*plot.Plot, error){SpeedUp, Throughput, Memory, Utilisation, Bandwidth}
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		bench, err := ParseBench(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(bench.Records) == 0 {
			t.Fatal("accepted with no records")
		}
		var steps []BenchRecord
		for i, r := range bench.Records {
			if r.Config == "" || r.Mode == "" {
				t.Fatalf("record %d accepted without config or mode: %+v", i, r)
			}
			if err := r.Check(); err != nil {
				t.Fatalf("record %d accepted with %v", i, err)
			}
			if !(r.StepMs == 0 && len(r.Kernels) > 0) {
				steps = append(steps, r)
			}
		}
		base, err := baselines(steps)
		if err != nil {
			t.Fatalf("accepted with %v", err)
		}
		for _, r := range steps {
			if !base[r.Config].Baseline {
				t.Fatalf("config %q accepted without its baseline", r.Config)
			}
		}
		p, err := helpers[int(kind)%len(helpers)](bench.Records)
		if err != nil {
			return
		}
		wt, err := p.WriterTo(400, 300, "svg")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wt.WriteTo(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}
