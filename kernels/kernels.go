package kernels

//go:generate ./gen-ptx.sh

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sources holds the CUDA C files, their shared headers and the PTX that go
// generate made from them.
//
//go:embed *.cu *.cuh ptx/*.ptx
var sources embed.FS

// DType names a storage type a source is compiled for, as its
// druto:dtypes line spells it ("f32", "bf16", "f16"; tensor.ParseDType
// reads the same names). The package imports nothing of druto, so the GPU
// backend converts.
type DType string

// The storage types a kernel may be built for.
const (
	F32  DType = "f32"
	BF16 DType = "bf16"
	F16  DType = "f16"
)

// String returns the name, e.g. "bf16".
func (d DType) String() string { return string(d) }

// parseDType accepts the float storage types.
func parseDType(s string) (DType, bool) {
	switch d := DType(s); d {
	case F32, BF16, F16:
		return d, true
	}
	return "", false
}

// Variant is one kernel built for one storage dtype: the unit that is
// compiled, cached, loaded and self-tested.
type Variant struct {
	Kernel string // the extern "C" name, e.g. "layernorm_forward"
	File   string // the source file, e.g. "layernorm.cu"
	DType  DType  // the storage type DTYPE selects
	// MinArch is the oldest compute capability the variant builds for, ×10
	// (its file's "// druto:arch 80" or "// druto:arch bf16:80" line; 75
	// without one): the embedded PTX is made for compute_<MinArch>, and
	// older devices report the kernel unavailable without compiling it.
	MinArch int
	// PDL: the kernel begins with pdl_enter() (common.cuh) and is named on
	// its file's "// druto:pdl" line, so on sm_90 and newer it may be
	// launched as a programmatic dependent launch (cuda.Function.LaunchPDL):
	// its blocks start while the previous kernel drains, and wait for it.
	PDL bool
}

// DefaultMinArch is the PTX target of files without a druto:arch line
// (compute_75, Turing: the oldest GPU druto supports).
const DefaultMinArch = 75

// PTXArch returns the embedded PTX's target, e.g. "compute_75".
func (v Variant) PTXArch() string { return fmt.Sprintf("compute_%d", v.MinArch) }

// String names the variant, e.g. "layernorm_forward/bf16".
func (v Variant) String() string { return v.Kernel + "/" + v.DType.String() }

// Define returns the -D option that selects the variant's dtype.
func (v Variant) Define() string { return "-DDTYPE=DRUTO_" + strings.ToUpper(v.DType.String()) }

// PTXFile returns the embedded PTX's path, e.g. "ptx/layernorm_bf16.ptx".
func (v Variant) PTXFile() string {
	return "ptx/" + strings.TrimSuffix(v.File, ".cu") + "_" + v.DType.String() + ".ptx"
}

// Source returns the variant's CUDA C text as NVRTC compiles it: the file
// with each `#include "NAME.cuh"` line replaced by that header (see
// Expand).
func (v Variant) Source() ([]byte, error) {
	src, err := sources.ReadFile(v.File)
	if err != nil {
		return nil, err
	}
	return Expand(v.File, src, sources)
}

// includeLine matches a line that includes one of the embedded headers.
var includeLine = regexp.MustCompile(`^#include "([A-Za-z0-9_]+\.cuh)"\s*$`)

// Includes returns the headers a source includes (its `#include "X.cuh"`
// lines), in order, each once.
func Includes(src []byte) []string {
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if m := includeLine.FindStringSubmatch(sc.Text()); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// Expand returns src (the file name) with every `#include "X.cuh"` line
// replaced by the text of X.cuh from headers, between #line directives so
// that NVRTC's messages name the right file and line. NVRTC is given one
// self-contained program this way (druto's loader passes it no headers),
// while nvcc, which gen-ptx.sh runs in this folder, reads the #include
// itself: both compile the same text. Headers do not include headers.
func Expand(name string, src []byte, headers fs.FS) ([]byte, error) {
	if !bytes.Contains(src, []byte(".cuh\"")) {
		return src, nil
	}
	var out bytes.Buffer
	lines := bytes.SplitAfter(src, []byte("\n"))
	for i, line := range lines {
		m := includeLine.FindSubmatch(bytes.TrimRight(line, "\r\n"))
		if m == nil {
			out.Write(line)
			continue
		}
		h, err := fs.ReadFile(headers, string(m[1]))
		if err != nil {
			return nil, fmt.Errorf("kernels: %s line %d: %w", name, i+1, err)
		}
		if Includes(h) != nil {
			return nil, fmt.Errorf("kernels: header %s includes another header (not supported)", m[1])
		}
		fmt.Fprintf(&out, "#line 1 \"%s\"\n", m[1])
		out.Write(h)
		if len(h) > 0 && h[len(h)-1] != '\n' {
			out.WriteByte('\n')
		}
		fmt.Fprintf(&out, "#line %d \"%s\"\n", i+2, name)
	}
	return out.Bytes(), nil
}

// RawSource returns the variant's file as it is on disk (includes not
// expanded), the bytes whose sha256 the PTX header records.
func (v Variant) RawSource() ([]byte, error) { return sources.ReadFile(v.File) }

// PTX returns the variant's embedded PTX.
func (v Variant) PTX() ([]byte, error) { return sources.ReadFile(v.PTXFile()) }

// Variants lists every kernel of every source file for every dtype the file
// declares, read from the files' "druto:kernel" and "druto:dtypes" lines.
func Variants() ([]Variant, error) {
	files, err := fs.Glob(sources, "*.cu")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Variant
	for _, f := range files {
		src, err := sources.ReadFile(f)
		if err != nil {
			return nil, err
		}
		names, dtypes, archs, err := directives(src)
		if err != nil {
			return nil, fmt.Errorf("kernels: %s: %w", f, err)
		}
		pdl := PDLKernels(src)
		for _, k := range names {
			for _, dt := range dtypes {
				out = append(out, Variant{Kernel: k, File: f, DType: dt, MinArch: archs[dt], PDL: pdl[k]})
			}
		}
	}
	return out, nil
}

// directives reads the "// druto:kernel NAME...", "// druto:dtypes ..."
// and optional "// druto:arch ..." lines of a source file. The arch line
// gives the minimum compute capability ×10 for every dtype ("80") or per
// dtype ("bf16:80 f16:75"); a dtype it does not name gets DefaultMinArch.
// It returns the minimum arch of each declared dtype.
func directives(src []byte) (kernels []string, dtypes []DType, archs map[DType]int, err error) {
	all := DefaultMinArch
	per := map[DType]int{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "// druto:arch "):
			for _, f := range strings.Fields(strings.TrimPrefix(line, "// druto:arch ")) {
				name, num, scoped := strings.Cut(f, ":")
				if !scoped {
					num = name
				}
				n, perr := strconv.Atoi(num)
				if perr != nil || n < DefaultMinArch || n > 999 {
					return nil, nil, nil, fmt.Errorf("bad druto:arch %q (want a compute capability ×10 >= %d, e.g. 80 or bf16:80)", f, DefaultMinArch)
				}
				if !scoped {
					all = n
					continue
				}
				dt, ok := parseDType(name)
				if !ok {
					return nil, nil, nil, fmt.Errorf("bad dtype %q in druto:arch", name)
				}
				per[dt] = n
			}
		case strings.HasPrefix(line, "// druto:kernel "):
			kernels = append(kernels, strings.Fields(strings.TrimPrefix(line, "// druto:kernel "))...)
		case strings.HasPrefix(line, "// druto:dtypes "):
			for _, s := range strings.Fields(strings.TrimPrefix(line, "// druto:dtypes ")) {
				dt, ok := parseDType(s)
				if !ok {
					return nil, nil, nil, fmt.Errorf("bad dtype %q in druto:dtypes", s)
				}
				dtypes = append(dtypes, dt)
			}
		}
	}
	if len(kernels) == 0 || len(dtypes) == 0 {
		return nil, nil, nil, fmt.Errorf("needs '// druto:kernel' and '// druto:dtypes' lines")
	}
	archs = map[DType]int{}
	for _, dt := range dtypes {
		archs[dt] = all
		if n, ok := per[dt]; ok {
			archs[dt] = n
		}
	}
	return kernels, dtypes, archs, nil
}

// PDLKernels returns the kernels a source's "// druto:pdl NAME..." lines
// name, whose body begins with pdl_enter(), and those its
// "// druto:pdl-weights NAME:PARAM,..." lines name, which read only the
// named pointer parameters before pdl_enter() (TestPDLKernelsWait):
// weights no kernel of a decode step writes, or lines prefetched into L2,
// whose later reads see every write.
func PDLKernels(src []byte) map[string]bool {
	out := map[string]bool{}
	for k := range PDLWeights(src) {
		out[k] = true
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "// druto:pdl "); ok {
			for _, k := range strings.Fields(rest) {
				out[k] = true
			}
		}
	}
	return out
}

// PDLWeights returns, for each kernel a "// druto:pdl-weights" line names,
// the pointer parameters it may read before pdl_enter().
func PDLWeights(src []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "// druto:pdl-weights "); ok {
			for _, f := range strings.Fields(rest) {
				k, params, _ := strings.Cut(f, ":")
				out[k] = append(out[k], strings.Split(params, ",")...)
			}
		}
	}
	return out
}

// SourceHash returns the hex sha256 of a source file's bytes, as gen-ptx.sh
// writes it into each PTX header.
func SourceHash(src []byte) string {
	h := sha256.Sum256(src)
	return hex.EncodeToString(h[:])
}

// PTXHeader is what gen-ptx.sh records at the top of each PTX file.
type PTXHeader struct {
	Source, SourceSHA256, DType, Build string
	// Headers maps each header the source includes to its sha256
	// ("// druto-header-sha256: common.cuh HEX" lines).
	Headers map[string]string
}

// ParsePTXHeader reads the druto lines at the top of a PTX file.
func ParsePTXHeader(ptx []byte) (PTXHeader, error) {
	var h PTXHeader
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "// druto-") {
			break
		}
		key, val, _ := strings.Cut(strings.TrimPrefix(line, "// druto-"), ": ")
		switch key {
		case "source":
			h.Source = val
		case "source-sha256":
			h.SourceSHA256 = val
		case "dtype":
			h.DType = val
		case "build":
			h.Build = val
		case "header-sha256":
			name, sum, ok := strings.Cut(val, " ")
			if !ok {
				return h, fmt.Errorf("kernels: PTX header line %q: want NAME SHA256", line)
			}
			if h.Headers == nil {
				h.Headers = map[string]string{}
			}
			h.Headers[name] = sum
		}
	}
	if h.Source == "" || h.SourceSHA256 == "" || h.DType == "" {
		return h, fmt.Errorf("kernels: PTX without a druto header (source, source-sha256, dtype)")
	}
	return h, nil
}

// ptxFiles lists the embedded PTX files.
func ptxFiles() ([]string, error) {
	files, err := fs.Glob(sources, "ptx/*.ptx")
	sort.Strings(files)
	return files, err
}
