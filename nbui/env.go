package nbui

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/druto/druto/internal/nblang"
)

// Environment variables the helpers read.
const (
	// LangEnv overrides the language Lang derives from the notebook.
	LangEnv = nblang.Env
	// RepoEnv names the druto checkout (the notebook tests set it).
	RepoEnv = "DRUTO_REPO"
	// OutEnv names the folder RunDir puts runs in (the notebook tests point it
	// at a temporary folder so that a test run leaves the checkout clean).
	OutEnv = "DRUTO_OUT"
	// sessionEnv is the notebook's path, which Jupyter Server (JupyterLab,
	// Notebook 7) gives the kernels it starts.
	sessionEnv = nblang.SessionEnv
)

// notebookDir is the folder the notebook runs in (nblang.Dir).
func notebookDir() string { return nblang.Dir() }

// Lang returns the notebook's language, "en" or "bn", from the first of:
//   - $DRUTO_LANG, when it is en or bn;
//   - the notebook itself, when the kernel knows which it is ($JPY_SESSION_NAME),
//     else every notebook in its folder, when they agree: its metadata
//     ("druto": {"lang": "bn"}) or its name (lesson.bn.ipynb, lesson-bn.ipynb,
//     lesson_bn.ipynb);
//   - the folder's name (notebooks/bn);
//   - "en".
func Lang() string { return nblang.Lang() }

// notebookLang is the language a notebook file declares (nblang.NotebookLang).
func notebookLang(path string) string { return nblang.NotebookLang(path) }

// Repo returns the druto checkout the notebook uses: $DRUTO_REPO when set,
// else the folder this package was built from (the copy of druto that the
// notebook's go.work points at: a checkout or Go's module cache), else the
// folder two levels above the notebook's (notebooks/en/../..).
func Repo() string {
	if r := os.Getenv(RepoEnv); r != "" {
		return filepath.Clean(r)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if root := filepath.Dir(filepath.Dir(file)); fileExists(filepath.Join(root, "go.mod")) {
			return root
		}
	}
	return filepath.Clean(filepath.Join(notebookDir(), "..", ".."))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// RunDir returns the folder for a notebook's run called name, creating it:
// $DRUTO_OUT/name when DRUTO_OUT is set, else runs/name beside the notebook.
func RunDir(name string) (string, error) {
	if name == "" || filepath.Base(name) != name {
		return "", fmt.Errorf("nbui: run name %q must be one path element", name)
	}
	base := os.Getenv(OutEnv)
	if base == "" {
		base = filepath.Join(notebookDir(), "runs")
	}
	dir := filepath.Join(base, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("nbui: %w", err)
	}
	return dir, nil
}
