package plotting

import (
	"io"
	"strings"
	"testing"
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
