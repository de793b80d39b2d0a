package lab

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/druto/druto/internal/atomicfile"
)

// GradeOptions configure Grade.
type GradeOptions struct {
	Jupyter string        // the jupyter command ("" finds it on PATH)
	Env     []string      // the kernel's environment (nil: this process's)
	Cell    time.Duration // a cell's limit: it is interrupted after it (default 2m)
	Limit   time.Duration // a notebook's limit: it is killed after it (default 10m)
	Jobs    int           // notebooks executed at once (default 1)
	Keep    string        // folder for the executed notebooks, at their paths under dir ("": a temporary one, removed)
}

// Row is one graded notebook: its exercises' results, the score (points
// of the cases, exercises passed of those its cells check) and what
// happened to it. An exercise that cannot be graded on this machine (lab
// 5's kernel where there is no GPU) has its result, marked skipped, but
// counts in neither Exercises nor the points: Skipped counts those.
type Row struct {
	Notebook  string   `json:"notebook"`
	Lang      string   `json:"lang"`
	Points    int      `json:"points"`
	Max       int      `json:"max"`
	Passed    int      `json:"exercises_passed"`
	Exercises int      `json:"exercises"`
	Skipped   int      `json:"exercises_skipped,omitempty"`
	Status    string   `json:"status"` // ok, or what went wrong
	Seconds   float64  `json:"seconds"`
	Results   []Result `json:"results"`
}

// Grade executes every notebook under dir with Jupyter's nbconvert and the
// GoNB kernel, each within opt's limits, and returns a row per notebook
// (sorted by path). A notebook that fails to run, panics or loops gets its
// row with what it showed before.
func Grade(dir string, opt GradeOptions) ([]Row, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder of submitted notebooks; give the folder that holds the .ipynb files", dir)
	}
	if opt.Jupyter == "" {
		j, err := exec.LookPath("jupyter")
		if err != nil {
			return nil, fmt.Errorf("jupyter is not on PATH; install the notebook stack with scripts/install-test-deps.sh")
		}
		opt.Jupyter = j
	}
	opt.Cell = cmpOr(opt.Cell, 2*time.Minute)
	opt.Limit = cmpOr(opt.Limit, 10*time.Minute)
	opt.Jobs = max(1, opt.Jobs)
	if opt.Env == nil {
		opt.Env = os.Environ()
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".ipynb" && !strings.Contains(p, ".ipynb_checkpoints") &&
			(opt.Keep == "" || !strings.HasPrefix(mustAbs(p), mustAbs(opt.Keep)+string(filepath.Separator))) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		return nil, fmt.Errorf("no notebook (.ipynb) under %s", dir)
	}
	tmp, err := os.MkdirTemp("", "druto-grade-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := opt.Keep
	if out == "" {
		out = filepath.Join(tmp, "executed")
	}
	opt.Env = withoutGopls(opt.Env, filepath.Join(tmp, "bin"))
	rows := make([]Row, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, opt.Jobs)
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rel, _ := filepath.Rel(dir, f)
			rows[i] = gradeOne(f, rel, filepath.Join(out, filepath.Dir(rel)), opt)
		}()
	}
	wg.Wait()
	return rows, nil
}

// withoutGopls returns env with gopls left out of PATH: GoNB starts it for
// completion, which grading does not use (measured here: 15% of a lab
// notebook's CPU time). Each PATH folder holding gopls is replaced by bin,
// which links to everything else in it.
func withoutGopls(env []string, bin string) []string {
	out := append([]string(nil), env...)
	for i, kv := range out {
		path, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		dirs := filepath.SplitList(path)
		for k, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "gopls")); err != nil {
				continue
			}
			entries, err := os.ReadDir(d)
			if err != nil || os.MkdirAll(bin, 0o755) != nil {
				continue
			}
			for _, e := range entries {
				if e.Name() != "gopls" {
					os.Symlink(filepath.Join(d, e.Name()), filepath.Join(bin, e.Name()))
				}
			}
			dirs[k] = bin
		}
		out[i] = "PATH=" + strings.Join(dirs, string(os.PathListSeparator))
	}
	return out
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// interruptedRE matches the stderr of a cell GoNB stopped.
var interruptedRE = regexp.MustCompile(`signal: (interrupt|killed)`)

func gradeOne(path, rel, outDir string, opt GradeOptions) (row Row) {
	row = Row{Notebook: rel, Lang: "en"}
	start := time.Now()
	defer func() { row.Seconds = time.Since(start).Seconds() }()
	src, err := readRaw(path)
	if err != nil {
		row.Status = "unreadable: " + err.Error()
		return row
	}
	if md, ok := src["metadata"].(map[string]any); ok {
		if d, ok := md["druto"].(map[string]any); ok && d["lang"] == "bn" {
			row.Lang = "bn"
		}
	}
	for _, c := range src["cells"].([]any) {
		if cell, ok := c.(map[string]any); ok && cell["cell_type"] == "code" {
			row.Exercises += strings.Count(cellSource(cell), "lab.Check(")
		}
	}
	abs := mustAbs(path)
	ctx, cancel := context.WithTimeout(context.Background(), opt.Limit)
	defer cancel()
	name := strings.TrimSuffix(filepath.Base(path), ".ipynb")
	cmd := exec.CommandContext(ctx, opt.Jupyter, "nbconvert", "--to", "notebook", "--execute", "--allow-errors",
		"--ExecutePreprocessor.kernel_name=gonb",
		"--ExecutePreprocessor.timeout="+strconv.Itoa(int(opt.Cell.Seconds())),
		"--ExecutePreprocessor.interrupt_on_timeout=True",
		"--output-dir", outDir, "--output", name, abs)
	cmd.Dir = filepath.Dir(abs)
	cmd.Env = append(append([]string(nil), opt.Env...), "JPY_SESSION_NAME="+abs)
	killGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	runErr := cmd.Run()
	executed := filepath.Join(outDir, name+".ipynb")
	results, cellErrs := readResults(executed)
	row.Results = results
	checks := row.Exercises
	for _, r := range results {
		if r.Skipped {
			row.Skipped++
			row.Exercises--
			continue
		}
		row.Points += r.Points
		row.Max += r.Max
		if r.Passed {
			row.Passed++
		}
	}
	switch {
	case ctx.Err() != nil:
		row.Status = fmt.Sprintf("killed after the notebook limit of %v", opt.Limit)
	case runErr != nil:
		row.Status = "failed: " + lastLine(log.String())
	case len(cellErrs) > 0:
		row.Status = strings.Join(cellErrs, "; ")
	case len(results) < checks:
		row.Status = fmt.Sprintf("%d of %d checks ran", len(results), checks)
	default:
		row.Status = "ok"
	}
	return row
}

// readResults returns the lab records in an executed notebook's outputs,
// and what went wrong in its cells (a panic, an error, an interrupt).
func readResults(path string) ([]Result, []string) {
	nb, err := readRaw(path)
	if err != nil {
		return nil, nil
	}
	var rs []Result
	var errs []string
	for i, c := range nb["cells"].([]any) {
		cell, ok := c.(map[string]any)
		if !ok || cell["cell_type"] != "code" {
			continue
		}
		outs, _ := cell["outputs"].([]any)
		for _, o := range outs {
			out, _ := o.(map[string]any)
			if data, ok := out["data"].(map[string]any); ok {
				if rec, ok := data[MIME]; ok {
					b, _ := json.Marshal(rec)
					if str, ok := rec.(string); ok {
						b = []byte(str)
					}
					var r Result
					if json.Unmarshal(b, &r) == nil {
						rs = append(rs, r)
					}
				}
			}
			txt := ""
			switch t := out["text"].(type) {
			case string:
				txt = t
			case []any:
				for _, l := range t {
					s, _ := l.(string)
					txt += s
				}
			}
			switch {
			case out["output_type"] == "error":
				errs = append(errs, fmt.Sprintf("cell %d: %v", i+1, out["ename"]))
			case out["name"] == "stderr" && interruptedRE.MatchString(txt):
				errs = append(errs, fmt.Sprintf("cell %d interrupted (cell limit)", i+1))
			case out["name"] == "stderr" && strings.Contains(txt, "panic:"):
				errs = append(errs, fmt.Sprintf("cell %d panicked", i+1))
			}
		}
	}
	return rs, errs
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// WriteReports writes rows as CSV (one line a notebook) and as JSON (the
// rows with every exercise's result), each atomically.
func WriteReports(rows []Row, csvPath, jsonPath string) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"notebook", "lang", "points", "max", "exercises_passed", "exercises", "status", "seconds"})
	for _, r := range rows {
		w.Write([]string{r.Notebook, r.Lang, strconv.Itoa(r.Points), strconv.Itoa(r.Max), strconv.Itoa(r.Passed),
			strconv.Itoa(r.Exercises), r.Status, strconv.FormatFloat(r.Seconds, 'f', 1, 64)})
	}
	w.Flush()
	if err := atomicfile.WriteFile(csvPath, b.Bytes()); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(jsonPath, append(j, '\n'))
}
