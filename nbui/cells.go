package nbui

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/druto/druto"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/plotting"
	"gonum.org/v1/plot"
)

// Check ends the notebook cell with a one-line message on standard error
// when err is not nil. GoNB runs each cell as a program of its own, so the
// exit ends that cell only; outside a notebook it ends the program.
func Check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// CompileTable compiles every kernel source (its bf16 module) with NVRTC
// for each of archs, GPUs that need not be here, and tabulates the compile
// time and code size. It fails only when NVRTC does not load.
func CompileTable(lang string, archs ...string) (*Table, error) {
	cs, err := gpu.CompileKernels(gpu.LoadOptions{}, archs, "bf16")
	if err != nil {
		return nil, err
	}
	nv := ""
	if len(cs) > 0 {
		nv = cs[0].NVRTC
	}
	t := NewTable(lang, "source", "dtype", "target", "compile ms", "code bytes").
		WithCaption("NVRTC %s, compiling for GPUs that are not here", nv)
	for _, c := range cs {
		if c.Err != nil {
			t.Add(c.File, c.DType, c.Arch, "-", compileError(lang, c.Err))
			continue
		}
		t.Add(c.File, c.DType, c.Arch, fmt.Sprintf("%.1f", c.Time.Seconds()*1000), c.Bytes)
	}
	return t, nil
}

// compileError is a failed compile in a table cell: the message of the
// source's #error directive (a kernel that needs a newer GPU says so), as
// quoted text, else the error's first line.
func compileError(lang string, err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "#error directive: "); ok {
		msg, _, _ = strings.Cut(after, "\n")
		return Sprintf(lang, "not built: %s", msg)
	}
	return Sprintf(lang, "not built: %s", strconv.Quote(firstLine(msg)))
}

// FormsTable runs one forward and backward of the preset at B×T on the CPU
// in the fused and the decomposed forms, from the same initialisation and
// tokens, and tabulates the loss, the time and how far the decomposed
// gradients are from the fused ones under the fp32 tolerance rule.
func FormsTable(lang, preset string, B, T int) (*Table, error) {
	cfg, err := gpt.Preset(preset)
	if err != nil {
		return nil, err
	}
	toks, err := data.Encode(data.Corpus(1, max(1<<16, B*T+1)))
	if err != nil {
		return nil, err
	}
	t := NewTable(lang, "form", "device", "loss", "forward + backward ms", "gradients vs fused")
	var ref []float32
	for _, fused := range []bool{true, false} {
		dev, _, err := druto.Open(druto.Options{Backend: druto.BackendCPU, Fused: fused})
		if err != nil {
			return nil, err
		}
		m, err := gpt.New(dev, cfg, amp.FP32)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		loss, err := func() (float32, error) {
			if err := m.Init(1); err != nil {
				return 0, err
			}
			m.ZeroGrad()
			start = time.Now()
			return m.Gradients(toks[:B*T], toks[1:B*T+1], B, T, 1)
		}()
		took := time.Since(start)
		var g []float32
		if err == nil {
			g, err = m.GradValues()
		}
		m.Close()
		if err != nil {
			return nil, err
		}
		form, verdict := "fused", "-"
		if ref == nil {
			ref = g
		} else {
			form, verdict = "decomposed", Sprintf(lang, "rel. error %.1e", tensor.RelErr(g, ref))
			if err := tensor.CloseF32(g, ref, tensor.F32, 1); err != nil {
				verdict += ": " + err.Error()
			} else {
				verdict += ", " + Sprintf(lang, "within the fp32 tolerance")
			}
		}
		t.Add(Sprintf(lang, form), dev.Name(), fmt.Sprintf("%.6f", loss), fmt.Sprintf("%.0f", took.Seconds()*1000), verdict)
	}
	return t, nil
}

// Open opens the device druto picks (the GPU when one works), with fused
// kernels or the decomposed baseline: the opener bench.Sweep takes.
func Open(fused bool) (device.Device, error) {
	dev, _, err := druto.Open(druto.Options{Fused: fused})
	return dev, err
}

// ShowBenchFile shows a committed benchmark report: its table, and its
// speed-up and throughput plots in the notebook's language.
func ShowBenchFile(lang, path string) error {
	rep, err := bench.Load(path)
	if err != nil {
		return err
	}
	BenchTable(lang, rep).Show()
	return showPlots(lang, path, plotting.SpeedUp, plotting.Throughput)
}

// ShowKernelsFile shows a committed kernel micro-benchmark report: the
// achieved bandwidth of each op against the copy ceiling.
func ShowKernelsFile(lang, path string) error {
	return showPlots(lang, path, plotting.Bandwidth)
}

func showPlots(lang, path string, kinds ...func([]plotting.BenchRecord, ...plotting.Option) (*plot.Plot, error)) error {
	b, err := plotting.ReadBench(path)
	if err != nil {
		return err
	}
	for _, kind := range kinds {
		p, err := kind(b.Records, plotting.Lang(lang), plotting.BanglaDigits(lang == "bn"))
		if err != nil {
			return err
		}
		if err := plotting.Show(p); err != nil {
			return err
		}
	}
	return nil
}
