package lab

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/druto/druto/internal/nblang"
	"github.com/druto/druto/pkg/tensor"
	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
)

// TimeoutEnv overrides how long Check waits for the student's function
// (a Go duration; default DefaultTimeout).
const TimeoutEnv = "DRUTO_LAB_TIMEOUT"

// DefaultTimeout is how long Check waits for one exercise.
const DefaultTimeout = 20 * time.Second

// MIME is the media type of the JSON record each Check adds to the
// notebook's outputs (as a string: GoNB's pipe carries strings); Grade
// reads it back from executed notebooks.
const MIME = "application/vnd.druto.lab+json"

// Exercise is one graded function of a lab: a name and the cases that run
// the student's function against the reference.
type Exercise struct {
	Name  string
	cases []testCase
	// setup, when set, runs before the cases (under the same timeout): a
	// failure ends the exercise there; a skip sets the exercise aside,
	// ungraded, with its line (lab 5's kernel on a machine without a GPU).
	setup func() (skip *label, f *Failure)
	// after, when set, runs once every case has passed and returns a line
	// for the feedback (lab 5's bandwidth against the copy's).
	after func() *label
	// done, when set, runs when the exercise ends (frees what setup took).
	done func()
}

// testCase runs the student's function once and returns nil when its
// outputs match the reference.
type testCase struct {
	what label // the sizes, for the feedback: "N=7, V=33"
	run  func() *Failure
}

// label is a case's description: an English format and its arguments,
// shown in the notebook's language.
type label struct {
	format string
	args   []any
}

func (l label) in(lang string) string { return msg(lang, l.format, l.args...) }

func sizes(names []string, s ...int) label {
	var parts []string
	for i, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.TrimSuffix(n, "+"), s[i]))
	}
	return label{format: strings.Join(parts, ", ")}
}

// Failure is what went wrong in one case: the output, its index and
// values, the error against the tolerance, and a hint key (see hints).
type Failure struct {
	Output    string  `json:"output"`
	Index     string  `json:"index,omitempty"` // "[2,5]"
	Got       float64 `json:"got"`
	Want      float64 `json:"want"`
	Err       float64 `json:"err"`
	Tol       float64 `json:"tol"`
	GotText   string  `json:"got_text,omitempty"`  // an output that is not a number:
	WantText  string  `json:"want_text,omitempty"` // a sequence, a pair, a count
	Hint      string  `json:"hint"`
	Case      string  `json:"case,omitempty"`
	label     label
	Panic     string `json:"panic,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	NotFinite bool   `json:"not_finite,omitempty"`
	// Log is a compiler's or the GPU's message (lab 5's kernel), shown
	// as it is below the feedback.
	Log string `json:"log,omitempty"`
}

// Result is the outcome of one exercise: its score (cases passed of all)
// and the feedback shown.
type Result struct {
	Exercise string   `json:"exercise"`
	Points   int      `json:"points"`
	Max      int      `json:"max"`
	Passed   bool     `json:"passed"`
	Failure  *Failure `json:"failure,omitempty"`
	Feedback string   `json:"feedback"`
	Seconds  float64  `json:"seconds"`
	// Skipped marks an exercise set aside ungraded on this machine (lab
	// 5's kernel where there is no GPU): Max is 0 and Grade leaves it out
	// of the score; Note says why.
	Skipped bool `json:"skipped,omitempty"`
	// Note is a line beside the score, in English (the feedback has it in
	// the notebook's language): why the exercise was skipped, or lab 5's
	// bandwidth.
	Note string `json:"note,omitempty"`
	note *label
}

// Run runs every case of ex (stopping at the first failure, which it
// returns with the score) without showing anything. A panic in the
// student's function becomes a failure with the panic's value; when the
// function has not returned after timeout, Run stops waiting and reports
// it (the goroutine cannot be stopped, and ends with the cell's program).
func Run(ex Exercise, timeout time.Duration) Result {
	start := time.Now()
	res := Result{Exercise: ex.Name, Max: len(ex.cases)}
	type outcome struct {
		passed     int
		f          *Failure
		skip, note *label
	}
	done := make(chan outcome, 1)
	go func() {
		o := outcome{}
		defer func() {
			if r := recover(); r != nil {
				o.f = &Failure{Panic: fmt.Sprint(r) + panicSite(), Hint: "panic"}
				if o.passed < len(ex.cases) {
					o.f.label = ex.cases[o.passed].what
				}
			}
			if ex.done != nil {
				ex.done()
			}
			done <- o
		}()
		if ex.setup != nil {
			if o.skip, o.f = ex.setup(); o.skip != nil || o.f != nil {
				return
			}
		}
		for _, c := range ex.cases {
			if f := c.run(); f != nil {
				if f.label.format == "" {
					f.label = c.what
				}
				o.f = f
				break
			}
			o.passed++
		}
		if o.f == nil && ex.after != nil {
			o.note = ex.after()
		}
	}()
	select {
	case o := <-done:
		res.Points, res.Failure, res.note = o.passed, o.f, o.note
		if o.skip != nil {
			res.Max, res.note, res.Skipped = 0, o.skip, true
		}
	case <-time.After(timeout):
		res.Failure = &Failure{TimedOut: true, Hint: "timeout", Tol: timeout.Seconds()}
	}
	if res.Failure != nil {
		res.Failure.Case = res.Failure.label.in("en")
	}
	if res.note != nil {
		res.Note = res.note.in("en")
	}
	res.Passed = res.Failure == nil && !res.Skipped
	res.Seconds = time.Since(start).Seconds()
	return res
}

// panicSite is the place of the first frame of the stack in the
// student's code (a file outside the Go runtime and this package's own
// files), " (file.go:line)", or " (Func)" in a notebook's main.go.
func panicSite() string {
	_, self, _, _ := runtime.Caller(0)
	own := filepath.Dir(self)
	lines := strings.Split(string(debug.Stack()), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "\t") || i == 0 {
			continue
		}
		loc := strings.TrimSpace(l)
		if k := strings.LastIndex(loc, " +0x"); k > 0 {
			loc = loc[:k]
		}
		file, _, _ := strings.Cut(loc, ":")
		if strings.HasPrefix(file, runtime.GOROOT()) || filepath.Dir(file) == own && !strings.HasSuffix(file, "_test.go") {
			continue
		}
		// GoNB runs a cell as a generated main.go whose lines are not the
		// cell's: there the function's name says more.
		fn, _, _ := strings.Cut(lines[i-1], "(")
		if filepath.Base(file) == "main.go" {
			return " (" + strings.TrimPrefix(fn, "main.") + ")"
		}
		return " (" + filepath.Base(loc) + ")"
	}
	return ""
}

// Check runs ex against the reference and shows the feedback and the
// score line in lang ("en" or "bn"), in the notebook (with a JSON record
// for Grade) or on stdout. It never fails the cell: a wrong, panicking or
// endless function is feedback.
func Check(lang string, ex Exercise) Result {
	res := Run(ex, timeout())
	res.Feedback = Feedback(lang, res)
	show(lang, res)
	return res
}

// timeout is how long a check waits for the student's function:
// TimeoutEnv, else DefaultTimeout.
func timeout() time.Duration {
	if s := os.Getenv(TimeoutEnv); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			return d
		}
	}
	return DefaultTimeout
}

// Feedback is the paragraph Check shows for res, in lang.
func Feedback(lang string, res Result) string {
	f := res.Failure
	switch {
	case res.Skipped:
		return res.note.in(lang)
	case f == nil && res.note != nil:
		return msg(lang, "All %d cases match the reference. Well done!", res.Max) + " " + res.note.in(lang)
	case f == nil:
		return msg(lang, "All %d cases match the reference. Well done!", res.Max)
	}
	var b strings.Builder
	what := f.label.in(lang)
	switch {
	case f.Panic != "":
		b.WriteString(msg(lang, "Your function panicked (%s): %s.", what, f.Panic))
	case f.TimedOut:
		b.WriteString(msg(lang, "Your function did not return within %.0f s: is there a loop that never ends?", f.Tol))
	case f.Hint == "compile":
		b.WriteString(msg(lang, "Your kernel does not compile (%s). NVRTC says:", f.Output))
	case f.Hint == "launch":
		b.WriteString(msg(lang, "With %s, the kernel failed on the GPU:", what))
	case f.Log != "":
		b.WriteString(msg(lang, "Your kernel could not be built or loaded on this GPU:"))
	case f.GotText != "" || f.WantText != "":
		b.WriteString(msg(lang, "With %s, %s%s is %s where the reference has %s.", what, f.Output, f.Index, f.GotText, f.WantText))
	case f.NotFinite:
		b.WriteString(msg(lang, "With %s, %s%s is %v where the reference has %.4g.", what, f.Output, f.Index, f.Got, f.Want))
	default:
		b.WriteString(msg(lang, "With %s, %s%s is %.6g where the reference has %.6g: an error of %.2g against a tolerance of %.2g.",
			what, f.Output, f.Index, f.Got, f.Want, f.Err, f.Tol))
	}
	if f.Log != "" {
		b.WriteString("\n" + f.Log + "\n")
	}
	if h, ok := hints[f.Hint]; ok {
		b.WriteString(" " + msg(lang, "Hint: %s", msg(lang, h)))
	}
	return strings.TrimSpace(b.String())
}

// ScoreLine is the one-line score of res in lang.
func ScoreLine(lang string, res Result) string {
	mark := "✗"
	if res.Passed {
		mark = "✓"
	}
	return fmt.Sprintf("%s %s: %s", mark, res.Exercise, msg(lang, "%d of %d cases", res.Points, res.Max))
}

func show(lang string, res Result) {
	score := ScoreLine(lang, res)
	if res.Skipped {
		score = ""
	}
	if !gonbui.IsNotebook {
		fmt.Println(strings.TrimSpace(res.Feedback + "\n" + score))
		return
	}
	rec, _ := json.Marshal(res)
	color := "#1a7f37"
	switch {
	case res.Skipped:
		color = "#6e7781"
	case !res.Passed:
		color = "#b35900"
	}
	h := fmt.Sprintf(`<div style="border-left:4px solid %s;padding:4px 10px"><p style="white-space:pre-wrap">%s</p><p><b>%s</b></p></div>`,
		color, html.EscapeString(res.Feedback), html.EscapeString(score))
	gonbui.SendData(&protocol.DisplayData{Data: map[protocol.MIMEType]any{
		protocol.MIMETextHTML: h, protocol.MIMETextPlain: strings.TrimSpace(res.Feedback + "\n" + score), MIME: string(rec)}})
	gonbui.Sync()
}

// display shows text as it is (preformatted) in the notebook, or prints
// it.
func display(text string) {
	if !gonbui.IsNotebook {
		fmt.Println(text)
		return
	}
	gonbui.SendData(&protocol.DisplayData{Data: map[protocol.MIMEType]any{
		protocol.MIMETextHTML: "<pre>" + html.EscapeString(text) + "</pre>", protocol.MIMETextPlain: text}})
	gonbui.Sync()
}

// compare holds got to want under the contract's tolerance: element i
// passes when |got-want| <= scale·(atol + rtol·|want|) with fp32's
// atol and rtol (tensor.Tolerance). It returns the worst element's
// failure, nil when every element passes.
func compare(output string, got []float32, want []float64, dims []int, scale float64) *Failure {
	return compareAbs(output, got, want, dims, scale, 1)
}

// compareAbs is compare with the absolute tolerance at the scale abs:
// |got-want| <= scale·(atol·abs + rtol·|want|), for an output whose
// elements sum terms that cancel (the contract's RelNorm, abs its RMS).
func compareAbs(output string, got []float32, want []float64, dims []int, scale, abs float64) *Failure {
	atol, rtol := tensor.Tolerance(tensor.F32)
	atol *= abs
	var worst *Failure
	ratio := 1.0
	for i, w := range want {
		g := float64(got[i])
		tol := scale * (atol + rtol*math.Abs(w))
		d := math.Abs(g - w)
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return &Failure{Output: output, Index: index(i, dims), Got: g, Want: w, Err: math.Inf(1), Tol: tol, NotFinite: true}
		}
		if d > tol && d/tol > ratio {
			ratio = d / tol
			worst = &Failure{Output: output, Index: index(i, dims), Got: g, Want: w, Err: d, Tol: tol}
		}
	}
	return worst
}

// matches reports whether got is explained by a mistake's model: closer
// to it, everywhere, than a twentieth of got's worst distance from the
// reference want (the model is float64 and need not round as the
// student's float32 code does, and the scale of each output differs).
func matches(got []float32, model, want []float64) bool {
	if len(got) != len(model) || len(got) != len(want) {
		return false
	}
	worst, off := 0.0, 0.0
	for i, m := range model {
		g := float64(got[i])
		if math.IsNaN(g) != math.IsNaN(m) {
			return false
		}
		if !math.IsNaN(g) {
			off = max(off, math.Abs(g-m))
			worst = max(worst, math.Abs(g-want[i]))
		}
	}
	return off <= worst/20
}

// index writes flat index i of a tensor of dims as "[a,b]".
func index(i int, dims []int) string {
	if len(dims) == 0 {
		return fmt.Sprintf("[%d]", i)
	}
	idx := make([]string, len(dims))
	for k := len(dims) - 1; k >= 0; k-- {
		idx[k] = fmt.Sprint(i % dims[k])
		i /= dims[k]
	}
	return "[" + strings.Join(idx, ",") + "]"
}

func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Lang returns the lab notebook's language, "en" or "bn", by nbui.Lang's
// rule ($DRUTO_LANG, the notebook's metadata or name, its folder's name),
// without the weight of importing nbui into every cell's program.
func Lang() string { return nblang.Lang() }
