package notebooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/lab"
)

// labNames are the graded labs, in the order a course takes them.
var labNames = []string{"01-softmax", "02-layernorm", "03-adamw"}

// TestLabsPaired checks the lab notebooks without running them: both
// languages have every lab with the same code cells, Bangla prose in the
// Bangla ones, no outputs, cells of at most maxCellLines lines, balanced
// solution markers, and a check for every lab.
func TestLabsPaired(t *testing.T) {
	for _, lang := range langs {
		got, _ := filepath.Glob(filepath.Join("labs", lang, "*.ipynb"))
		var base []string
		for _, g := range got {
			base = append(base, strings.TrimSuffix(filepath.Base(g), ".ipynb"))
		}
		if !slices.Equal(base, labNames) {
			t.Errorf("labs/%s holds %v, want %v", lang, base, labNames)
		}
	}
	for _, name := range labNames {
		en := readNotebook(t, filepath.Join("labs", "en", name+".ipynb"))
		bn := readNotebook(t, filepath.Join("labs", "bn", name+".ipynb"))
		ec, bc := codeCells(en), codeCells(bn)
		if len(ec) != len(bc) {
			t.Fatalf("%s: %d code cells in en, %d in bn", name, len(ec), len(bc))
		}
		checks, solutions := 0, 0
		for i := range ec {
			src := string(ec[i].Source)
			if ec[i].Source != bc[i].Source {
				t.Errorf("%s: code cell %d differs between en and bn", name, i+1)
			}
			if n := strings.Count(strings.TrimRight(src, "\n"), "\n") + 1; n > maxCellLines {
				t.Errorf("%s: code cell %d has %d lines, more than %d", name, i+1, n, maxCellLines)
			}
			_, n, err := lab.Strip(src)
			if err != nil {
				t.Errorf("%s: code cell %d: %v", name, i+1, err)
			}
			solutions += n
			checks += strings.Count(src, "lab.Check(")
		}
		if checks == 0 || solutions < checks {
			t.Errorf("%s: %d checks and %d solution blocks", name, checks, solutions)
		}
		for lang, nb := range map[string]notebook{"en": en, "bn": bn} {
			for i, c := range nb.Cells {
				if len(c.Outputs) > 0 || c.ExecutionCount != nil {
					t.Errorf("labs/%s/%s: cell %d has committed outputs", lang, name, i+1)
				}
				if c.Type == "markdown" && lang == "bn" && !hasBengali(string(c.Source)) {
					t.Errorf("labs/bn/%s: markdown cell %d has no Bangla", name, i+1)
				}
			}
		}
	}
}

// TestLabs executes, through lab.Grade (as `druto lab grade` does), every
// solution notebook, every student notebook lab.Release writes from them,
// a notebook whose student code and one cell panic, and one whose student
// code and one cell never end, two at a time: solutions pass every check;
// student notebooks fail every check with feedback (in Bangla for the
// Bangla ones) and no crash; the panicking and endless notebooks get their
// rows, within the limits.
func TestLabs(t *testing.T) {
	mode := os.Getenv(modeEnv)
	if mode == "off" {
		t.Skipf("%s=off", modeEnv) // skip: an opt-out (=off)
	}
	jupyter, missing := tools()
	if missing != "" {
		testreq.Skip(t, modeEnv, "%s; install the notebook stack with scripts/install-test-deps.sh", missing)
	}
	if testing.Short() && mode != "require" {
		t.Skip("-short: not executing the lab notebooks") // skip: -short
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, lang := range langs {
		for _, name := range labNames {
			b, err := os.ReadFile(filepath.Join("labs", lang, name+".ipynb"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "solution", lang, name+".ipynb"), b)
		}
	}
	if _, err := lab.Release(filepath.Join(dir, "solution"), filepath.Join(dir, "student")); err != nil {
		t.Fatal(err)
	}
	// A student's softmax that panics and a cell that panics; a softmax and
	// a cell that never end.
	writeBroken(t, filepath.Join(dir, "broken", "panic.ipynb"), "probs[N*V] = 1", `%%`+"\nvar none []int\nnone[1]++")
	writeBroken(t, filepath.Join(dir, "broken", "loop.ipynb"), "for N > 0 {\n\t}", `%%`+"\nfor {\n}")
	const cellLimit, nbLimit = 20 * time.Second, 4 * time.Minute
	env := append(kernelEnv(t, repo, t.TempDir()), lab.TimeoutEnv+"=5s")
	start := time.Now()
	rows, err := lab.Grade(dir, lab.GradeOptions{Jupyter: jupyter, Env: env, Cell: cellLimit, Limit: nbLimit, Jobs: 2})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("graded %d notebooks in %.0f s (cell limit %v, notebook limit %v)", len(rows), took.Seconds(), cellLimit, nbLimit)
	if len(rows) != 2*2*len(labNames)+2 {
		t.Fatalf("%d rows, want %d", len(rows), 2*2*len(labNames)+2)
	}
	for _, r := range rows {
		b, _ := json.Marshal(r)
		where := r.Notebook
		t.Logf("%s: %d/%d, exercises %d/%d, %s, %.0f s", where, r.Points, r.Max, r.Passed, r.Exercises, r.Status, r.Seconds)
		switch {
		case strings.HasPrefix(where, "solution"):
			if r.Status != "ok" || r.Passed != r.Exercises || r.Points != r.Max || r.Max == 0 {
				t.Errorf("%s: a solution notebook did not pass every check: %s", where, b)
			}
		case strings.HasPrefix(where, "student"):
			if r.Status != "ok" || r.Passed != 0 || len(r.Results) != r.Exercises || r.Exercises == 0 {
				t.Errorf("%s: a student notebook must run every check and fail it: %s", where, b)
			}
			for _, res := range r.Results {
				if res.Failure == nil || res.Failure.Hint == "" || res.Feedback == "" || (r.Lang == "bn") != hasBengali(res.Feedback) {
					t.Errorf("%s: %s failed without a hint in the notebook's language: %q", where, res.Exercise, res.Feedback)
				}
			}
		case strings.HasSuffix(where, "panic.ipynb"):
			if !strings.Contains(r.Status, "panicked") || len(r.Results) != 2 || r.Results[0].Failure == nil || r.Results[0].Failure.Hint != "panic" {
				t.Errorf("%s: want the student's panic as feedback and the cell's in the status: %s", where, b)
			}
		case strings.HasSuffix(where, "loop.ipynb"):
			if !strings.Contains(r.Status, "interrupted") || len(r.Results) != 2 || r.Results[0].Failure == nil || !r.Results[0].Failure.TimedOut {
				t.Errorf("%s: want the student's endless loop as feedback and the cell's in the status: %s", where, b)
			}
		}
		if r.Seconds > nbLimit.Seconds()+15 {
			t.Errorf("%s took %.0f s, past the notebook limit of %v", where, r.Seconds, nbLimit)
		}
	}
	csvPath, jsonPath := filepath.Join(dir, "grades.csv"), filepath.Join(dir, "grades.json")
	if err := lab.WriteReports(rows, csvPath, jsonPath); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(csvPath); err != nil || strings.Count(string(b), "\n") != len(rows)+1 {
		t.Errorf("grades.csv: %v\n%s", err, b)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeBroken writes lab 1's English solution with its softmax's body
// replaced by body, and a cell of source cell after the imports.
func writeBroken(t *testing.T, path, body, cellSrc string) {
	t.Helper()
	var nb map[string]any
	b, err := os.ReadFile(filepath.Join("labs", "en", labNames[0]+".ipynb"))
	if err != nil || json.Unmarshal(b, &nb) != nil {
		t.Fatalf("lab 1: %v", err)
	}
	cells := nb["cells"].([]any)
	var out []any
	for _, c := range cells {
		cell := c.(map[string]any)
		src := ""
		for _, l := range cell["source"].([]any) {
			src += l.(string)
		}
		if strings.HasPrefix(src, "func Softmax(") {
			cell["source"] = "func Softmax(probs, logits []float32, N, V int) {\n\t" + body + "\n}\n"
		}
		out = append(out, cell)
		if strings.HasPrefix(src, "import (") {
			out = append(out, map[string]any{"cell_type": "code", "metadata": map[string]any{}, "source": cellSrc, "outputs": []any{}, "execution_count": nil})
		}
	}
	nb["cells"] = out
	b, err = json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}
