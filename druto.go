// Package druto is where a program or notebook starts: Detect says what
// this machine offers (driver, libraries, GPU, which fused kernels build and
// pass their self-test against the CPU reference), and Open returns the
// device.Device to train on, with the Report behind the choice.
//
// The root only gathers and decides; the parts live where their subjects
// do. gpu.Probe loads the libraries and builds the kernels; every op runs
// the conformance cases of package devicetest on the GPU and on the CPU
// reference, in each form, on NaN-poisoned outputs (gpu.Device.SelfTest),
// and each kernel gets the verdict of the cases that launched it
// (Report.Kernels, Report.OpTests); then one training step of a small
// model (every kernel of the step, forward and backward) runs on the GPU
// and on the CPU under each precision policy and must agree within
// gpt.StepLimit (train.StepChecks, Report.StepChecks). The verdict is kept
// per process and beside the kernel cache (internal/selftest), so Open
// reuses a passing one where Detect tests afresh.
//
// The backend choice lives here, above both implementations, because
// package device holds only the interface. Open returns the GPU device
// (package gpu) when detection finds a GPU whose kernels all build and pass
// their self-tests, else the CPU device (package cpu) with the reason.
package druto

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/druto/druto/internal/selftest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/train"
)

// Revision is the source revision the binary was built from; set it with
// -ldflags "-X github.com/druto/druto.Revision=$(git rev-parse HEAD)".
// When empty, the build's VCS stamp is used, if any.
var Revision string

// Backends Open accepts.
const (
	BackendAuto = "auto" // the GPU when detection finds a usable one, else the CPU
	BackendCPU  = "cpu"
	BackendGPU  = "gpu"
)

// Options choose and configure the device.
type Options struct {
	Backend string          // "auto" (also ""), "cpu" or "gpu"
	Fused   bool            // fused kernels (true) or the decomposed baseline
	Threads int             // CPU worker goroutines; 0 means all cores
	Load    gpu.LoadOptions // where to look for the CUDA libraries
	// CacheDir is the kernel cache; empty means the user cache directory.
	CacheDir string
	// NoCache skips the kernel cache (every detection compiles afresh).
	NoCache bool
}

// Report is what detection found and what it chose. It marshals to the JSON
// of `druto detect --json`.
type Report struct {
	Backend   string `json:"backend"` // "cpu" or "gpu": what Open returns
	Reason    string `json:"reason"`  // why, in a sentence
	GPUUsable bool   `json:"gpu_usable"`
	// GPUSupport is false in a build without cgo, which cannot load CUDA.
	GPUSupport bool   `json:"gpu_support_in_build"`
	Time       string `json:"time"`
	Revision   string `json:"revision,omitempty"`
	Host       Host   `json:"host"`
	// CPU says which path the CPU backend runs: its GEMM library, the
	// instruction set of its elementwise kernels and its threads.
	CPU string `json:"cpu"`
	// Precision is the precision training picks on the backend
	// (train.ChoosePolicy) and why: on a CPU, bf16 only where it has native
	// bf16 dot products (AVX512_BF16) and a bf16 matmul measured faster.
	Precision string `json:"precision,omitempty"`
	// FP8 says whether the GPU has FP8 tensor cores (compute capability
	// 8.9 or newer: Ada, Hopper); false on the CPU. FP8Note says what that
	// means for --amp fp8 (refused everywhere for now: fp8.go).
	FP8       bool          `json:"fp8"`
	FP8Note   string        `json:"fp8_note"`
	Driver    *Driver       `json:"driver,omitempty"`
	Libraries []gpu.LibInfo `json:"libraries,omitempty"`
	Devices   []Device      `json:"devices,omitempty"`
	Kernels   []Kernel      `json:"kernels,omitempty"`
	// OpTests are the conformance cases (package devicetest) the kernels'
	// self-tests ran, each op against the CPU reference in each form.
	OpTests []devicetest.Result `json:"op_tests,omitempty"`
	// StepChecks compare one training step (forward and backward through
	// every kernel of the model) on the GPU with the CPU reference, per
	// policy: the self-test that covers the kernels without one of their own.
	StepChecks []train.StepCheck `json:"step_checks,omitempty"`
	// Graphs says whether the training step runs as a CUDA graph here:
	// "available", or "unavailable: why" (training then uses plain launches).
	Graphs string `json:"graphs,omitempty"`
	// OpTestsCached and StepChecksCached say the verdict came from an
	// earlier run of this program on this GPU and driver (this process or
	// the cache on disk, internal/selftest). Detect runs the op tests afresh;
	// Open reuses a passing verdict.
	OpTestsCached    bool `json:"op_tests_cached,omitempty"`
	StepChecksCached bool `json:"step_checks_cached,omitempty"`
	// Attention says which attention path the GPU runs for the 16-bit
	// policies: the flash kernels or the cuBLAS score GEMMs.
	Attention string `json:"attention,omitempty"`
	// Launch says how the fused kernels are launched: as programmatic
	// dependent launches (sm_90 and newer) or plainly, and why.
	Launch string `json:"launch,omitempty"`
	// Fallback says what a missing or failing kernel means for training.
	Fallback string   `json:"fallback,omitempty"`
	Errors   []string `json:"errors,omitempty"` // problems met on the way, in order
	Millis   float64  `json:"detect_ms"`
}

// Host describes the machine running druto.
type Host struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	Go   string `json:"go"`
	CPUs int    `json:"cpus"`
}

// Driver is the NVIDIA driver as the CUDA driver API and NVML report it.
type Driver = gpu.DriverInfo

// Device is one GPU.
type Device struct {
	gpu.DeviceInfo
	CC        string `json:"compute_capability"`
	Arch      string `json:"arch"`
	FreeBytes uint64 `json:"memory_free_bytes,omitempty"`
}

// Kernel is one fused kernel variant on the device used for detection.
type Kernel struct {
	Name      string              `json:"name"`
	DType     string              `json:"dtype"`
	Arch      string              `json:"arch"`
	Status    gpu.From            `json:"status"` // nvrtc-compiled, nvrtc-cached, ptx-jit or unavailable
	CompileMS float64             `json:"compile_ms,omitempty"`
	LoadMS    float64             `json:"load_ms"`
	Attr      *gpu.FuncAttributes `json:"attributes,omitempty"`
	Fallback  string              `json:"why_not_nvrtc,omitempty"`
	CacheFile string              `json:"cache_file,omitempty"`
	CacheErr  string              `json:"cache_error,omitempty"`
	// SelfTest is the verdict of the conformance cases that launched the
	// kernel (gpu.Device.SelfTest).
	SelfTest *gpu.KernelTest `json:"self_test,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Detect looks for the CUDA driver, libraries and devices, builds every
// fused kernel for device 0 and self-tests it. It never fails: what it
// could not do is in the report, with the backend Open would choose.
func Detect(ctx context.Context) Report { return DetectWith(ctx, Options{}) }

// DetectWith is Detect with the library search, kernel cache and CPU
// reference configured by o.
func DetectWith(ctx context.Context, o Options) Report {
	r, dev := detect(ctx, o, false, true)
	if dev != nil {
		if err := dev.Close(); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	return r
}

// detect is DetectWith; with keep it also returns the GPU device it built
// when the GPU is usable (the caller closes it, which closes its context).
// fresh runs the op tests even when a cached verdict has them.
func detect(ctx context.Context, o Options, keep, fresh bool) (Report, *gpu.Device) {
	start := time.Now()
	r := Report{
		Backend: BackendCPU, Time: start.UTC().Format(time.RFC3339), Revision: revision(),
		Host: Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(), CPUs: runtime.NumCPU()},
		CPU:  cpu.New(device.Options{Threads: o.Threads}).Describe(),
	}
	dev := r.detectGPU(ctx, o, fresh)
	switch {
	case !r.GPUSupport:
		r.Reason = "no GPU support in this build (built with CGO_ENABLED=0); using the CPU"
	case r.Driver == nil:
		r.Reason = "no CUDA driver (libcuda.so.1 not found or not loadable); using the CPU"
	case len(r.Devices) == 0:
		r.Reason = "CUDA driver " + r.Driver.CUDA + " found but no CUDA device; using the CPU"
	case dev == nil:
		r.Reason = fmt.Sprintf("%s found but the GPU device could not be made (see errors); using the CPU", r.Devices[0].Name)
	case !r.GPUUsable && r.failedStep() != "":
		r.Reason = fmt.Sprintf("%s found but a training step on it does not match the CPU reference under %s (see step_checks); using the CPU", r.Devices[0].Name, r.failedStep())
	case !r.GPUUsable:
		r.Reason = fmt.Sprintf("%s found but not every kernel built and passed its self-test (see kernels); using the CPU", r.Devices[0].Name)
	default:
		r.Backend = BackendGPU
		r.Reason = fmt.Sprintf("%s (sm_%d%d) is usable: every kernel built and the self-tests pass", r.Devices[0].Name, r.Devices[0].Major, r.Devices[0].Minor)
	}
	if r.Backend == BackendGPU && dev != nil {
		_, r.Precision = train.ChoosePolicy(dev)
	} else {
		_, r.Precision = train.ChoosePolicy(cpu.New(device.Options{Fused: true, Threads: o.Threads}))
	}
	r.FP8, r.FP8Note = fp8Verdict(r.Devices, false)
	r.Millis = ms(time.Since(start))
	if dev != nil && (!keep || !r.GPUUsable) {
		if err := dev.Close(); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
		dev = nil
	}
	return r, dev
}

// detectGPU fills the driver, library, device and kernel parts and returns
// the GPU device it built (which owns its context), or nil.
func (r *Report) detectGPU(ctx context.Context, o Options, fresh bool) *gpu.Device {
	m, dev, errs := gpu.Probe(ctx, gpu.Config{Options: device.Options{Fused: o.Fused, Threads: o.Threads},
		Load: o.Load, CacheDir: o.CacheDir, NoCache: o.NoCache})
	r.GPUSupport, r.Libraries = m.Support, m.Libraries
	if m.Driver != nil {
		d := *m.Driver
		r.Driver = &d
	}
	for _, info := range m.Devices {
		r.Devices = append(r.Devices, Device{DeviceInfo: info, CC: info.CC(), Arch: info.Arch()})
	}
	if len(r.Devices) > 0 {
		r.Devices[0].FreeBytes = m.FreeBytes
	}
	for _, err := range errs {
		r.Errors = append(r.Errors, err.Error())
	}
	if dev == nil {
		return nil
	}
	r.Attention = dev.AttentionPath()
	r.Launch = dev.PDLStatus()
	usable := true
	for _, k := range dev.Kernels() {
		// A kernel for newer GPUs (flash attention needs sm_80, ErrArch):
		// the op runs its other path here, so the GPU stays usable.
		switch {
		case k.Err != nil && gpu.IsDecodeKernel(k.Kernel):
			// Generation's decode kernels: without them sampling recomputes
			// the window with the training ops; the GPU stays usable.
			dev.DisableDecode(fmt.Sprintf("kernel %s/%s: %v", k.Kernel, k.DType, k.Err))
		case k.Err != nil && !errors.Is(k.Err, gpu.ErrArch):
			usable = false
		}
		r.Kernels = append(r.Kernels, kernelReport(k))
	}
	// The verdict is cached per process and beside the kernel cache
	// (internal/selftest), keyed by the program, GPU, driver and build;
	// detect (fresh) runs the op tests again and refreshes it.
	cache := selftest.Cache{Dir: o.CacheDir, Off: o.NoCache}
	key := ""
	if r.Driver != nil && len(r.Devices) > 0 {
		key = selftest.Key(selftest.Subject{Device: r.Devices[0].DeviceInfo, CUDA: r.Driver.CUDA,
			Libraries: r.Libraries, Kernels: dev.Kernels(), Attention: r.Attention, Fused: o.Fused})
	}
	var v selftest.Verdict
	if ctx.Err() == nil {
		// Every op's conformance cases in every form, against the CPU
		// reference of that form: each kernel's verdict is that of the
		// cases that launched it.
		v, r.OpTestsCached = cache.Ops(key, fresh, func() ([]devicetest.Result, map[string]*gpu.KernelTest) {
			ref := cpu.New(device.Options{Fused: true, Threads: o.Threads})
			plain := cpu.New(device.Options{Fused: false, Threads: o.Threads})
			// A fixed seed: the same inputs every detect, so a verdict is
			// reproducible and never flips with the draw.
			return dev.SelfTest(ref, plain, devicetest.Cases(), selfTestSeed)
		})
		r.OpTests = slices.Clone(v.OpTests)
		failed, dnnFailed, decFailed := 0, 0, 0
		for _, t := range r.OpTests {
			switch {
			case t.Pass:
			case gpu.IsDecodeCase(t.Case):
				// The decode ops failing turns generation's cache off (it
				// recomputes with the training ops): not a reason to refuse
				// the GPU.
				decFailed++
				dev.DisableDecode("op test " + t.Case + " failed")
			case strings.HasPrefix(t.Case, gpu.CuDNNSelfTestMode+": "):
				// cuDNN's attention failing turns it off on the device (the
				// own flash kernels run): not a reason to refuse the GPU.
				dnnFailed++
			default:
				failed++
			}
		}
		if decFailed > 0 {
			r.Errors = append(r.Errors, fmt.Sprintf("the decode ops failed %d op tests (see op_tests); generation recomputes the window instead of using a key/value cache", decFailed))
		}
		if dnnFailed > 0 {
			r.Errors = append(r.Errors, fmt.Sprintf("cuDNN attention failed %d op tests (see op_tests); the own flash kernels run", dnnFailed))
		}
		r.Attention = dev.AttentionPath()
		switch {
		case failed > 0 && os.Getenv(SelfTestEnv) == "report":
			// Diagnosis only: the failures stay in the report, and the
			// step checks below still decide.
			r.Errors = append(r.Errors, fmt.Sprintf("%s=report: %d op tests failed (see op_tests); the GPU is kept usable if the step checks pass", SelfTestEnv, failed))
		case failed > 0:
			usable = false
		}
		for i := range r.Kernels {
			if r.Kernels[i].Error != "" {
				continue
			}
			t := gpu.KernelTest{Pass: true, Unused: true}
			if kt := v.Kernels[r.Kernels[i].Name+"/"+r.Kernels[i].DType]; kt != nil {
				t = *kt
			}
			r.Kernels[i].SelfTest = &t
		}
	}
	if usable && ctx.Err() == nil {
		// Every kernel built and passed: one training step per policy
		// against the CPU reference of the same form checks them together.
		r.StepChecksCached = len(v.Checks) > 0
		if !r.StepChecksCached {
			ref := cpu.New(device.Options{Fused: o.Fused, Threads: o.Threads})
			v.Checks, v.Usable, v.Notes = train.StepChecks(dev, ref, uint64(time.Now().UnixNano()))
			if v.Usable && ctx.Err() == nil {
				v.Graphs = train.GraphCheck(dev)
			}
		}
		if !r.OpTestsCached || !r.StepChecksCached {
			if err := cache.Keep(v); err != nil { // only a whole pass is kept
				r.Errors = append(r.Errors, err.Error())
			}
		}
		r.StepChecks, usable, r.Graphs = v.Checks, v.Usable, v.Graphs
		r.Errors = append(r.Errors, v.Notes...)
	}
	if err := ctx.Err(); err != nil {
		r.Errors = append(r.Errors, "detection cut short: "+err.Error())
		usable = false
	}
	r.GPUUsable = usable
	if !usable {
		r.Fallback = "a kernel is unavailable or failed its self-test: the CPU device is used (see kernels, op_tests and step_checks)"
	}
	return dev
}

// SelfTestEnv, set to "report", keeps the GPU usable when op self-tests
// fail (they are still reported, and the step checks still decide): for
// diagnosing a tolerance on a new GPU, not for training.
const SelfTestEnv = "DRUTO_SELFTEST"

// selfTestSeed draws the inputs of detect's op self-tests.
const selfTestSeed = 1337

// PolicyError returns an error when detection found that a training step
// under p cannot run on the chosen GPU (its step check failed to run), or
// under fp8 where FP8Error would refuse it, nil otherwise: callers check it before training under p, so that the user
// reads why and what to use instead rather than a GEMM error at step 1.
func (r Report) PolicyError(p amp.Policy) error {
	if p == amp.FP8 {
		return fp8Refusal(r.Devices, r.Backend != BackendGPU)
	}
	if r.Backend != BackendGPU {
		return nil
	}
	for _, s := range r.StepChecks {
		if s.Policy == p.String() && s.Error != "" {
			name := "this GPU"
			if len(r.Devices) > 0 {
				name = r.Devices[0].Name
			}
			why, _, _ := strings.Cut(s.Error, "\n")
			return fmt.Errorf("druto: --amp %s is unavailable on %s (a training step under it failed in detect: %s); use another precision, e.g. --amp fp16 or fp32",
				p, name, why)
		}
	}
	return nil
}

// failedStep names the first policy whose step check ran and disagreed with
// the CPU, or fp32 when it could not run; "" when there is none.
func (r *Report) failedStep() string {
	for _, s := range r.StepChecks {
		if !s.Pass && (s.Error == "" || s.Policy == amp.FP32.String()) {
			return s.Policy
		}
	}
	return ""
}

func kernelReport(k *gpu.Built) Kernel {
	kr := Kernel{
		Name: k.Kernel, DType: k.DType.String(), Arch: k.Arch, Status: k.From,
		CompileMS: ms(k.CompileTime), LoadMS: ms(k.LoadTime), Fallback: k.Fallback, CacheFile: k.CacheFile,
	}
	if k.CacheErr != nil {
		kr.CacheErr = k.CacheErr.Error()
	}
	if k.Err != nil {
		kr.Error = k.Err.Error()
	} else {
		a := k.Attr
		kr.Attr = &a
	}
	return kr
}

// Open returns the device to train on and the detection report behind the
// choice. Backend "cpu" skips detection. Backend "auto" detects and returns
// the GPU device when the GPU is usable, else the CPU device; the report's
// Reason says why. Backend "gpu" returns the GPU device or an error saying
// why there is none. A GPU device owns a CUDA context: close it with
// (*gpu.Device).Close when done (device.Device has no Close; a process that
// exits needs none). DRUTO_FUSED=0 in the environment turns fusion off, as
// it does for the CLI, so a notebook run with it measures the baseline.
// Unlike Detect, Open reuses a passing self-test verdict of an earlier run
// of this program on this GPU, driver and build (internal/selftest).
func Open(o Options) (device.Device, Report, error) {
	if os.Getenv("DRUTO_FUSED") == "0" {
		o.Fused = false
	}
	switch o.Backend {
	case BackendCPU:
		r := Report{Backend: BackendCPU, Reason: "the cpu backend was asked for", Time: time.Now().UTC().Format(time.RFC3339),
			Revision: revision(), Host: Host{OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(), CPUs: runtime.NumCPU()}}
		d := cpu.New(device.Options{Fused: o.Fused, Threads: o.Threads})
		r.CPU = d.Describe()
		return d, r, nil
	case "", BackendAuto:
		r, dev := detect(context.Background(), o, true, false)
		if dev != nil {
			return dev, r, nil
		}
		return cpu.New(device.Options{Fused: o.Fused, Threads: o.Threads}), r, nil
	case BackendGPU:
		r, dev := detect(context.Background(), o, true, false)
		if dev != nil {
			return dev, r, nil
		}
		// The reason is auto's ("...; using the CPU"), but --backend gpu
		// falls back to nothing: it stops.
		why := strings.TrimSuffix(r.Reason, "; using the CPU")
		return nil, r, fmt.Errorf("druto: no usable GPU: %s; ask for the cpu backend (or auto, which falls back to the CPU)", why)
	}
	return nil, Report{}, fmt.Errorf("druto: unknown backend %q (want auto, cpu or gpu)", o.Backend)
}

// revision returns Revision or the build's VCS revision.
func revision() string {
	if Revision != "" {
		return Revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
