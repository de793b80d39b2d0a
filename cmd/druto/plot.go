package main

import (
	"fmt"
	"strings"

	"gonum.org/v1/plot"

	"github.com/druto/druto/plotting"
)

func init() {
	register("plot", "render training metrics or benchmark records to SVG, PNG or PDF", runPlot)
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func runPlot(args []string) error {
	fs := newFlags("plot")
	var metrics multiFlag
	fs.Var(&metrics, "metrics", "metrics.jsonl of a training run (repeat for several runs; label with LABEL=PATH)")
	benchPath := fs.String("bench", "", "benchmark report JSON (from druto bench --json)")
	kind := fs.String("kind", "", "for --bench: speedup, throughput, memory, utilisation or bandwidth (default speedup)")
	out := fs.String("out", "", "output file: .svg, .png or .pdf")
	lang := fs.String("lang", "en", "label language: en or bn")
	digits := fs.Bool("bangla-digits", false, "write numbers with Bangla digits")
	logY := fs.Bool("log", false, "logarithmic loss axis")
	title := fs.String("title", "", "plot title (default: the helper's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required (e.g. --out loss.svg)")
	}
	if (len(metrics) == 0) == (*benchPath == "") {
		return fmt.Errorf("give either --metrics (one or more) or --bench")
	}
	opts := []plotting.Option{plotting.Lang(*lang), plotting.BanglaDigits(*digits), plotting.LogY(*logY)}
	if *title != "" {
		opts = append(opts, plotting.Title(*title))
	}
	var p *plot.Plot
	if len(metrics) > 0 {
		var runs []plotting.Run
		for _, m := range metrics {
			label, path, ok := strings.Cut(m, "=")
			if !ok {
				path, label = m, ""
			}
			ro := opts
			if label != "" {
				ro = append(ro, plotting.RunLabel(label))
			}
			r, err := plotting.ReadMetrics(path, ro...)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		var err error
		if p, err = plotting.LossCurves(runs, opts...); err != nil {
			return err
		}
	} else {
		b, err := plotting.ReadBench(*benchPath)
		if err != nil {
			return err
		}
		helpers := map[string]func([]plotting.BenchRecord, ...plotting.Option) (*plot.Plot, error){
			"": plotting.SpeedUp, "speedup": plotting.SpeedUp, "throughput": plotting.Throughput,
			"memory": plotting.Memory, "utilisation": plotting.Utilisation, "bandwidth": plotting.Bandwidth,
		}
		h, ok := helpers[*kind]
		if !ok {
			return fmt.Errorf("--kind %q: want speedup, throughput, memory, utilisation or bandwidth", *kind)
		}
		if p, err = h(b.Records, opts...); err != nil {
			return err
		}
	}
	return plotting.Save(p, *out, 0, 0)
}
