package nbui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/druto/druto/kernels"
)

// SourceTable lists the embedded CUDA sources, one row per file: its
// kernels, the dtypes it is built for, its size, and the embedded PTX with
// the command that built it (from the PTX header); a PTX file that is not
// embedded is marked missing.
func SourceTable(lang string, vs []kernels.Variant) (*Table, error) {
	t := NewTable(lang, "source", "kernels", "dtypes", "source bytes", "embedded PTX", "PTX built by")
	type file struct {
		kernels, dtypes, ptx []string
		bytes                int
		build                string
	}
	var order []string
	files := map[string]*file{}
	for _, v := range vs {
		f := files[v.File]
		if f == nil {
			src, err := v.Source()
			if err != nil {
				return nil, err
			}
			f = &file{bytes: len(src)}
			files[v.File] = f
			order = append(order, v.File)
		}
		if !slices.Contains(f.kernels, v.Kernel) {
			f.kernels = append(f.kernels, v.Kernel)
		}
		if dt := v.DType.String(); !slices.Contains(f.dtypes, dt) {
			f.dtypes = append(f.dtypes, dt)
			// A missing PTX file is shown, not fatal: the kernel then needs NVRTC.
			ptx, err := v.PTX()
			if err != nil {
				f.ptx = append(f.ptx, v.PTXFile()+" ("+Sprintf(lang, "missing")+")")
				continue
			}
			h, err := kernels.ParsePTXHeader(ptx)
			if err != nil {
				return nil, fmt.Errorf("nbui: %s: %w", v.PTXFile(), err)
			}
			f.ptx = append(f.ptx, v.PTXFile())
			// The build command without its -DDTYPE=... option, which differs per dtype.
			build, _, _ := strings.Cut(h.Build, " -DDTYPE")
			f.build = build
		}
	}
	for _, name := range order {
		f := files[name]
		t.Add(name, fmt.Sprintf("%d: %s", len(f.kernels), strings.Join(f.kernels, ", ")), strings.Join(f.dtypes, " "),
			f.bytes, strings.Join(f.ptx, " "), f.build)
	}
	return t, nil
}

// SourceComments returns the opening comment of each embedded source file
// (everything before its first preprocessor line), in file order: where
// each file says which kernels it holds and what each one fuses.
func SourceComments(vs []kernels.Variant) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.File] {
			continue
		}
		seen[v.File] = true
		src, err := v.Source()
		if err != nil {
			return nil, err
		}
		var lines []string
		for _, l := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(l, "#") {
				break
			}
			lines = append(lines, l)
		}
		out = append(out, strings.TrimSpace(strings.Join(lines, "\n")))
	}
	return out, nil
}
