// Package nblang finds a notebook's language ("en" or "bn") and folder: the
// one rule that nbui and pkg/lab (whose lab notebooks do not import nbui,
// to keep each cell's program small) share.
package nblang

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables Lang reads.
const (
	// Env overrides the language Lang derives from the notebook.
	Env = "DRUTO_LANG"
	// SessionEnv is the notebook's path, which Jupyter Server (JupyterLab,
	// Notebook 7) gives the kernels it starts.
	SessionEnv = "JPY_SESSION_NAME"
)

// Dir is the folder the notebook runs in: GoNB's GONB_DIR, else the
// working directory.
func Dir() string {
	if d := os.Getenv("GONB_DIR"); d != "" {
		return d
	}
	d, err := os.Getwd()
	if err != nil {
		return "."
	}
	return d
}

// Lang returns the notebook's language, "en" or "bn", from the first of:
//   - $DRUTO_LANG, when it is en or bn;
//   - the notebook itself, when the kernel knows which it is ($JPY_SESSION_NAME),
//     else every notebook in its folder, when they agree: its metadata
//     ("druto": {"lang": "bn"}) or its name (lesson.bn.ipynb, lesson-bn.ipynb,
//     lesson_bn.ipynb);
//   - the folder's name (notebooks/bn);
//   - "en".
func Lang() string {
	switch l := os.Getenv(Env); l {
	case "en", "bn":
		return l
	}
	dir := Dir()
	var files []string
	if s := os.Getenv(SessionEnv); strings.HasSuffix(s, ".ipynb") {
		if !filepath.IsAbs(s) {
			s = filepath.Join(dir, filepath.Base(s))
		}
		files = []string{s}
	} else {
		files, _ = filepath.Glob(filepath.Join(dir, "*.ipynb"))
	}
	lang := ""
	for _, f := range files {
		l := NotebookLang(f)
		if l == "" || lang != "" && l != lang {
			lang = ""
			break
		}
		lang = l
	}
	if lang != "" {
		return lang
	}
	if filepath.Base(dir) == "bn" {
		return "bn"
	}
	return "en"
}

// NotebookLang is the language a notebook file declares in its metadata
// or its name, "" when it declares none.
func NotebookLang(path string) string {
	var nb struct {
		Metadata struct {
			Druto struct {
				Lang string `json:"lang"`
			} `json:"druto"`
		} `json:"metadata"`
	}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &nb) == nil {
		switch l := nb.Metadata.Druto.Lang; l {
		case "en", "bn":
			return l
		}
	}
	name := strings.TrimSuffix(filepath.Base(path), ".ipynb")
	for _, l := range []string{"bn", "en"} {
		for _, sep := range []string{".", "-", "_"} {
			if strings.HasSuffix(name, sep+l) {
				return l
			}
		}
	}
	return ""
}

// Sprintf formats the English format in lang: for "bn", the format's
// Bangla from table when it has one (a format missing there is shown in
// English). nbui's and pkg/lab's catalogues both look up through it.
func Sprintf(table map[string]string, lang, format string, args ...any) string {
	if lang == "bn" {
		if bn, ok := table[format]; ok {
			format = bn
		}
	}
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
