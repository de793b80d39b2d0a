package notebooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/druto/druto/nbui"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/train"
)

// Names are the notebooks, in the order a reader goes through them.
var names = []string{"01-build", "02-detect", "03-train", "04-benchmark", "05-gpt2"}

// langs are the notebook folders.
var langs = []string{"en", "bn"}

// Tags on code cells that the execution test checks.
const (
	tagPlot          = "plot"            // must display an image
	tagPlotIfResults = "plot-if-results" // displays images iff bench/results has benchmark reports
)

// Environment variables of the test.
const (
	// modeEnv: "require" makes a missing Jupyter or GoNB a failure instead
	// of a skip (.ci/run sets it); "off" skips the execution test.
	modeEnv = "DRUTO_NOTEBOOK_TESTS"
	// limitEnv is the longest one cell may run before the test calls it
	// hung, as a Go duration (default 10m). It is a hang guard, not a speed
	// check: each notebook's time is logged, and the README reports them.
	limitEnv = "DRUTO_NOTEBOOK_LIMIT"
	// keepEnv names a folder to keep the executed notebooks and their runs in
	// (default: a temporary folder, removed after the test).
	keepEnv = "DRUTO_NOTEBOOK_OUT"
)

type notebook struct {
	Cells    []cell `json:"cells"`
	Metadata struct {
		Kernelspec struct {
			Name string `json:"name"`
		} `json:"kernelspec"`
	} `json:"metadata"`
}

type cell struct {
	ID       string `json:"id"`
	Type     string `json:"cell_type"`
	Source   text   `json:"source"`
	Metadata struct {
		Tags []string `json:"tags"`
	} `json:"metadata"`
	Outputs        []output `json:"outputs"`
	ExecutionCount *int     `json:"execution_count"`
}

type output struct {
	Type      string                     `json:"output_type"`
	Name      string                     `json:"name"` // stream: stdout or stderr
	Text      text                       `json:"text"`
	Data      map[string]json.RawMessage `json:"data"`
	Ename     string                     `json:"ename"`
	Evalue    string                     `json:"evalue"`
	Traceback []string                   `json:"traceback"`
}

// text is a notebook string: one string or a list of lines.
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = text(s)
		return nil
	}
	var lines []string
	if err := json.Unmarshal(b, &lines); err != nil {
		return err
	}
	*t = text(strings.Join(lines, ""))
	return nil
}

func readNotebook(t *testing.T, path string) notebook {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var nb notebook
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return nb
}

func codeCells(nb notebook) []cell {
	var out []cell
	for _, c := range nb.Cells {
		if c.Type == "code" {
			out = append(out, c)
		}
	}
	return out
}

func hasTag(c cell, tag string) bool { return slices.Contains(c.Metadata.Tags, tag) }

func hasBengali(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Bengali, r) {
			return true
		}
	}
	return false
}

// TestNotebooksPaired checks the committed notebooks without running them:
// both languages have every notebook, with the same code cells (source and
// tags) in the same order, Bangla prose in every Bangla markdown cell, no
// committed outputs, the GoNB kernel, no hard-coded checkout path, and a
// tag on every cell that shows a plot.
func TestNotebooksPaired(t *testing.T) {
	for _, lang := range langs {
		if base := notebookNames(t, lang); !slices.Equal(base, names) {
			t.Errorf("%s/ holds %v, want %v", lang, base, names)
		}
	}
	for _, name := range names {
		en := readNotebook(t, filepath.Join("en", name+".ipynb"))
		bn := readNotebook(t, filepath.Join("bn", name+".ipynb"))
		ec, bc := codeCells(en), codeCells(bn)
		if len(ec) != len(bc) {
			t.Errorf("%s: %d code cells in en, %d in bn", name, len(ec), len(bc))
			continue
		}
		for i := range ec {
			// A cell shows one step; what it needs beyond that belongs in
			// the library (train.Recipe, nbui), not in the notebook.
			if n := strings.Count(strings.TrimRight(string(ec[i].Source), "\n"), "\n") + 1; n > maxCellLines {
				t.Errorf("%s: code cell %d has %d lines; keep every code cell at %d or fewer", name, i+1, n, maxCellLines)
			}
			if ec[i].Source != bc[i].Source {
				t.Errorf("%s: code cell %d differs between en and bn:\n--- en\n%s\n--- bn\n%s", name, i+1, ec[i].Source, bc[i].Source)
			}
			if !slices.Equal(ec[i].Metadata.Tags, bc[i].Metadata.Tags) {
				t.Errorf("%s: code cell %d has tags %v in en, %v in bn", name, i+1, ec[i].Metadata.Tags, bc[i].Metadata.Tags)
			}
		}
		for lang, nb := range map[string]notebook{"en": en, "bn": bn} {
			if k := nb.Metadata.Kernelspec.Name; k != "gonb" {
				t.Errorf("%s/%s: kernel %q, want gonb", lang, name, k)
			}
			for i, c := range nb.Cells {
				if len(c.Outputs) > 0 || c.ExecutionCount != nil {
					t.Errorf("%s/%s: cell %d has committed outputs; strip them (CI executes the notebooks)", lang, name, i+1)
				}
				if strings.Contains(string(c.Source), "/work/") {
					t.Errorf("%s/%s: cell %d hard-codes a checkout path", lang, name, i+1)
				}
				if c.Type == "markdown" && lang == "bn" && !hasBengali(string(c.Source)) {
					t.Errorf("bn/%s: markdown cell %d has no Bangla:\n%s", name, i+1, c.Source)
				}
				if c.Type == "code" && strings.Contains(string(c.Source), "plotting.Show(") &&
					!hasTag(c, tagPlot) && !hasTag(c, tagPlotIfResults) {
					t.Errorf("%s/%s: cell %d shows a plot but is not tagged %q or %q", lang, name, i+1, tagPlot, tagPlotIfResults)
				}
			}
		}
		if len(ec) < 2 || !strings.Contains(string(ec[0].Source), "go work use") || !strings.Contains(string(ec[0].Source), "DRUTO_REPO") {
			t.Errorf("%s: the first code cell must point the Go workspace at $DRUTO_REPO (or ../..)", name)
		}
	}
}

// notebookNames lists the notebooks in dir, without the .ipynb.
func notebookNames(t *testing.T, dir string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "*.ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, g := range got {
		base = append(base, strings.TrimSuffix(filepath.Base(g), ".ipynb"))
	}
	return base
}

// maxCellLines is the most lines a code cell may have.
const maxCellLines = 15

// Literal English strings that code cells hand to nbui to show.
var (
	sentenceRE = regexp.MustCompile(`(?:Note|Sprintf)\(lang, "([^"]*)"|WithCaption\("([^"]*)"`)
	headersRE  = regexp.MustCompile(`NewTable\(lang((?:, "[^"]*")+)\)`)
	stringRE   = regexp.MustCompile(`"([^"]*)"`)
	letters    = regexp.MustCompile(`[A-Za-z]{2,}`)
)

// TestNotebookStringsHaveBangla checks that every header, caption and note
// the notebooks show through nbui has a Bangla translation, so that no
// English leaks into the Bangla notebooks' outputs.
func TestNotebookStringsHaveBangla(t *testing.T) {
	found := 0
	for _, name := range names {
		for _, c := range codeCells(readNotebook(t, filepath.Join("en", name+".ipynb"))) {
			src := string(c.Source)
			var lits []string
			for _, m := range sentenceRE.FindAllStringSubmatch(src, -1) {
				lits = append(lits, m[1]+m[2])
			}
			for _, m := range headersRE.FindAllStringSubmatch(src, -1) {
				for _, h := range stringRE.FindAllStringSubmatch(m[1], -1) {
					lits = append(lits, h[1])
				}
			}
			for _, l := range lits {
				found++
				if letters.MatchString(l) && nbui.Sprintf("bn", l) == l {
					t.Errorf("%s: %q has no Bangla in nbui/messages.go", name, l)
				}
			}
		}
	}
	if found < 20 {
		t.Errorf("found only %d strings in the notebooks; the patterns no longer match the cells", found)
	}
}

// tools finds jupyter and gonb, or says what is missing.
func tools() (jupyter string, missing string) {
	jupyter, err := exec.LookPath("jupyter")
	if err != nil {
		return "", "jupyter is not on PATH"
	}
	if _, err := exec.LookPath("gonb"); err != nil {
		return "", "gonb is not on PATH"
	}
	out, err := exec.Command(jupyter, "kernelspec", "list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "gonb") {
		return "", "the gonb kernel is not installed in Jupyter (gonb --install)"
	}
	return jupyter, ""
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// kernelEnv is the environment nbconvert and the GoNB kernel run in: the
// kernel spec has an empty env, so the kernel inherits this one, with Go's
// bin folders on PATH.
func kernelEnv(t *testing.T, repo, outDir string) []string {
	gopath := goEnv(t, "GOPATH")
	set := map[string]string{
		"PATH":       strings.Join([]string{filepath.Join(gopath, "bin"), filepath.Join(goEnv(t, "GOROOT"), "bin"), os.Getenv("PATH")}, string(os.PathListSeparator)),
		"GOPATH":     gopath,
		"GOCACHE":    goEnv(t, "GOCACHE"),
		"GOMODCACHE": goEnv(t, "GOMODCACHE"),
		nbui.RepoEnv: repo,
		nbui.OutEnv:  outDir,
	}
	if os.Getenv("HOME") == "" {
		set["HOME"] = t.TempDir()
	}
	// The notebooks train the same on every CPU that tests them (the
	// browser test's golden loss figure follows the run's losses, its axis
	// labels with them): the AVX2 kernels, which AVX-512 CPUs also run and
	// AVX2-only ones run anyway, and so fp32 from train.AutoPolicy, which
	// picks bf16 only where the CPU multiplies it natively and it measures
	// faster. A caller's DRUTO_CPU_ISA still wins.
	if os.Getenv(cpu.EnvISA) == "" {
		set[cpu.EnvISA] = "avx2"
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		// The notebook picks its language from its folder and makes its own
		// go.work: a caller's DRUTO_LANG or GOWORK must not leak in.
		if _, ok := set[k]; ok || k == nbui.LangEnv || k == "GOWORK" {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// sharedOut is the default folder TestExecute writes executed notebooks
// to; it lives as long as the test binary, so that TestPublishedHTML
// (web_test.go) can publish them instead of executing them again.
var sharedOut string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "druto-notebooks-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedOut = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// executed records where TestExecute wrote the notebooks it executed and
// checked ("lang/name").
var executed struct {
	sync.Mutex
	root string
	ok   map[string]bool
}

func markExecuted(root, nb string) {
	executed.Lock()
	defer executed.Unlock()
	if executed.root != root {
		executed.root, executed.ok = root, map[string]bool{}
	}
	executed.ok[nb] = true
}

// executedAll returns the folder TestExecute wrote every notebook to, if it
// executed and checked all of them in this run.
func executedAll() (string, bool) {
	executed.Lock()
	defer executed.Unlock()
	for _, lang := range langs {
		for _, name := range names {
			if !executed.ok[lang+"/"+name] {
				return "", false
			}
		}
	}
	return executed.root, true
}

// TestExecute runs every notebook top to bottom with Jupyter's nbconvert
// and the GoNB kernel, and checks what it showed: no error output (GoNB
// reports a panic or a non-zero exit only as a stderr stream), every code
// cell executed with some output, an image from every plot cell, Bangla
// in the Bangla notebooks' outputs, the checkpoint and benchmark files the
// notebooks write; it logs the time each took.
func TestExecute(t *testing.T) {
	mode := os.Getenv(modeEnv)
	if mode == "off" {
		t.Skipf("%s=off", modeEnv) // skip: an opt-out (=off)
	}
	jupyter, missing := tools()
	if missing != "" {
		msg := missing + "; install the notebook stack with scripts/install-test-deps.sh and put $(go env GOPATH)/bin on PATH"
		if mode == "require" {
			t.Fatalf("%s=require: %s", modeEnv, msg)
		}
		t.Skip(msg) // require: DRUTO_NOTEBOOK_TESTS
	}
	if testing.Short() && mode != "require" {
		t.Skip("-short: not executing the notebooks") // skip: -short
	}
	limit := 10 * time.Minute
	if s := os.Getenv(limitEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", limitEnv, s, err)
		}
		limit = d
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	res, err := nbui.FindResults(repo)
	if err != nil {
		t.Fatal(err)
	}
	outRoot := os.Getenv(keepEnv)
	if outRoot == "" {
		outRoot = sharedOut
	}
	var timings []string
	for _, lang := range langs {
		for _, name := range names {
			t.Run(lang+"/"+name, func(t *testing.T) {
				// Two minutes is more than any notebook took here; with less
				// left, the test binary's deadline would kill the run midway.
				if dl, ok := t.Deadline(); ok && time.Until(dl) < 2*time.Minute {
					t.Fatalf("only %v left before the test binary's deadline; run with a longer -timeout (scripts/test.sh uses 60m)", time.Until(dl).Round(time.Second))
				}
				// Twice in a row, as a student presses Run All again: the
				// second run finds the first one's files and must show the
				// same outputs (each cell that writes a run says whether it
				// starts fresh or resumes). The second run is the one kept.
				runDir := filepath.Join(outRoot, lang, "runs")
				took1, nb1 := execute(t, jupyter, repo, lang, name, runDir, filepath.Join(outRoot, "first-run", lang), limit)
				checkOutputs(t, nb1, lang, name, len(res.Bench) > 0)
				first := runSummary(t, name, runDir)
				took2, nb := execute(t, jupyter, repo, lang, name, runDir, filepath.Join(outRoot, lang), limit)
				timings = append(timings, fmt.Sprintf("%s/%s %.1fs + %.1fs", lang, name, took1.Seconds(), took2.Seconds()))
				checkOutputs(t, nb, lang, name, len(res.Bench) > 0)
				sameOutputs(t, nb1, nb, lang+"/"+name)
				checkFiles(t, name, runDir)
				if again := runSummary(t, name, runDir); again != first {
					t.Errorf("%s/%s: the second Run All left %q, the first %q", lang, name, again, first)
				}
				if lang == "bn" {
					checkNoEnglish(t, nb, name)
				}
				if !t.Failed() {
					markExecuted(outRoot, lang+"/"+name)
				}
			})
		}
	}
	t.Logf("notebook timings: %s", strings.Join(timings, ", "))
}

// execute runs one notebook and returns how long it took and the executed
// notebook.
func execute(t *testing.T, jupyter, repo, lang, name, runDir, outDir string, limit time.Duration) (time.Duration, notebook) {
	t.Helper()
	in, err := filepath.Abs(filepath.Join(lang, name+".ipynb"))
	if err != nil {
		t.Fatal(err)
	}
	// A minute beyond the per-cell guard for kernel start-up and shutdown,
	// but never past the test binary's deadline (less 20 s to report), so
	// that a hung notebook fails with its log rather than a kill.
	wait := limit + time.Minute
	if dl, ok := t.Deadline(); ok {
		wait = min(wait, time.Until(dl)-20*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, jupyter, "nbconvert", "--config", strictConfig(t), "--to", "notebook", "--execute",
		"--ExecutePreprocessor.kernel_name=gonb",
		fmt.Sprintf("--ExecutePreprocessor.timeout=%d", int(limit.Seconds())),
		"--output-dir", outDir, "--output", name, in)
	cmd.Dir = filepath.Dir(in) // the kernel starts here: GoNB's GONB_DIR, so the language is the folder's
	cmd.Env = kernelEnv(t, repo, runDir)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("nbconvert %s/%s: %v after %v\n%s", lang, name, err, took.Round(time.Second), tail(log.String(), 4000))
	}
	return took, readNotebook(t, filepath.Join(outDir, name+".ipynb"))
}

// strictConfig is the nbconvert configuration that fails the execution at a
// cell whose program fails (GoNB reports that only as a stderr stream).
func strictConfig(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("strict.py")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// digitsRE matches a run of digits, Latin or Bangla, with decimal points.
var digitsRE = regexp.MustCompile(`[0-9০-৯]+(?:[.,][0-9০-৯]+)*`)

// peakRE matches the dtype in the note on how MFU's peak was measured
// (nbui.PeakNote): the fastest GEMM of the moment, fp32 or bf16, is a
// measurement like the times, and may differ between runs.
var peakRE = regexp.MustCompile(`(measured|মাপা) \S+ (matmul|ম্যাটমুল)`)

// masked is s with what differs between two runs of a notebook masked:
// numbers, the peak's dtype, runs of spaces.
func masked(s string) string {
	s = peakRE.ReplaceAllString(s, "$1 _ $2")
	return spacesRE.ReplaceAllString(digitsRE.ReplaceAllString(s, "0"), " ")
}

// outputShape is what a run of a cell showed, masked (times, throughput
// and the peak's dtype differ between runs, and with them the columns'
// widths; the structure, the words and the files named must not): one line per output, consecutive stream
// chunks joined (GoNB splits them where the pipe happened to).
func outputShape(c cell) []string {
	var lines []string
	lastStream := ""
	for _, o := range c.Outputs {
		if o.Type == "stream" {
			txt := masked(string(o.Text))
			if lastStream == o.Name && len(lines) > 0 {
				lines[len(lines)-1] += txt
			} else {
				lines = append(lines, "stream "+o.Name+": "+txt)
			}
			lastStream = o.Name
			continue
		}
		lastStream = ""
		var mimes []string
		for m := range o.Data {
			mimes = append(mimes, m)
		}
		slices.Sort(mimes)
		var plain string
		if raw, ok := o.Data["text/plain"]; ok {
			var tx text
			if json.Unmarshal(raw, &tx) == nil {
				plain = masked(string(tx))
			}
		}
		lines = append(lines, o.Type+" "+strings.Join(mimes, ",")+": "+plain)
	}
	return lines
}

// sameOutputs checks that a second run of a notebook showed what the first
// did, cell by cell.
func sameOutputs(t *testing.T, a, b notebook, where string) {
	t.Helper()
	ca, cb := codeCells(a), codeCells(b)
	if len(ca) != len(cb) {
		t.Fatalf("%s: %d code cells, then %d", where, len(ca), len(cb))
	}
	for i := range ca {
		sa, sb := outputShape(ca[i]), outputShape(cb[i])
		if !slices.Equal(sa, sb) {
			t.Errorf("%s code cell %d (%s) showed other outputs the second time:\n--- first\n%s\n--- second\n%s",
				where, i+1, firstLine(string(ca[i].Source)), strings.Join(sa, "\n"), strings.Join(sb, "\n"))
		}
	}
}

// runSummary is what a notebook's run left that a second run must leave
// the same: for 03-train, its steps and final losses (a run appended to the
// first would show more steps).
func runSummary(t *testing.T, name, runDir string) string {
	t.Helper()
	if name != "03-train" {
		return ""
	}
	ms, err := train.ReadMetricsFile(filepath.Join(runDir, name, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return "no steps"
	}
	last := ms[len(ms)-1]
	return fmt.Sprintf("%d records, last step %d, loss %.3f, validation loss %.3f", len(ms), last.Step, last.Loss, last.ValLoss)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// images counts the image outputs of a cell.
func images(c cell) int {
	n := 0
	for _, o := range c.Outputs {
		if o.Type != "display_data" && o.Type != "execute_result" {
			continue
		}
		for _, mime := range []string{"image/svg+xml", "image/png"} {
			if raw, ok := o.Data[mime]; ok && len(raw) > 100 {
				n++
			}
		}
	}
	return n
}

func checkOutputs(t *testing.T, nb notebook, lang, name string, benchResults bool) {
	t.Helper()
	bengali := false
	for i, c := range codeCells(nb) {
		where := fmt.Sprintf("%s/%s code cell %d (%s)", lang, name, i+1, firstLine(string(c.Source)))
		if c.ExecutionCount == nil {
			t.Errorf("%s was not executed", where)
		}
		// A cell of declarations only (no %% main part: the imports and the
		// recipe a notebook's later cells share) has nothing to show.
		if len(c.Outputs) == 0 && strings.Contains(string(c.Source), "%%") {
			t.Errorf("%s showed nothing (every cell of these notebooks with a %%%% part shows something; an output may have been lost)", where)
		}
		for _, o := range c.Outputs {
			switch {
			case o.Type == "error":
				t.Errorf("%s: error %s: %s\n%s", where, o.Ename, o.Evalue, strings.Join(o.Traceback, "\n"))
			case o.Type == "stream" && o.Name == "stderr":
				s := string(o.Text)
				if strings.Contains(s, "panic:") || strings.Contains(s, "exit status") || strings.Contains(strings.ToLower(s), "error") {
					t.Errorf("%s wrote an error:\n%s", where, s)
				}
			}
			for mime, raw := range o.Data {
				if strings.HasPrefix(mime, "text/") && hasBengali(string(raw)) {
					bengali = true
				}
			}
		}
		n := images(c)
		switch {
		case hasTag(c, tagPlot) && n == 0:
			t.Errorf("%s is a plot cell but displayed no image", where)
		case hasTag(c, tagPlotIfResults) && benchResults && n == 0:
			t.Errorf("%s displayed no image although bench/results has benchmark reports", where)
		case hasTag(c, tagPlotIfResults) && !benchResults && n > 0:
			t.Errorf("%s displayed %d images although bench/results has no benchmark report", where, n)
		}
	}
	if lang == "bn" && !bengali {
		t.Errorf("bn/%s: no output is in Bangla", name)
	}
}

// checkFiles checks what a notebook leaves in its run folder.
func checkFiles(t *testing.T, name, runDir string) {
	t.Helper()
	switch name {
	case "03-train":
		dir := filepath.Join(runDir, "03-train")
		cfg, params, err := train.LoadModel(filepath.Join(dir, train.ModelFile))
		if err != nil {
			t.Fatalf("the trained checkpoint: %v", err)
		}
		if len(params) != cfg.NumParams() {
			t.Errorf("checkpoint holds %d parameters, its config says %d", len(params), cfg.NumParams())
		}
		ms, err := train.ReadMetricsFile(filepath.Join(dir, train.MetricsFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatal("03-train logged no metrics")
		}
		if ms[len(ms)-1].ValLoss == 0 || ms[len(ms)-1].ValLoss > ms[0].Loss-2 {
			t.Errorf("training did not learn: first loss %v, last %+v", ms[0].Loss, ms[len(ms)-1])
		}
		for _, f := range []string{train.StateFile, "loss.svg"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("03-train left no %s: %v", f, err)
			}
		}
	case "05-gpt2":
		// The fine-tuned model (GPT-2's shape, or the small GPT-2 the
		// notebook built without a network) and one metrics line a step.
		dir := filepath.Join(runDir, "05-gpt2", "finetune")
		ck, err := train.LoadCheckpoint(filepath.Join(dir, train.ModelFile))
		if err != nil {
			t.Fatalf("the fine-tuned checkpoint: %v", err)
		}
		if ck.Tokenizer == nil || ck.Tokenizer.Name() != "gpt2" || ck.Config.Vocab != train.PaddedVocab(50257) {
			t.Errorf("fine-tuned model %v with tokenizer %v, want GPT-2's", ck.Config, ck.Tokenizer)
		}
		ms, err := train.ReadMetricsFile(filepath.Join(dir, train.MetricsFile))
		if err != nil || len(ms) != 30 || !(ms[len(ms)-1].Loss < ms[0].Loss) {
			t.Errorf("fine-tuning metrics: %d lines, %v; want 30 with the loss falling", len(ms), err)
		}
	case "04-benchmark":
		rep, err := bench.Load(filepath.Join(runDir, "04-benchmark", "here.json"))
		if err != nil {
			t.Fatal(err)
		}
		baselines := 0
		for _, r := range rep.Records {
			if r.StepMs <= 0 || r.TokensPerS <= 0 {
				t.Errorf("record %+v has no timing", r)
			}
			if r.Baseline {
				baselines++
			}
		}
		if len(rep.Records) != 12 || baselines != 1 {
			t.Errorf("benchmark report has %d records and %d baselines, want 12 (4 modes x 3 batches) and 1", len(rep.Records), baselines)
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// verbRE matches a fmt verb in a catalogue format.
var verbRE = regexp.MustCompile(`%(\[\d+\])?[-+# 0-9.]*(\[\d+\])?[a-zA-Z%]`)

// catalogueEnglish returns what of nbui's catalogue must not appear in a
// Bangla output: its one-word English texts (labels such as "decomposed",
// "loss", "step"), and the literal fragments of two words or more of the
// other texts (between their fmt verbs: an untranslated sentence or
// header). Words a Bangla text keeps too (AdamW, NVRTC, druto) are left out.
func catalogueEnglish() (words map[string]bool, fragments []string) {
	kept := map[string]bool{}
	for _, en := range nbui.English() {
		for _, w := range letters.FindAllString(verbRE.ReplaceAllString(nbui.Sprintf("bn", en), " "), -1) {
			kept[w] = true
		}
	}
	words = map[string]bool{}
	for _, en := range nbui.English() {
		if letters.FindString(en) == en && len(en) >= 3 {
			if !kept[en] {
				words[en] = true
			}
			continue
		}
		for _, f := range verbRE.Split(en, -1) {
			f = strings.TrimSpace(f)
			if len(letters.FindAllString(f, -1)) >= 2 && len(f) >= 8 && nbui.Sprintf("bn", en) != en {
				fragments = append(fragments, f)
			}
		}
	}
	return words, fragments
}

var (
	tagRE    = regexp.MustCompile(`<[^>]*>`)
	quotedRE = regexp.MustCompile(`"[^"\n]*"`)
	tokenRE  = regexp.MustCompile(`[A-Za-z0-9_./\-:@]+`)
	spacesRE = regexp.MustCompile(`[ \t]+`)
)

// englishIn returns the catalogue's English in s, text a reader sees (tags
// stripped; a quoted message of another program, such as a compiler's, is
// shown as it is): a one-word label as a whole word, not part of a name
// with digits, dots, slashes or underscores (layernorm_forward, fp32, a
// path), or a fragment of a sentence.
func englishIn(s string, words map[string]bool, fragments []string) []string {
	s = quotedRE.ReplaceAllString(html.UnescapeString(tagRE.ReplaceAllString(s, " ")), `""`)
	var found []string
	for _, tok := range tokenRE.FindAllString(s, -1) {
		if letters.FindString(tok) == tok && words[tok] && !slices.Contains(found, tok) {
			found = append(found, tok)
		}
	}
	flat := spacesRE.ReplaceAllString(s, " ")
	for _, f := range fragments {
		if containsWords(flat, f) && !slices.Contains(found, f) {
			found = append(found, f)
		}
	}
	return found
}

// containsWords reports whether f occurs in s on its own, not inside a
// name or a path (speed-up.svg, /runs/speed-up/).
func containsWords(s, f string) bool {
	inName := func(r byte) bool {
		return r < 0x80 && (r == '_' || r == '.' || r == '/' || r == '-' || r == '@' || letters.MatchString(string(r)) || r >= '0' && r <= '9')
	}
	for i := 0; ; {
		j := strings.Index(s[i:], f)
		if j < 0 {
			return false
		}
		a, b := i+j, i+j+len(f)
		// A full stop ends a sentence unless a name goes on after it (.svg).
		end := b == len(s) || !inName(s[b]) || s[b] == '.' && (b+1 == len(s) || !inName(s[b+1]))
		if (a == 0 || !inName(s[a-1])) && end {
			return true
		}
		i = a + 1
	}
}

// checkNoEnglish fails when what a Bangla notebook displayed (tables, notes,
// the progress display, figure titles) holds an English word of the
// catalogue: every such string must come out in Bangla. Program output
// printed to a stream (JSON, the model's samples) is not checked.
func checkNoEnglish(t *testing.T, nb notebook, name string) {
	t.Helper()
	words, fragments := catalogueEnglish()
	for i, c := range codeCells(nb) {
		for _, o := range c.Outputs {
			for _, mime := range []string{"text/html", "text/plain"} {
				raw, ok := o.Data[mime]
				if !ok {
					continue
				}
				var tx text
				if json.Unmarshal(raw, &tx) != nil {
					continue
				}
				if en := englishIn(string(tx), words, fragments); len(en) > 0 {
					t.Errorf("bn/%s code cell %d (%s) shows English %q from the catalogue:\n%s", name, i+1, firstLine(string(c.Source)), en, tail(string(tx), 600))
				}
			}
		}
	}
}

func TestMasked(t *testing.T) {
	a := masked("MFU is measured against 12.5 GFLOP/s (measured bf16 matmul 512^3 on this device).  x")
	b := masked("MFU is measured against 9.0 GFLOP/s (measured f32 matmul 1024^3 on this device). x")
	if a != b {
		t.Errorf("masked: %q vs %q", a, b)
	}
	if masked("fused+bf16 12 ms") == masked("decomposed+bf16 12 ms") {
		t.Error("masked hides words")
	}
}

func TestCatalogueEnglish(t *testing.T) {
	words, fragments := catalogueEnglish()
	for _, w := range []string{"decomposed", "fused", "baseline"} {
		if !words[w] {
			t.Errorf("%q is not among the catalogue's English words", w)
		}
	}
	for _, w := range []string{"AdamW", "NVRTC", "druto"} {
		if words[w] {
			t.Errorf("%q is kept in Bangla too, so it must not count as English", w)
		}
	}
	if !slices.Contains(fragments, "within the fp32 tolerance") {
		t.Errorf("fragments lack a sentence of the catalogue: %q", fragments[:min(5, len(fragments))])
	}
	got := englishIn(`<td>ফিউজড+bf16</td><td>layernorm_forward</td><td>/tmp/a/baseline.json</td><td>decomposed+fp32</td>`+
		`<p>within the   fp32 tolerance</p><td>"fused attention"</td><p>/tmp/runs/speed-up.svg, a speed-up.</p>`, words, fragments)
	slices.Sort(got) // the words found, in any order
	if !slices.Equal(got, []string{"decomposed", "speed-up", "within the fp32 tolerance"}) {
		t.Errorf("englishIn = %q, want [decomposed, within the fp32 tolerance, speed-up]", got)
	}
}

// setupCommand is the shell command of the notebooks' first cell, as GoNB
// runs it (continued lines joined).
func setupCommand(t *testing.T) string {
	t.Helper()
	src := string(codeCells(readNotebook(t, filepath.Join("en", names[0]+".ipynb")))[0].Source)
	cmd, _, ok := strings.Cut(src, "\n%goworkfix")
	if !ok || !strings.HasPrefix(cmd, "!*") {
		t.Fatalf("the first cell is not a !* command followed by %%goworkfix:\n%s", src)
	}
	return strings.ReplaceAll(strings.TrimPrefix(cmd, "!*"), "\\\n", " ")
}

// TestSetupCellFindsDruto runs the first cell's command as GoNB would (in
// the kernel's module folder) from three places: a notebook folder inside
// the checkout, any folder with $DRUTO_REPO, and a folder outside any
// checkout with no module proxy (a one-line message, no go.work).
func TestSetupCellFindsDruto(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := setupCommand(t)
	elsewhere := t.TempDir()
	for _, c := range []struct{ gonbDir, drutoRepo, want string }{
		{filepath.Join(repo, "notebooks", "bn"), "", repo},
		{filepath.Join(repo, "kernels"), "", repo}, // any depth inside the checkout
		{elsewhere, repo, repo},
		{elsewhere, "", ""},
	} {
		mod := t.TempDir()
		if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module gonb_test\n\ngo 1.24\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sh := exec.Command("bash", "-c", cmd)
		sh.Dir = mod
		var env []string
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != nbui.RepoEnv && k != "GONB_DIR" && k != "GOPROXY" && k != "GOWORK" {
				env = append(env, kv)
			}
		}
		sh.Env = append(env, "GONB_DIR="+c.gonbDir, nbui.RepoEnv+"="+c.drutoRepo, "GOPROXY=off", "GOFLAGS=-mod=mod")
		out, _ := sh.CombinedOutput()
		work, werr := os.ReadFile(filepath.Join(mod, "go.work"))
		switch {
		case c.want == "" && (werr == nil || !strings.Contains(string(out), "DRUTO_REPO")):
			t.Errorf("outside a checkout: go.work %q, output %q; want no go.work and a message naming DRUTO_REPO", work, out)
		case c.want != "" && (werr != nil || !strings.Contains(string(work), c.want)):
			t.Errorf("GONB_DIR=%s DRUTO_REPO=%q: go.work %q (%v), output %q; want it to use %s", c.gonbDir, c.drutoRepo, work, werr, out, c.want)
		}
	}
}

// TestFailingCellFailsExecution executes a notebook of one's own, outside
// the checkout's notebook folders (found through $DRUTO_REPO, Bangla from
// its metadata), whose third cell fails: nbconvert with strict.py must exit
// non-zero, name the failure, and not run the cell after it.
func TestFailingCellFailsExecution(t *testing.T) {
	mode := os.Getenv(modeEnv)
	if mode == "off" {
		t.Skipf("%s=off", modeEnv) // skip: an opt-out (=off)
	}
	jupyter, missing := tools()
	if missing != "" {
		if mode == "require" {
			t.Fatalf("%s=require: %s", modeEnv, missing)
		}
		t.Skip(missing) // require: DRUTO_NOTEBOOK_TESTS
	}
	if testing.Short() && mode != "require" {
		t.Skip("-short: not executing notebooks") // skip: -short
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := readNotebook(t, filepath.Join("en", names[0]+".ipynb"))
	setup := codeCells(src)[:2]
	type jcell struct {
		Type     string         `json:"cell_type"`
		Source   string         `json:"source"`
		Metadata map[string]any `json:"metadata"`
		Outputs  []any          `json:"outputs"`
		Count    *int           `json:"execution_count"`
	}
	cells := []jcell{}
	for _, s := range []string{string(setup[0].Source), string(setup[1].Source),
		"%%\ncheck(fmt.Errorf(\"deliberate failure (%s): %s\", lang, nbui.Sprintf(lang, \"yes\")))",
		"%%\nfmt.Println(\"not reached\")"} {
		cells = append(cells, jcell{Type: "code", Source: s, Metadata: map[string]any{}, Outputs: []any{}})
	}
	nb := map[string]any{"nbformat": 4, "nbformat_minor": 5, "cells": cells, "metadata": map[string]any{
		"kernelspec": map[string]string{"name": "gonb", "display_name": "Go (gonb)", "language": "go"},
		"druto":      map[string]string{"lang": "bn"},
	}}
	b, err := json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mine") // not named bn: the language is the metadata's
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "lesson.ipynb")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, jupyter, "nbconvert", "--config", strictConfig(t), "--to", "notebook", "--execute",
		"--ExecutePreprocessor.kernel_name=gonb", "--ExecutePreprocessor.timeout=600", "--output-dir", dir, "--output", "out", in)
	cmd.Dir = dir
	cmd.Env = kernelEnv(t, repo, t.TempDir())
	out, err := cmd.CombinedOutput()
	log := string(out)
	if err == nil {
		t.Fatalf("nbconvert exited 0 on a notebook whose cell failed:\n%s", tail(log, 3000))
	}
	for _, want := range []string{"CellFailed", "deliberate failure (bn): হ্যাঁ", "exit status 1"} {
		if !strings.Contains(log, want) {
			t.Errorf("nbconvert's output lacks %q:\n%s", want, tail(log, 3000))
		}
	}
	if strings.Contains(log, "not reached") {
		t.Errorf("the cell after the failure ran:\n%s", tail(log, 3000))
	}
}
