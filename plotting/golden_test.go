package plotting

import (
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/cmpimg"
)

// checkGolden renders p as each of exts and compares the result with
// testdata/<name>_golden.<ext> the way gonum's cmpimg.CheckPlot does (PNG
// pixel by pixel, SVG byte for byte); go test -regen (cmpimg's flag)
// rewrites the goldens instead. A mismatching image is written outside the
// repository, under the OS temp folder, and its path logged.
func checkGolden(t *testing.T, name string, p *plot.Plot, exts ...string) {
	t.Helper()
	for _, ext := range exts {
		got, err := Render(p, ext, DefaultWidth, DefaultHeight)
		if err != nil {
			t.Fatalf("%s.%s: %v", name, ext, err)
		}
		golden := filepath.Join("testdata", name+"_golden."+ext)
		if *cmpimg.GenerateTestData {
			if err := writeAtomic(golden, got); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", golden)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%v (run go test -regen to create it)", err)
			continue
		}
		ok, err := cmpimg.Equal(ext, got, want)
		if err != nil {
			t.Errorf("%s: comparing: %v", golden, err)
			continue
		}
		if !ok {
			dir, err := os.MkdirTemp("", "druto-plotting-golden-")
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, name+"."+ext)
			_ = os.WriteFile(out, got, 0o644)
			t.Errorf("%s: image differs from the golden; got written to %s (go test -regen rewrites goldens)", golden, out)
		}
	}
}

// goldenCase is one helper call with fixed data.
type goldenCase struct {
	name string
	bn   bool // needs the Bengali font
	make func() (*plot.Plot, error)
	exts []string
}

// goldenCases lists every helper in English, and in Bangla with Bengali
// digits.
func goldenCases() []goldenCase {
	runs := fixtureRuns()
	recs := fixtureBench().Records
	base := atBaselineBatch(recs)
	var gpt2 []BenchRecord
	for _, r := range recs {
		if r.Config == "gpt2-124M" {
			gpt2 = append(gpt2, r)
		}
	}
	bn := []Option{Lang("bn"), BanglaDigits(true)}
	with := func(extra ...Option) []Option { return append(append([]Option(nil), bn...), extra...) }
	return []goldenCase{
		{"loss_en", false, func() (*plot.Plot, error) { return LossCurves(runs) }, []string{"png"}},
		{"loss_log_en", false, func() (*plot.Plot, error) { return LossCurves(runs, LogY(true), Smooth(0.05)) }, []string{"png"}},
		{"speedup_en", false, func() (*plot.Plot, error) { return SpeedUp(recs) }, []string{"png"}},
		{"throughput_en", false, func() (*plot.Plot, error) { return Throughput(gpt2) }, []string{"png"}},
		{"memory_en", false, func() (*plot.Plot, error) { return Memory(base) }, []string{"png"}},
		{"memory_grouped_en", false, func() (*plot.Plot, error) { return Memory(base, Grouped(true)) }, []string{"png"}},
		{"util_en", false, func() (*plot.Plot, error) { return Utilisation(recs) }, []string{"png"}},
		{"bandwidth_en", false, func() (*plot.Plot, error) { return Bandwidth(recs) }, []string{"png"}},

		{"loss_bn", true, func() (*plot.Plot, error) { return LossCurves(runs, with()...) }, []string{"png", "svg"}},
		{"speedup_bn", true, func() (*plot.Plot, error) { return SpeedUp(recs, with()...) }, []string{"png"}},
		{"throughput_bn", true, func() (*plot.Plot, error) { return Throughput(gpt2, with()...) }, []string{"png"}},
		{"memory_bn", true, func() (*plot.Plot, error) { return Memory(base, with()...) }, []string{"png"}},
		{"util_bn", true, func() (*plot.Plot, error) { return Utilisation(recs, with()...) }, []string{"png"}},
		{"bandwidth_bn", true, func() (*plot.Plot, error) { return Bandwidth(recs, with()...) }, []string{"png"}},
	}
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			if c.bn {
				needFont(t)
			}
			p, err := c.make()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, p, c.exts...)
		})
	}
}
