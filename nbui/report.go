package nbui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/druto/druto"
	"github.com/druto/druto/pkg/train"
)

// yesNo translates a boolean.
func yesNo(lang string, b bool) string {
	if b {
		return Sprintf(lang, "yes")
	}
	return Sprintf(lang, "no")
}

// mib formats bytes as MiB or GiB.
func mib(b uint64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// ReportTable is the summary of a detect report: the backend and why,
// the host, the driver, GPU support in the build, fallback and problems.
func ReportTable(lang string, r druto.Report) *Table {
	t := NewTable(lang).WithCaption("What druto found on this machine")
	t.Add(Sprintf(lang, "backend"), r.Backend)
	t.Add(Sprintf(lang, "reason"), Reason(lang, r.Reason))
	t.Add(Sprintf(lang, "host"), fmt.Sprintf("%s/%s, %d CPUs, %s", r.Host.OS, r.Host.Arch, r.Host.CPUs, r.Host.Go))
	t.Add(Sprintf(lang, "GPU support in this build"), yesNo(lang, r.GPUSupport))
	drv := Sprintf(lang, "none")
	if r.Driver != nil {
		drv = "CUDA " + r.Driver.CUDA
		if r.Driver.Version != "" {
			drv += ", " + r.Driver.Version
		}
		drv += " (" + r.Driver.Path + ")"
	}
	t.Add(Sprintf(lang, "CUDA driver"), drv)
	t.Add(Sprintf(lang, "GPUs"), len(r.Devices))
	t.Add(Sprintf(lang, "usable GPU"), yesNo(lang, r.GPUUsable))
	t.Add(Sprintf(lang, "FP8 tensor cores (sm_89 and newer)"), yesNo(lang, r.FP8))
	if r.Fallback != "" {
		t.Add(Sprintf(lang, "fallback"), r.Fallback)
	}
	for _, e := range r.Errors { // a library's own message, quoted as it is
		t.Add(Sprintf(lang, "problem"), strconv.Quote(e))
	}
	if r.Revision != "" {
		t.Add(Sprintf(lang, "revision"), r.Revision)
	}
	t.Add(Sprintf(lang, "detection took"), fmt.Sprintf("%.0f ms", r.Millis))
	return t
}

// LibraryTable lists the native libraries detection looked for: found or
// not, version, file, and why not.
func LibraryTable(lang string, r druto.Report) *Table {
	t := NewTable(lang, "library", "found", "version", "file or reason").WithCaption("Native libraries (loaded at run time)")
	for _, l := range r.Libraries {
		where := l.Path
		if !l.Found && l.Error != "" { // the loader's own message, quoted as it is
			where = strconv.Quote(l.Error)
		}
		t.Add(l.Name, yesNo(lang, l.Found), l.Version, where)
	}
	return t
}

// DeviceTable lists the CUDA devices: name, compute capability, SMs,
// memory (free memory is measured on device 0 only).
func DeviceTable(lang string, r druto.Report) *Table {
	t := NewTable(lang, "#", "GPU", "compute capability", "SMs", "memory", "free", "L2", "clock").WithCaption("CUDA devices")
	for _, d := range r.Devices {
		free := "-"
		if d.FreeBytes > 0 {
			free = mib(d.FreeBytes)
		}
		t.Add(d.Ordinal, d.Name, d.CC+" ("+d.Arch+")", d.SMs, mib(d.TotalMem), free,
			mib(uint64(d.L2Bytes)), fmt.Sprintf("%d MHz", d.ClockKHz/1000))
	}
	return t
}

// KernelTable lists each kernel variant built on a GPU (fused kernels and
// the decomposed baseline's): how it was obtained (NVRTC compile, cache, PTX
// JIT), timings, resources and its self-test against the CPU reference.
func KernelTable(lang string, ks []druto.Kernel) *Table {
	t := NewTable(lang, "kernel", "dtype", "arch", "status", "compile ms", "load ms",
		"registers", "shared B", "local B", "max threads", "self-test", "max rel. error", "note").
		WithCaption("Kernels")
	for _, k := range ks {
		regs, smem, local, threads := "-", "-", "-", "-"
		if a := k.Attr; a != nil {
			regs, smem, local, threads = fmt.Sprint(a.Registers), fmt.Sprint(a.SharedStatic), fmt.Sprint(a.Local), fmt.Sprint(a.MaxThreads)
		}
		st, rel := "-", "-"
		if k.SelfTest != nil && !k.SelfTest.Unused {
			st, rel = Sprintf(lang, "pass"), fmt.Sprintf("%.2e", k.SelfTest.MaxRelErr)
			if !k.SelfTest.Pass {
				st = Sprintf(lang, "FAIL")
			}
		}
		note := k.Error
		if note == "" {
			note = k.Fallback
		}
		if note == "" {
			note = k.CacheErr
		}
		t.Add(k.Name, k.DType, k.Arch, string(k.Status), fmt.Sprintf("%.1f", k.CompileMS), fmt.Sprintf("%.1f", k.LoadMS),
			regs, smem, local, threads, st, rel, firstLine(note))
	}
	return t
}

// SelfTestCounts returns how many kernels of ks passed their self-test
// (the conformance cases that launched them), of how many were tested.
func SelfTestCounts(ks []druto.Kernel) (passed, total int) {
	for _, k := range ks {
		if k.SelfTest == nil || k.SelfTest.Unused {
			continue
		}
		total++
		if k.SelfTest.Pass {
			passed++
		}
	}
	return passed, total
}

// SelfTestTable lists the self-tested kernels of ks (every one, or with
// all false only the failed ones): the number of conformance cases that
// launched each, the largest relative error and the verdict.
func SelfTestTable(lang string, ks []druto.Kernel, all bool) *Table {
	t := NewTable(lang, "kernel", "dtype", "cases", "max rel. error", "verdict").
		WithCaption("Self-tests against the CPU reference")
	for _, k := range ks {
		st := k.SelfTest
		if st == nil || st.Unused || (st.Pass && !all) {
			continue
		}
		v := Sprintf(lang, "pass")
		if !st.Pass {
			v = Sprintf(lang, "FAIL") + ": " + firstLine(st.Error)
		}
		t.Add(k.Name, k.DType, len(st.Cases), fmt.Sprintf("%.2e", st.MaxRelErr), v)
	}
	return t
}

// ShowSelfTests says how many kernels passed their self-tests and lists
// the failed ones, if any.
func ShowSelfTests(lang string, ks []druto.Kernel) {
	passed, total := SelfTestCounts(ks)
	Note(lang, "%d of %d kernels passed their self-tests.", passed, total)
	if passed < total {
		SelfTestTable(lang, ks, false).Show()
	}
}

// StepCheckTable lists detect's step checks: per precision policy, one
// training step of the tiny model on the GPU against the CPU reference.
func StepCheckTable(lang string, cs []train.StepCheck) *Table {
	t := NewTable(lang, "policy", "loss rel. error", "gradients rel. error", "worst tensor", "max rel. error", "limit",
		"AdamW rel. error", "verdict").
		WithCaption("One training step on the GPU against the CPU reference")
	for _, c := range cs {
		if c.Error != "" {
			t.Add(c.Policy, "-", "-", "-", "-", fmt.Sprintf("%.2e", c.Limit), "-", Sprintf(lang, "unavailable")+": "+firstLine(c.Error))
			continue
		}
		v := Sprintf(lang, "pass")
		if !c.Pass {
			v = Sprintf(lang, "FAIL")
		}
		t.Add(c.Policy, fmt.Sprintf("%.2e", c.LossRelErr), fmt.Sprintf("%.2e", c.GradRelErr), c.Worst,
			fmt.Sprintf("%.2e", c.WorstErr), fmt.Sprintf("%.2e", c.Limit), fmt.Sprintf("%.2e", max(c.OptimRelErr, c.WorkRelErr)), v)
	}
	return t
}

// ShowReport shows a detect report: the summary and the libraries, and,
// when there are any, the GPUs, the kernels, the self-test verdict and the
// step checks.
func ShowReport(lang string, r druto.Report) {
	ReportTable(lang, r).Show()
	if len(r.Libraries) > 0 {
		LibraryTable(lang, r).Show()
	}
	if len(r.Devices) > 0 {
		DeviceTable(lang, r).Show()
	}
	if len(r.Kernels) > 0 {
		KernelTable(lang, r.Kernels).Show()
		ShowSelfTests(lang, r.Kernels)
	}
	if len(r.StepChecks) > 0 {
		StepCheckTable(lang, r.StepChecks).Show()
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
