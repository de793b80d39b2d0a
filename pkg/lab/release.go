package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/druto/druto/internal/atomicfile"
)

// Solution markers, as nbgrader's: the lines between them (inclusive) are
// the answer; Release replaces them with the block's stub lines (written
// "// STUB: code") or, when it has none, a TODO comment.
const (
	BeginSolution = "// BEGIN SOLUTION"
	EndSolution   = "// END SOLUTION"
	stubPrefix    = "// STUB: "
)

// ErrNotebook marks a notebook Release or Grade cannot read.
var ErrNotebook = errors.New("lab: not a notebook")

// Strip returns a cell's source with each solution block replaced by its
// stub, and how many blocks it replaced.
func Strip(src string) (string, int, error) {
	lines := strings.SplitAfter(src, "\n")
	var out []string
	n, in := 0, false
	var stub []string
	indent := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == BeginSolution:
			if in {
				return "", 0, fmt.Errorf("line %d: %s inside another solution block", i+1, BeginSolution)
			}
			in, stub = true, nil
			indent = l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		case t == EndSolution:
			if !in {
				return "", 0, fmt.Errorf("line %d: %s without %s", i+1, EndSolution, BeginSolution)
			}
			in = false
			n++
			if len(stub) == 0 {
				stub = []string{indent + "// TODO: your code here.\n"}
			}
			out = append(out, stub...)
		case in && strings.HasPrefix(t, stubPrefix):
			stub = append(stub, indent+strings.TrimPrefix(t, stubPrefix)+"\n")
		case !in:
			out = append(out, l)
		}
	}
	if in {
		return "", 0, fmt.Errorf("%s without %s", BeginSolution, EndSolution)
	}
	return strings.Join(out, ""), n, nil
}

// rawNotebook is a notebook read for rewriting: every field kept.
type rawNotebook map[string]any

func readRaw(path string) (rawNotebook, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var nb rawNotebook
	if err := json.Unmarshal(b, &nb); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrNotebook, err)
	}
	if _, ok := nb["cells"].([]any); !ok {
		return nil, fmt.Errorf("%s: %w: no cells", path, ErrNotebook)
	}
	return nb, nil
}

// cellSource is a cell's source as one string.
func cellSource(c map[string]any) string {
	switch s := c["source"].(type) {
	case string:
		return s
	case []any:
		var b strings.Builder
		for _, l := range s {
			str, _ := l.(string)
			b.WriteString(str)
		}
		return b.String()
	}
	return ""
}

// ReleaseNotebook returns the student version of the solution notebook at
// path: solutions replaced by stubs, outputs cleared, and how many
// solution blocks it replaced.
func ReleaseNotebook(path string) ([]byte, int, error) {
	nb, err := readRaw(path)
	if err != nil {
		return nil, 0, err
	}
	total := 0
	for i, c := range nb["cells"].([]any) {
		cell, ok := c.(map[string]any)
		if !ok || cell["cell_type"] != "code" {
			continue
		}
		src, n, err := Strip(cellSource(cell))
		if err != nil {
			return nil, 0, fmt.Errorf("%s, cell %d: %w", path, i+1, err)
		}
		total += n
		cell["source"] = strings.SplitAfter(src, "\n")
		cell["outputs"] = []any{}
		cell["execution_count"] = nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(nb); err != nil {
		return nil, 0, err
	}
	return b.Bytes(), total, nil
}

// Release writes the student version of every notebook under src to the
// same place under dst (created), and returns the files written. Nothing
// is written when any notebook fails to parse or has unbalanced markers.
func Release(src, dst string) ([]string, error) {
	st, err := os.Stat(src)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder of solution notebooks; give the folder that holds them (such as notebooks/labs)", src)
	}
	as, _ := filepath.Abs(src)
	ad, _ := filepath.Abs(dst)
	if as == ad {
		return nil, fmt.Errorf("SRC and DST are both %s: releasing in place would delete the solutions; choose another DST", src)
	}
	out := map[string][]byte{}
	var order []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != src || ad == mustAbs(p)) {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".ipynb" {
			return nil
		}
		b, _, err := ReleaseNotebook(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out[rel] = b
		order = append(order, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no notebook (.ipynb) under %s; give the folder of solution notebooks", src)
	}
	var written []string
	for _, rel := range order {
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		if err := atomicfile.WriteFile(p, out[rel]); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
