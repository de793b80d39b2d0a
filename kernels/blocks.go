package kernels

// blocks.go: the one definition of each kernel's block size. A kernel file
// defines every block size it launches with once, as
//
//	// druto:block LN_BWD_BLOCK layernorm_backward layernorm_backward_rf32
//	#define LN_BWD_BLOCK 128
//
// The kernels use the macro (shared-memory sizes, strides, warp counts,
// __launch_bounds__), nvcc (gen-ptx.sh) and NVRTC compile that same text,
// and the Go launchers read the value from the embedded source with Block
// (pkg/device/gpu/blocks.go), so a block size is written in one place only.
// The druto:block line names the kernels launched with blockDim.x = the
// macro's value (one-dimensional blocks): KernelBlocks collects them, and
// pkg/device/gpu's TestLaunchBlocks checks every launch against it.
//
// This file imports nothing from the module (package kernels is a leaf).

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// defineLine matches `#define NAME 123`, optionally followed by a comment.
var defineLine = regexp.MustCompile(`^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+([0-9]+)\s*(//.*)?$`)

// Block returns N of the line `#define MACRO N` (a decimal integer) in the
// embedded kernel source file, e.g. Block("layernorm.cu", "LN_BWD_BLOCK").
func Block(file, macro string) (int, error) { return blockIn(sources, file, macro) }

// MustBlock is Block for the launchers' package-level block sizes: it
// panics when the embedded source lacks the definition, a build defect that
// TestBlocks and pkg/device/gpu's tests report first.
func MustBlock(file, macro string) int {
	n, err := Block(file, macro)
	if err != nil {
		panic(err)
	}
	return n
}

// Define returns N of the line `#define MACRO N` (a non-negative decimal
// integer) in the embedded kernel source file: a launch constant other than
// a block size that the kernel and its launcher share (gradnorm.cu's
// GN_CHUNK).
func Define(file, macro string) (int, error) { return defineIn(sources, file, macro) }

// MustDefine is Define for package-level launch constants; it panics as
// MustBlock does.
func MustDefine(file, macro string) int {
	n, err := Define(file, macro)
	if err != nil {
		panic(err)
	}
	return n
}

func blockIn(fsys fs.FS, file, macro string) (int, error) {
	n, err := defineIn(fsys, file, macro)
	if err != nil {
		return 0, err
	}
	if n <= 0 || n > 1024 || n%32 != 0 {
		return 0, fmt.Errorf("kernels: %s: %s = %d is not a block size (a multiple of 32, at most 1024)", file, macro, n)
	}
	return n, nil
}

func defineIn(fsys fs.FS, file, macro string) (int, error) {
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		return 0, fmt.Errorf("kernels: define %s: %w", macro, err)
	}
	found, n := false, 0
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		m := defineLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != macro {
			continue
		}
		v, err := strconv.Atoi(m[2])
		if err != nil {
			return 0, fmt.Errorf("kernels: %s: #define %s %s: %w", file, macro, m[2], err)
		}
		if found && v != n {
			return 0, fmt.Errorf("kernels: %s: %s is defined twice (%d and %d)", file, macro, n, v)
		}
		found, n = true, v
	}
	if !found {
		return 0, fmt.Errorf("kernels: %s has no line `#define %s <integer>`", file, macro)
	}
	return n, nil
}

// KernelBlocks returns every kernel's block size (threads), from the
// `// druto:block MACRO kernel...` lines of the embedded sources, and an
// error when a line names an unknown macro or a kernel twice, or when a
// kernel of a `// druto:kernel` line has no block line.
func KernelBlocks() (map[string]int, error) { return kernelBlocksIn(sources) }

func kernelBlocksIn(fsys fs.FS) (map[string]int, error) {
	files, err := fs.Glob(fsys, "*.cu")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := map[string]int{}
	var missing []string
	for _, f := range files {
		src, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var declared []string
		sc := bufio.NewScanner(bytes.NewReader(src))
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if rest, ok := strings.CutPrefix(line, "// druto:kernel "); ok {
				declared = append(declared, strings.Fields(rest)...)
				continue
			}
			rest, ok := strings.CutPrefix(line, "// druto:block ")
			if !ok {
				continue
			}
			fields := strings.Fields(rest)
			if len(fields) < 2 {
				return nil, fmt.Errorf("kernels: %s: %q names no kernel", f, line)
			}
			n, err := blockIn(fsys, f, fields[0])
			if err != nil {
				return nil, err
			}
			for _, k := range fields[1:] {
				if _, dup := out[k]; dup {
					return nil, fmt.Errorf("kernels: %s: kernel %s has two block lines", f, k)
				}
				out[k] = n
			}
		}
		for _, k := range declared {
			if _, ok := out[k]; !ok {
				missing = append(missing, f+":"+k)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("kernels: no `// druto:block MACRO kernel` line for %s", strings.Join(missing, ", "))
	}
	return out, nil
}
