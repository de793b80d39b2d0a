package main

// detect.go: `druto detect [--json]`, what backend druto would use and why.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/druto/druto"
	"github.com/druto/druto/internal/atomicfile"
)

func init() {
	register("detect", "what backend druto would use and why (GPU, libraries, kernels, self-tests)", runDetect)
}

func runDetect(args []string) error {
	fs := newFlags("detect")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	out := fs.String("o", "", "also write the JSON report to this file")
	noCache := fs.Bool("no-cache", false, "compile the kernels afresh instead of using the kernel cache")
	threads := fs.Int("threads", 0, "CPU threads of the reference the self-tests compare with (0: all cores)")
	fused := fs.Bool("fused", os.Getenv("DRUTO_FUSED") != "0", "check the fused form, which train and bench use by default (false: the decomposed baseline; env DRUTO_FUSED=0)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: druto detect [--json] [-o FILE] [--no-cache]\n\n"+
			"Reports the backend druto would use and why, the CUDA driver and libraries (path, version),\n"+
			"the devices, and for each fused kernel how it was built and its self-test: the verdict of\n"+
			"the conformance cases (every op, every form) that launched it, against the CPU reference.\nExits 0 on a machine without a GPU: the CPU is a supported backend.\n"+
			"Environment: DRUTO_CUDA_LIB_DIR (searched first), DRUTO_NO_NVRTC=1 (use the embedded PTX).")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	r := druto.DetectWith(context.Background(), druto.Options{NoCache: *noCache, Threads: *threads, Fused: *fused})
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	js = append(js, '\n')
	if *out != "" {
		if err := atomicfile.WriteFile(*out, js); err != nil {
			return err
		}
	}
	if *asJSON {
		_, err = os.Stdout.Write(js)
		return err
	}
	printReport(os.Stdout, r)
	return nil
}

// printReport writes the report for a person.
func printReport(w io.Writer, r druto.Report) {
	fmt.Fprintf(w, "backend   %s: %s\n", r.Backend, r.Reason)
	if r.CPU != "" {
		fmt.Fprintf(w, "cpu       %s\n", r.CPU)
	}
	if r.Precision != "" {
		fmt.Fprintf(w, "precision %s\n", r.Precision)
	}
	if r.FP8Note != "" {
		fmt.Fprintf(w, "fp8       %s\n", r.FP8Note)
	}
	if !r.GPUSupport {
		fmt.Fprintln(w, "build     no GPU support (CGO_ENABLED=0)")
		return
	}
	if r.Driver != nil {
		fmt.Fprintf(w, "driver    CUDA %s, NVIDIA %s (%s)\n", r.Driver.CUDA, orDash(r.Driver.Version), r.Driver.Path)
	}
	fmt.Fprintln(w, "libraries")
	for _, l := range r.Libraries {
		if l.Found {
			fmt.Fprintf(w, "  %-9s %-12s %s\n", l.Name, l.Version, l.Path)
		} else {
			fmt.Fprintf(w, "  %-9s %-12s %s\n", l.Name, "unavailable", l.Error)
		}
	}
	if len(r.Devices) > 0 {
		fmt.Fprintln(w, "devices")
	}
	for _, d := range r.Devices {
		fmt.Fprintf(w, "  %d  %s  cc %s  %d SMs  %.1f GiB", d.Ordinal, d.Name, d.CC, d.SMs, gib(d.TotalMem))
		if d.FreeBytes > 0 {
			fmt.Fprintf(w, " (%.1f GiB free)", gib(d.FreeBytes))
		}
		fmt.Fprintln(w)
	}
	if len(r.Kernels) > 0 {
		fmt.Fprintln(w, "kernels")
	}
	for _, k := range r.Kernels {
		fmt.Fprintf(w, "  %-18s %-4s %-6s %-15s", k.Name, k.DType, k.Arch, k.Status)
		switch {
		case k.Error != "":
			fmt.Fprintf(w, " error: %s", firstLine(k.Error))
		case k.SelfTest != nil && k.SelfTest.Unused:
			fmt.Fprintf(w, " compile %7.1f ms  load %6.1f ms  self-test: no op launches this variant", k.CompileMS, k.LoadMS)
		case k.SelfTest != nil:
			verdict := "pass"
			if !k.SelfTest.Pass {
				verdict = "FAIL " + k.SelfTest.Error
			}
			fmt.Fprintf(w, " compile %7.1f ms  load %6.1f ms  self-test %s (%d cases, max rel err %.2g)",
				k.CompileMS, k.LoadMS, verdict, len(k.SelfTest.Cases), k.SelfTest.MaxRelErr)
		}
		fmt.Fprintln(w)
		if k.Fallback != "" && k.Status == "ptx-jit" {
			fmt.Fprintf(w, "  %18s why not NVRTC: %s\n", "", firstLine(k.Fallback))
		}
	}
	if len(r.OpTests) > 0 {
		failed, unsupported := 0, 0
		for _, c := range r.OpTests {
			switch {
			case !c.Pass:
				failed++
			case c.Unsupported:
				unsupported++
			}
		}
		fmt.Fprintf(w, "op tests  %d conformance cases against the CPU reference: %d failed, %d unsupported on this GPU\n",
			len(r.OpTests), failed, unsupported)
		for _, c := range r.OpTests {
			if !c.Pass {
				fmt.Fprintf(w, "  FAIL %s: %s\n", c.Case, firstLine(c.Error))
			}
		}
	}
	if len(r.StepChecks) > 0 {
		fmt.Fprintln(w, "step checks (one training step of the tiny model, GPU vs CPU)")
	}
	for _, s := range r.StepChecks {
		if s.Error != "" {
			fmt.Fprintf(w, "  %-4s unavailable: %s\n", s.Policy, firstLine(s.Error))
			continue
		}
		verdict := "pass"
		if !s.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %-4s %s  loss rel err %.2g  gradients %.2g  worst %s %.2g  norm %.2g  (limit %.2g)  AdamW %.2g  working copy %.2g\n",
			s.Policy, verdict, s.LossRelErr, s.GradRelErr, s.Worst, s.WorstErr, s.NormRelErr, s.Limit, s.OptimRelErr, s.WorkRelErr)
	}
	if r.Launch != "" {
		fmt.Fprintf(w, "launches  %s\n", r.Launch)
	}
	if r.Attention != "" {
		fmt.Fprintf(w, "attention %s\n", r.Attention)
	}
	if r.Graphs != "" {
		fmt.Fprintf(w, "graphs    %s\n", r.Graphs)
	}
	if r.Fallback != "" {
		fmt.Fprintf(w, "fallback  %s\n", r.Fallback)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "note      %s\n", firstLine(e))
	}
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
