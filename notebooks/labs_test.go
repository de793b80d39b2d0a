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
var labNames = []string{"01-softmax", "02-layernorm", "03-adamw", "04-attention", "05-bias-gelu", "06-bpe"}

// TestLabsPaired checks the lab notebooks without running them: both
// languages have every lab with the same code cells, Bangla prose in the
// Bangla ones, no outputs, cells of at most maxCellLines lines, balanced
// solution markers, and a check for every lab.
func TestLabsPaired(t *testing.T) {
	for _, lang := range langs {
		if base := notebookNames(t, filepath.Join("labs", lang)); !slices.Equal(base, labNames) {
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
// rows, within the limits; lab 3 run twice in one kernel passes both times.
// An exercise a machine cannot grade (lab 5's
// kernel without a GPU) is skipped with its line in the notebook's
// language, in solution and student notebooks alike.
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
			writeFile(t, filepath.Join(dir, "labs", "solution", lang, name+".ipynb"), b)
		}
	}
	if _, err := lab.Release(filepath.Join(dir, "labs", "solution"), filepath.Join(dir, "labs", "student")); err != nil {
		t.Fatal(err)
	}
	// Lab 3's solution with its cells twice over, as a student who presses
	// Run All again in the same kernel runs it: the second pass must pass
	// every check again (lab 3's last cell imports labplot after the
	// others, the case most likely to differ).
	writeTwice(t, filepath.Join("labs", "en", "03-adamw.ipynb"), filepath.Join(dir, "labs", "solution-rerun", "en", "03-adamw.ipynb"))
	// One notebook for what can break: a student's softmax that panics, a
	// cross-entropy that never ends, a cell that panics and one that never
	// ends.
	writeBroken(t, filepath.Join(dir, "broken", "broken.ipynb"))
	// The broken notebook waits out its limits beside the others, with
	// limits of its own: a lab cell's build on a loaded machine may take
	// longer than the broken cell's limit.
	const cellLimit, nbLimit = 3 * time.Minute, 8 * time.Minute
	const brokenCell, brokenLimit = 15 * time.Second, 3 * time.Minute
	env := kernelEnv(t, repo, t.TempDir())
	start := time.Now()
	var broken []lab.Row
	var brokenErr error
	done := make(chan bool)
	go func() {
		broken, brokenErr = lab.Grade(filepath.Join(dir, "broken"), lab.GradeOptions{Jupyter: jupyter,
			Env: append(env, lab.TimeoutEnv+"=3s"), Cell: brokenCell, Limit: brokenLimit})
		close(done)
	}()
	kept := filepath.Join(sharedOut, "labs")
	rows, err := lab.Grade(filepath.Join(dir, "labs"), lab.GradeOptions{Jupyter: jupyter, Env: env, Cell: cellLimit, Limit: nbLimit, Jobs: 2, Keep: kept})
	<-done
	took := time.Since(start)
	if err != nil || brokenErr != nil {
		t.Fatal(err, brokenErr)
	}
	t.Logf("graded %d notebooks in %.0f s", len(rows)+len(broken), took.Seconds())
	if len(rows) != 2*2*len(labNames)+1 || len(broken) != 1 {
		t.Fatalf("%d and %d rows, want %d and 1", len(rows), len(broken), 2*2*len(labNames)+1)
	}
	maxOf := map[string]int{}
	for _, r := range rows {
		maxOf[r.Notebook] = r.Max
	}
	if once, twice := maxOf[filepath.Join("solution", "en", "03-adamw.ipynb")], maxOf[filepath.Join("solution-rerun", "en", "03-adamw.ipynb")]; once == 0 || twice != 2*once {
		t.Errorf("lab 3 run twice in one kernel: %d points at most, want twice the %d of one run", twice, once)
	}
	broken[0].Notebook = "broken/" + broken[0].Notebook
	rows = append(rows, broken...)
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
			if r.Status != "ok" || r.Passed != 0 || len(r.Results) != r.Exercises+r.Skipped || r.Exercises == 0 {
				t.Errorf("%s: a student notebook must run every check and fail it: %s", where, b)
			}
			for _, res := range r.Results {
				if res.Skipped {
					continue
				}
				if res.Failure == nil || res.Failure.Hint == "" || res.Feedback == "" || (r.Lang == "bn") != hasBengali(res.Feedback) {
					t.Errorf("%s: %s failed without a hint in the notebook's language: %q", where, res.Exercise, res.Feedback)
				}
			}
		case strings.HasPrefix(where, "broken"):
			if !strings.Contains(r.Status, "panicked") || !strings.Contains(r.Status, "interrupted") || len(r.Results) != 2 ||
				r.Results[0].Failure == nil || r.Results[0].Failure.Hint != "panic" || r.Results[1].Failure == nil || !r.Results[1].Failure.TimedOut {
				t.Errorf("%s: want the student's panic and endless loop as feedback, and the cells' in the status: %s", where, b)
			}
		}
		for _, res := range r.Results {
			if res.Skipped && (res.Feedback == "" || (r.Lang == "bn") != hasBengali(res.Feedback)) {
				t.Errorf("%s: %s skipped without its line in the notebook's language: %q", where, res.Exercise, res.Feedback)
			}
		}
		if limit := map[bool]time.Duration{true: brokenLimit, false: nbLimit}[strings.HasPrefix(where, "broken")]; r.Seconds > limit.Seconds()+15 {
			t.Errorf("%s took %.0f s, past the notebook limit of %v", where, r.Seconds, limit)
		}
	}
	if !t.Failed() {
		labsKept.Lock()
		labsKept.dir = kept
		labsKept.Unlock()
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

// writeTwice writes the notebook src with its cells twice over to dst.
func writeTwice(t *testing.T, src, dst string) {
	t.Helper()
	var nb map[string]any
	b, err := os.ReadFile(src)
	if err != nil || json.Unmarshal(b, &nb) != nil {
		t.Fatalf("%s: %v", src, err)
	}
	cells := nb["cells"].([]any)
	nb["cells"] = append(cells, cells...)
	if b, err = json.Marshal(nb); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, b)
}

// writeBroken writes lab 1's English solution with a softmax that
// panics, a cross-entropy that never returns, and after the imports a
// cell that panics and one that never ends.
func writeBroken(t *testing.T, path string) {
	t.Helper()
	var nb map[string]any
	b, err := os.ReadFile(filepath.Join("labs", "en", labNames[0]+".ipynb"))
	if err != nil || json.Unmarshal(b, &nb) != nil {
		t.Fatalf("lab 1: %v", err)
	}
	newCell := func(src string) map[string]any {
		return map[string]any{"cell_type": "code", "metadata": map[string]any{}, "source": src, "outputs": []any{}, "execution_count": nil}
	}
	var out []any
	for _, c := range nb["cells"].([]any) {
		cell := c.(map[string]any)
		src := ""
		for _, l := range cell["source"].([]any) {
			src += l.(string)
		}
		switch {
		case strings.HasPrefix(src, "func Softmax("):
			cell["source"] = "func Softmax(probs, logits []float32, N, V int) {\n\tprobs[N*V] = 1\n}\n"
		case strings.HasPrefix(src, "func CrossEntropy("):
			cell["source"] = "func CrossEntropy(losses, dlogits, logits []float32, targets []int32, N, V int) {\n\tfor N > 0 {\n\t}\n}\n"
		}
		out = append(out, cell)
		if strings.HasPrefix(src, "import (") {
			out = append(out, newCell("%%\nvar none []int\nnone[1]++"), newCell("%%\nfor {\n}"))
		}
	}
	nb["cells"] = out
	b, err = json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}
