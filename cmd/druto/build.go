package main

// build.go: `druto build`, compile every CUDA kernel for this GPU now.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/druto/druto/pkg/device/gpu"
)

func init() {
	register("build", "compile every CUDA kernel for this GPU (or --arch) and report its resources", runBuild)
}

// buildLine is one kernel's result, as printed and as JSON.
type buildLine struct {
	Kernel    string              `json:"kernel"`
	DType     string              `json:"dtype"`
	Arch      string              `json:"arch"`
	Status    string              `json:"status"`
	CompileMS float64             `json:"compile_ms"`
	LoadMS    float64             `json:"load_ms,omitempty"`
	Bytes     int                 `json:"bytes,omitempty"` // code size, for --arch
	Attr      *gpu.FuncAttributes `json:"attributes,omitempty"`
	Fallback  string              `json:"why_not_nvrtc,omitempty"`
	Error     string              `json:"error,omitempty"`
}

func runBuild(args []string) error {
	fs := newFlags("build")
	archs := fs.String("arch", "", "compile only, with NVRTC, for these comma-separated targets (e.g. sm_75,sm_80,compute_75); needs no GPU")
	noCache := fs.Bool("no-cache", false, "ignore and do not write the kernel cache")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: druto build [--no-cache] [--json] | druto build --arch sm_XY[,...]\n\n"+
			"Compiles every fused kernel for the GPU in front of you with NVRTC (or JIT-compiles the\n"+
			"embedded PTX without NVRTC) and prints, per kernel, the compile time or cache hit, registers,\n"+
			"static shared memory, local memory (spills) and max threads per block. On a machine with no\n"+
			"CUDA device it exits 1 with one line saying so: there is nothing to build there, and druto\n"+
			"trains on the CPU (see druto detect).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var lines []buildLine
	var err error
	if *archs != "" {
		lines, err = compileOnly(strings.Split(*archs, ","))
	} else {
		lines, err = buildHere(*noCache)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		js, err := json.MarshalIndent(lines, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(js))
	} else {
		for _, l := range lines {
			printBuildLine(l)
		}
	}
	bad := 0
	for _, l := range lines {
		if l.Error != "" {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d kernels did not build (the ops fall back to their decomposed form)", bad, len(lines))
	}
	return nil
}

func printBuildLine(l buildLine) {
	fmt.Printf("%-18s %-4s %-10s %-15s", l.Kernel, l.DType, l.Arch, l.Status)
	switch {
	case l.Error != "":
		fmt.Printf(" error: %s", firstLine(l.Error))
	case l.Attr != nil:
		timing := fmt.Sprintf("compile %7.1f ms", l.CompileMS)
		if l.Status == string(gpu.FromCache) {
			timing = "cache hit        "
		} else if l.Status == string(gpu.FromPTX) {
			timing = fmt.Sprintf("JIT     %7.1f ms", l.LoadMS)
		}
		fmt.Printf(" %s  regs %3d  smem %5d B  local %4d B  max threads %4d",
			timing, l.Attr.Registers, l.Attr.SharedStatic, l.Attr.Local, l.Attr.MaxThreads)
	default:
		fmt.Printf(" compile %7.1f ms  %d bytes", l.CompileMS, l.Bytes)
	}
	fmt.Println()
	if l.Fallback != "" && l.Status == string(gpu.FromPTX) {
		fmt.Printf("%18s why not NVRTC: %s\n", "", firstLine(l.Fallback))
	}
}

// buildHere builds every kernel for device 0.
func buildHere(noCache bool) ([]buildLine, error) {
	built, err := gpu.BuildKernels(gpu.LoadOptions{}, noCache)
	if errors.Is(err, gpu.ErrNoGPUSupport) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%v; nothing to build: druto trains on the CPU here (druto detect explains)", err)
	}
	lines := make([]buildLine, 0, len(built))
	for _, k := range built {
		l := buildLine{Kernel: k.Kernel, DType: k.DType.String(), Arch: k.Arch, Status: string(k.From),
			CompileMS: millis(k.CompileTime.Microseconds()), LoadMS: millis(k.LoadTime.Microseconds()), Fallback: k.Fallback}
		if k.Err != nil {
			l.Error = k.Err.Error()
		} else {
			a := k.Attr
			l.Attr = &a
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// compileOnly compiles every kernel for each target with NVRTC alone.
func compileOnly(archs []string) ([]buildLine, error) {
	cs, err := gpu.CompileKernels(gpu.LoadOptions{}, archs)
	if err != nil {
		return nil, fmt.Errorf("--arch needs NVRTC: %v", err)
	}
	lines := make([]buildLine, 0, len(cs))
	for _, c := range cs {
		// One compile per source file and dtype: the kernels of a file
		// share it.
		l := buildLine{Kernel: strings.TrimSuffix(c.File, ".cu") + ".*", DType: c.DType, Arch: c.Arch, Status: "nvrtc " + c.NVRTC,
			CompileMS: millis(c.Time.Microseconds()), Bytes: c.Bytes}
		if c.Err != nil {
			l.Error = c.Err.Error()
		}
		lines = append(lines, l)
	}
	return lines, nil
}

func millis(us int64) float64 { return float64(us) / 1000 }
