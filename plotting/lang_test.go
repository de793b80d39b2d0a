package plotting

import (
	"bytes"
	"fmt"
	"gonum.org/v1/plot/vg/vgimg"
	"image"
	"image/color"
	"image/png"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
)

// strDiff is one string that differs between two plots.
type strDiff struct{ path, a, b string }

// structDiff walks two values of the same type in parallel, unexported
// fields included, and reports every difference: strings go to strs, all
// others (numbers, colours, types, lengths, nil-ness) to errs. Text
// handlers and tickers are skipped (tickers are compared by their ticks
// elsewhere); the shared font cache is compared by identity.
type structDiff struct {
	strs []strDiff
	errs []string
	seen map[[2]uintptr]bool
}

var (
	handlerType = reflect.TypeOf((*text.Handler)(nil)).Elem()
	tickerType  = reflect.TypeOf((*plot.Ticker)(nil)).Elem()
	cacheType   = reflect.TypeOf((*font.Cache)(nil))
)

// open makes v's unexported fields readable (v must be addressable).
func open(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}

func (d *structDiff) walk(a, b reflect.Value, path string) {
	a, b = open(a), open(b)
	if a.Type() != b.Type() {
		d.errs = append(d.errs, fmt.Sprintf("%s: type %v vs %v", path, a.Type(), b.Type()))
		return
	}
	switch a.Kind() {
	case reflect.Interface:
		if a.Type() == handlerType || a.Type() == tickerType {
			return
		}
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				d.errs = append(d.errs, path+": nil vs non-nil")
			}
			return
		}
		d.walk(a.Elem(), b.Elem(), path)
	case reflect.Pointer:
		if a.Type() == cacheType {
			if a.Pointer() != b.Pointer() {
				d.errs = append(d.errs, path+": different font caches")
			}
			return
		}
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				d.errs = append(d.errs, path+": nil vs non-nil")
			}
			return
		}
		key := [2]uintptr{a.Pointer(), b.Pointer()}
		if d.seen[key] {
			return
		}
		d.seen[key] = true
		d.walk(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			d.walk(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
		}
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			d.errs = append(d.errs, fmt.Sprintf("%s: length %d vs %d", path, a.Len(), b.Len()))
			return
		}
		for i := 0; i < a.Len(); i++ {
			d.walk(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			d.errs = append(d.errs, fmt.Sprintf("%s: map size %d vs %d", path, a.Len(), b.Len()))
			return
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				d.errs = append(d.errs, fmt.Sprintf("%s: key %v missing", path, k))
				continue
			}
			d.walk(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k))
		}
	case reflect.String:
		if a.String() != b.String() {
			d.strs = append(d.strs, strDiff{path, a.String(), b.String()})
		}
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			d.errs = append(d.errs, fmt.Sprintf("%s: %v vs %v", path, x, y))
		}
	case reflect.Func:
		if a.IsNil() != b.IsNil() {
			d.errs = append(d.errs, path+": func nil vs non-nil")
		}
	case reflect.Chan, reflect.UnsafePointer:
	default:
		if a.Interface() != b.Interface() {
			d.errs = append(d.errs, fmt.Sprintf("%s: %v vs %v", path, a.Interface(), b.Interface()))
		}
	}
}

// labelPath matches the fields that hold labels: the title and axis label
// texts, legend entry texts and the texts of Labels plotters.
var labelPath = regexp.MustCompile(`^(\.Title\.Text|\.[XY]\.Label\.Text|\.Legend\.entries\[\d+\]\.text|\.plotters\[\d+\]\.Labels\[\d+\])$`)

// TestEnglishBanglaDifferOnlyInLabels builds every helper's plot in English
// and in Bangla (with and without Bengali digits) from the same data and
// compares the whole plot structures: data, styles, sizes, ranges, legend
// and plotters must be equal, only label strings may differ, and the tick
// marks must be at the same values.
func TestEnglishBanglaDifferOnlyInLabels(t *testing.T) {
	needFont(t)
	runs := fixtureRuns()
	recs := fixtureBench().Records
	base := atBaselineBatch(recs)
	helpers := []struct {
		name string
		make func(...Option) (*plot.Plot, error)
	}{
		{"LossCurves", func(o ...Option) (*plot.Plot, error) { return LossCurves(runs, o...) }},
		{"LossCurvesLog", func(o ...Option) (*plot.Plot, error) { return LossCurves(runs, append(o, LogY(true))...) }},
		{"SpeedUp", func(o ...Option) (*plot.Plot, error) { return SpeedUp(recs, o...) }},
		{"Throughput", func(o ...Option) (*plot.Plot, error) { return Throughput(recs, o...) }},
		{"Memory", func(o ...Option) (*plot.Plot, error) { return Memory(base, o...) }},
		{"MemoryGrouped", func(o ...Option) (*plot.Plot, error) { return Memory(base, append(o, Grouped(true))...) }},
		{"Utilisation", func(o ...Option) (*plot.Plot, error) { return Utilisation(recs, o...) }},
		{"Bandwidth", func(o ...Option) (*plot.Plot, error) { return Bandwidth(recs, o...) }},
		{"LossScale", func(o ...Option) (*plot.Plot, error) { return LossScale(fixtureScales(), o...) }},
	}
	for _, hp := range helpers {
		for _, digits := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/digits=%v", hp.name, digits), func(t *testing.T) {
				en, err := hp.make()
				if err != nil {
					t.Fatal(err)
				}
				bn, err := hp.make(Lang("bn"), BanglaDigits(digits))
				if err != nil {
					t.Fatal(err)
				}
				d := structDiff{seen: make(map[[2]uintptr]bool)}
				d.walk(reflect.ValueOf(en), reflect.ValueOf(bn), "")
				for _, e := range d.errs {
					// Bangla legend rows are padded by the Bengali descent.
					if strings.HasPrefix(e, ".Legend.Padding: ") {
						continue
					}
					t.Errorf("not a label: %s", e)
				}
				changed := make(map[string]bool)
				for _, s := range d.strs {
					if !labelPath.MatchString(s.path) {
						t.Errorf("string outside the labels differs: %s: %q vs %q", s.path, s.a, s.b)
					}
					changed[s.path] = true
				}
				for _, p := range []string{".Title.Text", ".X.Label.Text", ".Y.Label.Text"} {
					if !changed[p] {
						t.Errorf("%s is the same in both languages", p)
					}
				}
				if _, ok := en.X.Label.TextStyle.Handler.(*TextHandler); ok {
					t.Error("the English plot uses the shaping handler")
				}
				if _, ok := bn.X.Label.TextStyle.Handler.(*TextHandler); !ok {
					t.Error("the Bangla plot does not use the shaping handler")
				}
				if _, ok := bn.Title.TextStyle.Handler.(titleHandler); !ok {
					t.Error("the Bangla plot's title does not use the title handler")
				}
				for _, ax := range []struct {
					name   string
					ea, ba plot.Axis
				}{{"X", en.X, bn.X}, {"Y", en.Y, bn.Y}} {
					et := ax.ea.Tick.Marker.Ticks(ax.ea.Min, ax.ea.Max)
					bt := ax.ba.Tick.Marker.Ticks(ax.ba.Min, ax.ba.Max)
					if len(et) != len(bt) {
						t.Fatalf("%s: %d ticks vs %d", ax.name, len(et), len(bt))
					}
					nominal := ax.name == "X" && hp.name != "LossCurves" && hp.name != "LossCurvesLog" &&
						hp.name != "Throughput" && hp.name != "Utilisation" && hp.name != "LossScale"
					for i := range et {
						if et[i].Value != bt[i].Value {
							t.Errorf("%s tick %d at %v vs %v", ax.name, i, et[i].Value, bt[i].Value)
						}
						want := et[i].Label
						if digits && !nominal {
							want = ToBanglaDigits(want)
						}
						if bt[i].Label != want {
							t.Errorf("%s tick %d label %q, want %q (English %q)", ax.name, i, bt[i].Label, want, et[i].Label)
						}
					}
				}
				t.Logf("%d label strings differ, e.g. title %q vs %q", len(d.strs), en.Title.Text, bn.Title.Text)
			})
		}
	}
}

// TestStructDiffCatches checks that the structure comparison sees data,
// scale and style changes, so that the test above can fail.
func TestStructDiffCatches(t *testing.T) {
	runs := fixtureRuns()
	a, err := LossCurves(runs)
	if err != nil {
		t.Fatal(err)
	}
	changed := fixtureRuns()
	changed[1].Metrics[123].Loss += 1e-9
	cases := []struct {
		name string
		b    func() (*plot.Plot, error)
		want string // a path in the reported differences
	}{
		{"one loss value", func() (*plot.Plot, error) { return LossCurves(changed) }, ".XYs[123].Y"},
		{"log scale", func() (*plot.Plot, error) { return LossCurves(runs, LogY(true)) }, ".Y.Scale"},
		{"smoothing", func() (*plot.Plot, error) { return LossCurves(runs, Smooth(0.5)) }, ".XYs["},
		{"fewer runs", func() (*plot.Plot, error) { return LossCurves(runs[:1]) }, "length"},
	}
	for _, c := range cases {
		b, err := c.b()
		if err != nil {
			t.Fatal(err)
		}
		d := structDiff{seen: make(map[[2]uintptr]bool)}
		d.walk(reflect.ValueOf(a), reflect.ValueOf(b), "")
		found := false
		for _, e := range d.errs {
			if regexp.MustCompile(regexp.QuoteMeta(c.want)).MatchString(e) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no difference at %q reported (got %d: %.3q)", c.name, c.want, len(d.errs), d.errs)
		}
	}
}

// inked reports whether the pixel is darker than light grey (grid lines
// are lighter, and do not count).
func inked(img image.Image, x, y int) bool {
	r, g, b, _ := img.At(x, y).RGBA()
	return r < 0xC000 || g < 0xC000 || b < 0xC000
}

// TestBanglaLayoutOnImage renders Bangla plots and checks on the pixels
// that the title leaves the top row of pixels blank (shaped Bangla rises
// above the font's ascent, and gonum puts the title's box at the edge), and
// that the memory plot's legend rows, spaced by the shaped text's real
// extents, do not touch one another: the legend's text column has one band
// of ink per entry, separated by blank rows.
func TestBanglaLayoutOnImage(t *testing.T) {
	if _, err := sharedHandler(); err != nil {
		t.Fatalf("no Bengali font (scripts/install-test-deps.sh installs fonts-noto-core): %v", err)
	}
	b := fixtureBench()
	mem, err := Memory(b.Records[:1], Lang("bn"), BanglaDigits(true))
	if err != nil {
		t.Fatal(err)
	}
	loss, err := LossCurves(fixtureRuns(), Lang("bn"))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*plot.Plot{"memory": mem, "loss": loss} {
		data, err := renderPNG(p, DefaultWidth, DefaultHeight, ShowScale*vgimg.DefaultDPI)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		bd := img.Bounds()
		for x := bd.Min.X; x < bd.Max.X; x++ {
			if inked(img, x, bd.Min.Y) {
				t.Errorf("%s: the title inks the top row of pixels at x=%d", name, x)
				break
			}
		}
		if name != "memory" {
			continue
		}
		// The legend's thumbnails are the palette's colours; its text starts
		// right of them.
		thumbX, top, bottom := -1, -1, -1
		for y := bd.Min.Y; y < bd.Max.Y/2; y++ {
			for x := bd.Min.X; x < bd.Max.X/2; x++ {
				if c := rgba(img, x, y); c == colorOf(0) || c == colorOf(3) {
					if thumbX < 0 || x < thumbX {
						thumbX = x
					}
					if top < 0 {
						top = y
					}
					bottom = y
				}
			}
		}
		if thumbX < 0 {
			t.Fatal("memory: no legend thumbnail found")
		}
		x0 := thumbX + int(ShowScale*vgimg.DefaultDPI*20/72) + 4 // past the 20 pt thumbnail
		bands, inBand := 0, false
		for y := max(bd.Min.Y, top-20); y <= bottom+20; y++ {
			ink := false
			for x := x0; x < x0+300 && x < bd.Max.X; x++ {
				ink = ink || inked(img, x, y)
			}
			if ink && !inBand {
				bands++
			}
			inBand = ink
		}
		if bands < 4 {
			t.Errorf("memory: the legend's 4 rows of text make %d separate bands of ink; rows touch", bands)
		}
	}
}

func rgba(img image.Image, x, y int) color.RGBA {
	r, g, b, a := img.At(x, y).RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
}
