package nbui

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables the helpers read.
const (
	// LangEnv overrides the language Lang derives from the notebook's folder.
	LangEnv = "DRUTO_LANG"
	// RepoEnv names the druto checkout (the notebook tests set it).
	RepoEnv = "DRUTO_REPO"
	// OutEnv names the folder RunDir puts runs in (the notebook tests point it
	// at a temporary folder so that a test run leaves the checkout clean).
	OutEnv = "DRUTO_OUT"
)

// notebookDir is the folder the notebook runs in: GoNB's GONB_DIR, else the
// working directory.
func notebookDir() string {
	if d := os.Getenv("GONB_DIR"); d != "" {
		return d
	}
	d, err := os.Getwd()
	if err != nil {
		return "."
	}
	return d
}

// Lang returns the notebook's language, "en" or "bn": $DRUTO_LANG when set to
// one of them, else "bn" when the notebook's folder is named bn, else "en".
func Lang() string {
	switch l := os.Getenv(LangEnv); l {
	case "en", "bn":
		return l
	}
	if filepath.Base(notebookDir()) == "bn" {
		return "bn"
	}
	return "en"
}

// Repo returns the druto checkout the notebook uses: $DRUTO_REPO when set,
// else the folder two levels above the notebook's (notebooks/en/.. /..).
// The first cell of every notebook points Go's workspace at the same folder.
func Repo() string {
	if r := os.Getenv(RepoEnv); r != "" {
		return filepath.Clean(r)
	}
	return filepath.Clean(filepath.Join(notebookDir(), "..", ".."))
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
