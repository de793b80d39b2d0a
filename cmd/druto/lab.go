package main

// druto lab release SRC DST: student notebooks from solution notebooks.
// druto lab grade DIR: execute submitted notebooks and tabulate scores.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/druto/druto/pkg/lab"
)

func init() {
	register("lab", "release student lab notebooks (release SRC DST) or grade submitted ones (grade DIR)", runLab)
}

const labUsage = "usage: druto lab release SRC DST | druto lab grade [flags] DIR"

func runLab(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no subcommand; %s", labUsage)
	}
	switch args[0] {
	case "release":
		return labRelease(args[1:])
	case "grade":
		return labGrade(args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(os.Stderr, labUsage)
		return flag.ErrHelp
	}
	return fmt.Errorf("unknown subcommand %q; %s", args[0], labUsage)
}

// splitArgs parses flags anywhere among args and returns the positional ones.
func splitArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	fs.SetOutput(io.Discard)
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintln(os.Stderr, labUsage)
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
			return nil, err
		case err != nil:
			return nil, fmt.Errorf("%v; run '%s --help' for the flags", err, fs.Name())
		case fs.NArg() == 0:
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func labRelease(args []string) error {
	fs := newFlags("lab release")
	pos, err := splitArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("want SRC and DST, got %d arguments; %s", len(pos), labUsage)
	}
	files, err := lab.Release(pos[0], pos[1])
	if err != nil {
		return err
	}
	fmt.Printf("wrote %d student notebooks under %s\n", len(files), pos[1])
	return nil
}

func labGrade(args []string) error {
	fs := newFlags("lab grade")
	csvPath := fs.String("csv", "", "the CSV of scores (default DIR/grades.csv)")
	jsonPath := fs.String("json", "", "the JSON of scores with every exercise's feedback (default DIR/grades.json)")
	cell := fs.Duration("cell-limit", 2*time.Minute, "a cell running longer is interrupted")
	limit := fs.Duration("limit", 10*time.Minute, "a notebook running longer is stopped")
	jobs := fs.Int("jobs", 1, "notebooks executed at once")
	keep := fs.String("keep", "", "folder to keep the executed notebooks in, at their paths under DIR")
	repo := fs.String("repo", os.Getenv("DRUTO_REPO"), "the druto checkout the notebooks use (default $DRUTO_REPO, else the one around the working folder)")
	pos, err := splitArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("want one folder DIR, got %d arguments; %s", len(pos), labUsage)
	}
	dir := pos[0]
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a folder of submitted notebooks; give the folder that holds the .ipynb files", dir)
	}
	if *cell <= 0 || *limit <= 0 || *jobs < 1 {
		return errors.New("--cell-limit and --limit must be positive and --jobs at least 1")
	}
	if *csvPath == "" {
		*csvPath = filepath.Join(dir, "grades.csv")
	}
	if *jsonPath == "" {
		*jsonPath = filepath.Join(dir, "grades.json")
	}
	env, err := kernelEnv(*repo)
	if err != nil {
		return err
	}
	fmt.Printf("grading the notebooks under %s: each cell within %v, each notebook within %v\n", dir, *cell, *limit)
	start := time.Now()
	rows, err := lab.Grade(dir, lab.GradeOptions{Env: env, Cell: *cell, Limit: *limit, Jobs: *jobs, Keep: *keep})
	if err != nil {
		return err
	}
	for _, r := range rows {
		skipped := ""
		if r.Skipped > 0 { // e.g. lab 5's kernel on a machine without a GPU
			skipped = fmt.Sprintf(" (%d not graded here)", r.Skipped)
		}
		fmt.Printf("%-40s %3d/%-3d exercises %d/%d%s  %s (%.0f s)\n", r.Notebook, r.Points, r.Max, r.Passed, r.Exercises, skipped, r.Status, r.Seconds)
	}
	if err := lab.WriteReports(rows, *csvPath, *jsonPath); err != nil {
		return fmt.Errorf("%v (check that the folder is writable, or give --csv and --json)", err)
	}
	fmt.Printf("%d notebooks in %.0f s; scores in %s and %s\n", len(rows), time.Since(start).Seconds(), *csvPath, *jsonPath)
	return nil
}

// kernelEnv is the environment GoNB runs in: its kernel spec has an empty
// env, so Go's bin folders go on PATH, with the druto checkout and no
// inherited DRUTO_LANG or GOWORK (each notebook makes its own go.work).
func kernelEnv(repo string) ([]string, error) {
	goenv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	gopath, goroot := goenv("GOPATH"), goenv("GOROOT")
	if gopath == "" {
		return nil, errors.New("go is not on PATH; the GoNB kernel needs Go: install it and try again")
	}
	if repo == "" {
		if wd, err := os.Getwd(); err == nil {
			for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
				if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/druto/druto\n") {
					repo = d
					break
				}
			}
		}
	}
	set := map[string]string{
		"PATH":   filepath.Join(gopath, "bin") + string(os.PathListSeparator) + filepath.Join(goroot, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GOPATH": gopath, "GOCACHE": goenv("GOCACHE"), "GOMODCACHE": goenv("GOMODCACHE"),
	}
	if repo != "" {
		set["DRUTO_REPO"] = repo
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || k == "DRUTO_LANG" || k == "GOWORK" {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env, nil
}
