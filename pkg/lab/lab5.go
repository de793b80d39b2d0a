package lab

// Lab 5: a fused bias + GELU, as a Go twin and as a CUDA kernel.

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// BiasGELUFunc adds bias to each row of inp and applies the tanh-form GELU,
// gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as the epilogue of
// druto's Matmul with GELU does after its product.
// out (N,C), inp (N,C), bias (C)
type BiasGELUFunc func(out, inp, bias []float32, N, C int)

// bgSizes are lab 5's (N, C): N < C first (bias indexed by the row stays
// inside bias there, so that mistake shows as itself), odd sizes, a
// GPT-2 124M width, and C = 1 last.
var bgSizes = [][2]int{{4, 33}, {7, 64}, {16, 768}, {5, 1}}

// bgNames name the sizes in the feedback.
var bgNames = []string{"N", "C"}

type bgCase struct {
	N, C      int
	inp, bias []float32
	want      []float64
}

// newBGCase draws inp and bias and computes the reference: pre = inp +
// bias in float32, as the GELU epilogue adds the bias to its fp32
// accumulator, then the CPU reference's GELU (pkg/device/cpu).
func newBGCase(N, C int, seed uint64) *bgCase {
	rng := tensor.NewRNG(seed)
	c := &bgCase{N: N, C: C, inp: randn(rng, N*C, 1.5, 0), bias: randn(rng, C, 0.5, 0)}
	pre := make([]float32, N*C)
	for i := range N {
		for j := range C {
			pre[i*C+j] = c.inp[i*C+j] + c.bias[j]
		}
	}
	out := tensor.New(tensor.F32, N*C)
	ref().GELU(out, mustF32(pre, N*C), N*C)
	refSync()
	c.want = f64(out.F32())
	return c
}

// check runs fn (the Go twin, or a launch of the kernel) on the case and
// compares out with the reference, diagnosing a mismatch. An error of fn
// (the GPU's) is the failure.
func (c *bgCase) check(fn func(out, inp, bias []float32, N, C int) error) *Failure {
	out := make([]float32, c.N*c.C)
	if err := fn(out, append([]float32(nil), c.inp...), append([]float32(nil), c.bias...), c.N, c.C); err != nil {
		return &Failure{Output: "out", Hint: "launch", Log: err.Error()}
	}
	f := compare("out", out, c.want, []int{c.N, c.C}, tol(&device.GELUForward, c.N*c.C))
	if f != nil {
		f.Hint = diagnose(out, c.want, 0, bgMistakes(c))
	}
	return f
}

func bgCases(seed uint64, fn func(out, inp, bias []float32, N, C int) error) []testCase {
	var cs []testCase
	for k, s := range bgSizes {
		cs = append(cs, testCase{what: sizes(bgNames, s[0], s[1]),
			run: func() *Failure { return newBGCase(s[0], s[1], seed+uint64(k)).check(fn) }})
	}
	return cs
}

// BiasGELU is the exercise of fn, the kernel's Go twin: out against the
// reference on each of lab 5's sizes.
func BiasGELU(fn BiasGELUFunc) Exercise {
	return Exercise{Name: "bias-gelu", cases: bgCases(50, func(out, inp, bias []float32, N, C int) error {
		fn(out, inp, bias, N, C)
		return nil
	})}
}

// bgModel is bias + GELU in float64 with a mistake (variants in
// parentheses): "biasrow" (bias[i] for row i), "biasafter" (gelu(x) +
// bias), "nobias", "erf" (the exact GELU), "half" (no 0.5), "cubic"
// (0 no cubic term, 1 0.044715·x²), "sqrt2pi" (the factor 0 missing, 1
// 2/π, 2 √(π/2)), "transposed" (a (C,N) layout), "bound" (0 the last
// column, 1 the last row, 2 the last element left out), "relu". It
// returns nil where the mistake cannot be modelled (bias[i] past bias's
// end).
func bgModel(c *bgCase, mistake string, variant int) []float64 {
	N, C := c.N, c.C
	if mistake == "biasrow" && N > C {
		return nil
	}
	at := func(i, j int) int { return i*C + j }
	if mistake == "transposed" {
		at = func(i, j int) int { return j*N + i }
	}
	scale, coef, half := math.Sqrt(2/math.Pi), 0.044715, 0.5
	switch mistake {
	case "half":
		half = 1
	case "cubic":
		coef = 0
	case "sqrt2pi":
		scale = []float64{1, 2 / math.Pi, math.Sqrt(math.Pi / 2)}[variant]
	}
	gelu := func(x float64) float64 {
		switch mistake {
		case "erf":
			return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
		case "relu":
			return max(0, x)
		case "cubic":
			if variant == 1 {
				return half * x * (1 + math.Tanh(scale*(x+0.044715*x*x)))
			}
		}
		return half * x * (1 + math.Tanh(scale*(x+coef*x*x*x)))
	}
	out := make([]float64, N*C)
	for i := range N {
		for j := range C {
			k := at(i, j)
			if mistake == "bound" && (variant == 0 && j == C-1 || variant == 1 && i == N-1 || variant == 2 && k == N*C-1) {
				continue
			}
			x, b := float64(c.inp[k]), float64(c.bias[j])
			switch mistake {
			case "biasrow":
				b = float64(c.bias[i])
			case "nobias", "biasafter":
				b = 0
			}
			out[k] = gelu(x + b)
			if mistake == "biasafter" {
				out[k] += float64(c.bias[j])
			}
		}
	}
	return out
}

// bgVariants are the mistakes bgModel knows and how many variants each
// has, in the order diagnose tries them.
var bgVariants = []struct {
	hint string
	n    int
}{{"biasrow", 1}, {"transposed", 1}, {"biasafter", 1}, {"nobias", 1}, {"erf", 1}, {"half", 1}, {"cubic", 2},
	{"sqrt2pi", 3}, {"bound", 3}, {"relu", 1}}

func bgMistakes(c *bgCase) []mistake {
	var ms []mistake
	for _, m := range bgVariants {
		for v := range m.n {
			ms = append(ms, mistake{m.hint, func() []float64 { return bgModel(c, m.hint, v) }})
		}
	}
	return ms
}

// BiasGELUKernelSignature is the signature of the kernel lab 5's CUDA C
// source must define: one thread an element of out (N,C), inp (N,C) and
// bias (C).
const BiasGELUKernelSignature = `extern "C" __global__ void bias_gelu(float* out, const float* inp, const float* bias, int N, int C)`

// BiasGELUKernelName is the kernel's name (extern "C", so unmangled).
const BiasGELUKernelName = "bias_gelu"

// KernelBlock is the threads a block of the kernel's launch: druto
// launches it in one dimension, ⌈N·C/256⌉ blocks of 256 threads, one
// thread an element (the last block's extra threads must do nothing).
const KernelBlock = 256

// BandwidthN and BandwidthC are the sizes the kernel is timed at: an
// MLP's pre-activation of 16 sequences of 1024 tokens and 4096 columns,
// 64M floats (256 MiB in, 256 MiB out), far larger than any GPU's L2.
const (
	BandwidthN = 16 * 1024
	BandwidthC = 4096
)

// StretchGoal is the fraction of the device's copy bandwidth that earns
// the kernel its ★.
const StretchGoal = 0.8

var (
	// ErrNoGPU is what a KernelRunner's GPU returns (wrapped) where there
	// is no GPU to run on: no driver, no device, or a build without cgo.
	ErrNoGPU = errors.New("lab: no GPU")
	// ErrNoNVRTC is what a KernelRunner's Compile returns (wrapped) where
	// NVRTC is not installed.
	ErrNoNVRTC = errors.New("lab: no NVRTC")
	// ErrKernelName is what Compile returns (wrapped) when the code has no
	// kernel called BiasGELUKernelName.
	ErrKernelName = errors.New("lab: no kernel " + BiasGELUKernelName)
)

// CompileError is a kernel that NVRTC did not compile, with its log.
type CompileError struct {
	NVRTC string // NVRTC's version, "11.8"
	Log   string
}

// Error gives NVRTC's version and its log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("lab: NVRTC %s did not compile the kernel:\n%s", e.NVRTC, e.Log)
}

// KernelRunner builds and runs a student's CUDA C kernel for
// BiasGELUKernel (package labcuda's runs it with NVRTC and the CUDA
// driver; tests fake it). Its methods are called in the order GPU,
// Compile, then Launch (once a case) and Bandwidth, then Close.
type KernelRunner interface {
	// GPU opens the GPU and returns its name, or an error wrapping
	// ErrNoGPU where there is none.
	GPU() (string, error)
	// Compile compiles src with NVRTC (for the GPU opened, or for any GPU
	// where there is none) and returns NVRTC's version. Its errors: one
	// wrapping ErrNoNVRTC, a *CompileError, one wrapping ErrKernelName.
	Compile(src string) (nvrtc string, err error)
	// Launch runs the compiled kernel on the GPU with KernelBlock threads
	// a block, one thread an element, and copies out back.
	// out (N,C), inp (N,C), bias (C)
	Launch(out, inp, bias []float32, N, C int) error
	// Bandwidth times the kernel on an (N, C) tensor and a device copy,
	// and returns each one's bandwidth in GB/s (bytes read plus written).
	Bandwidth(N, C int) (kernel, copy float64, err error)
	// Close frees what the runner holds.
	Close() error
}

// BiasGELUKernel is the exercise of the CUDA C kernel src, built and run
// by r: on a GPU, out against the reference on each of lab 5's sizes (the
// Go twin's cases and diagnoses), then its bandwidth against the copy's.
// A kernel that does not compile fails with NVRTC's messages. Where there
// is no GPU the exercise is skipped, ungraded, with one line saying so
// (and whether the kernel compiled, or NVRTC is absent): the Go twin's
// grade counts there.
func BiasGELUKernel(src string, r KernelRunner) Exercise {
	ex := Exercise{Name: "bias-gelu-kernel", cases: bgCases(60, r.Launch)}
	ex.setup = func() (*label, *Failure) { return kernelSetup(src, r) }
	ex.after = func() *label {
		k, cp, err := r.Bandwidth(BandwidthN, BandwidthC)
		if err != nil {
			return &label{format: "Timing it at N=%d, C=%d failed: %v", args: []any{BandwidthN, BandwidthC, err}}
		}
		frac := k / cp
		format := "Bandwidth at N=%d, C=%d: %.0f GB/s, %.0f%% of this GPU's copy bandwidth (%.0f GB/s); the stretch goal is %.0f%% (★)."
		if frac >= StretchGoal {
			format = "★ Bandwidth at N=%d, C=%d: %.0f GB/s, %.0f%% of this GPU's copy bandwidth (%.0f GB/s): the stretch goal of %.0f%% is reached."
		}
		return &label{format: format, args: []any{BandwidthN, BandwidthC, k, 100 * frac, cp, 100 * StretchGoal}}
	}
	ex.done = func() { _ = r.Close() }
	return ex
}

// kernelSetup opens the GPU and compiles src: a skip where there is no GPU
// (or no NVRTC to compile with), a failure where the kernel does not
// compile or the GPU fails.
func kernelSetup(src string, r KernelRunner) (*label, *Failure) {
	build := label{format: "building the kernel"}
	const counts = " It is not graded here: the Go twin's grade above counts."
	gpu, gerr := r.GPU()
	if gerr != nil && !errors.Is(gerr, ErrNoGPU) {
		return nil, &Failure{Output: "GPU", Hint: "gpu", Log: gerr.Error(), label: build}
	}
	ver, cerr := r.Compile(src)
	var ce *CompileError
	switch {
	case gerr != nil && cerr == nil:
		return &label{format: "No GPU here: your kernel compiles (NVRTC %s) but cannot run." + counts, args: []any{ver}}, nil
	case gerr != nil && errors.Is(cerr, ErrNoNVRTC):
		return &label{format: "No GPU here, and no NVRTC to compile your kernel with." + counts}, nil
	case gerr != nil && errors.As(cerr, &ce):
		return &label{format: "No GPU here, and your kernel does not compile (NVRTC %s; its messages below)." + counts + "\n%s",
			args: []any{ce.NVRTC, trimLog(ce.Log)}}, nil
	case gerr != nil && errors.Is(cerr, ErrKernelName):
		return &label{format: "No GPU here: your code compiles (NVRTC %s) but defines no kernel " + BiasGELUKernelName +
			" (extern \"C\" __global__)." + counts, args: []any{ver}}, nil
	case gerr != nil:
		return &label{format: "No GPU here, and NVRTC failed: %v." + counts, args: []any{cerr}}, nil
	case errors.Is(cerr, ErrNoNVRTC):
		return &label{format: "This GPU (%s) has no NVRTC to compile your kernel with (install libnvrtc)." + counts, args: []any{gpu}}, nil
	case errors.As(cerr, &ce):
		return nil, &Failure{Output: "NVRTC " + ce.NVRTC, Hint: "compile", Log: trimLog(ce.Log), label: build}
	case errors.Is(cerr, ErrKernelName):
		return nil, &Failure{Output: "kernel", Hint: "kernelname", Log: cerr.Error(), label: build}
	case cerr != nil:
		return nil, &Failure{Output: "kernel", Hint: "gpu", Log: cerr.Error(), label: build}
	}
	return nil, nil
}

// trimLog keeps NVRTC's messages: no blank lines, at most 12 lines.
func trimLog(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > 12 {
		keep = append(keep[:12], "…")
	}
	return strings.Join(keep, "\n")
}
