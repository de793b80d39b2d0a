package gpu

// microbench_test.go: BenchmarkKernels, the kernel micro-benchmarks
// (microbench.go, BenchKernels) on this machine's GPU, fused against
// decomposed, at GPT-2 124M sizes:
//
//	go test -c -o build/gpu/device-gpu.test ./pkg/device/gpu
//	DRUTO_KERNEL_JSON=bench/results/kernels-h200.json \
//	    build/gpu/device-gpu.test -test.run '^$' -test.bench Kernels -test.benchtime 1x
//
// It prints the table, reports each op's fused time and share of the copy
// bandwidth as benchmark metrics, and with DRUTO_KERNEL_JSON set writes a
// report in pkg/bench's Report format (device, driver, date, git revision;
// one record whose "kernels" entries are the results; written here with the
// same JSON keys, since pkg/bench imports this package) plus the full
// results under "kernel_details". The git revision is DRUTO_GIT_REVISION,
// else build/gpu/REVISION (scripts/gpu-build.sh writes it). Without a GPU
// it skips (DRUTO_REQUIRE_GPU=1 makes that a failure).

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/pkg/gpt"
)

// benchKernel, benchRecord and benchReport have pkg/bench's Kernel, Record
// and Report JSON keys (the fields a kernel record uses).
type benchKernel struct {
	Name        string  `json:"name"`
	Mode        string  `json:"mode"`
	Ms          float64 `json:"ms"`
	GBps        float64 `json:"gbps"`
	CeilingGBps float64 `json:"ceiling_gbps,omitempty"`
}

type benchRecord struct {
	Config  string        `json:"config"`
	Mode    string        `json:"mode"`
	Kernels []benchKernel `json:"kernels"`
}

type benchReport struct {
	Device    string         `json:"device"`
	Driver    string         `json:"driver,omitempty"`
	Date      string         `json:"date"`
	Git       string         `json:"git"`
	GoVersion string         `json:"go"`
	CPUs      int            `json:"cpus"`
	Records   []benchRecord  `json:"records"`
	Details   []KernelResult `json:"kernel_details"`
	Method    string         `json:"method"`
}

func BenchmarkKernels(b *testing.B) {
	fx.once.Do(fx.setup) // the test binary's shared context and devices (gpu_test.go)
	if fx.err != nil {
		if os.Getenv("DRUTO_REQUIRE_GPU") == "1" {
			b.Fatalf("DRUTO_REQUIRE_GPU=1 but no usable GPU: %v", fx.err)
		}
		b.Skipf("no usable GPU, kernel benchmarks skipped: %v", fx.err) // require: DRUTO_REQUIRE_GPU
	}
	fused, plain := fx.fused, fx.plain
	cfg, err := gpt.Preset("gpt2-124M")
	if err != nil {
		b.Fatal(err)
	}
	var rs []KernelResult
	for range b.N {
		if rs, err = BenchKernels(fused, plain, KernelOptions{Layout: cfg.Layout()}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s\n%s", fused.Name(), KernelTable(rs))
	for _, r := range rs {
		if r.Mode == "fused" {
			b.ReportMetric(r.Ms, r.Name+"_ms")
			b.ReportMetric(r.PctOfCeil, r.Name+"_%ceil")
		}
	}
	path := os.Getenv("DRUTO_KERNEL_JSON")
	if path == "" {
		return
	}
	rep := benchReport{Device: fx.ctx.Device.Name, Date: time.Now().UTC().Format(time.RFC3339), Git: "unknown",
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Details: rs,
		Method: "CUDA events around each op, L2 flushed (a read of 4x L2: clean lines only) before every run and the op charged the write-back of its own lines left dirty (the extra time of the same flush after it), 3 warm-up runs, median of 20; " +
			"bytes = each input read once + each output written once, the same for both forms; ceiling = the measured " +
			"device copy bandwidth; " + fused.Name()}
	if fx.libs.NVML != nil {
		if v, err := fx.libs.NVML.DriverVersion(); err == nil {
			rep.Driver = v
		}
	}
	rep.Driver = strings.TrimSpace(rep.Driver + " (CUDA " + fx.libs.Driver.Info().Version + ")")
	if rev := os.Getenv("DRUTO_GIT_REVISION"); rev != "" {
		rep.Git = rev
	} else if raw, err := os.ReadFile("build/gpu/REVISION"); err == nil {
		rep.Git = strings.TrimSpace(string(raw))
	}
	rec := benchRecord{Config: "kernel-microbench", Mode: "bf16"}
	for _, r := range rs {
		rec.Kernels = append(rec.Kernels, benchKernel{r.Name, r.Mode, r.Ms, r.GBps, r.CeilingGBps})
	}
	rep.Records = []benchRecord{rec}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := atomicfile.WriteFile(path, append(js, '\n')); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", path)
}

// TestStreamLaunches: a stream row moves at least streamBytes where 8
// launches suffice, and runs 2 to 8 launches.
func TestStreamLaunches(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  int
	}{{1, 8}, {75 << 20, 7}, {streamBytes / 2, 2}, {streamBytes, 2}, {4 << 30, 2}} {
		if got := streamLaunches(c.bytes); got != c.want {
			t.Errorf("streamLaunches(%d) = %d, want %d", c.bytes, got, c.want)
		}
	}
}

// TestGPUStreamRows: layernorm forward gets its stream rows beside the
// single launch, each reporting the bytes of one launch, and the copy of
// the same bytes as a stream too.
func TestGPUStreamRows(t *testing.T) {
	g, p := gpuDev(t, true), gpuDev(t, false)
	rs, err := BenchKernels(g, p, KernelOptions{Warmup: 1, Repeats: 3, Ops: []string{"copy", "layernorm_fwd"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", KernelTable(rs))
	rows := map[string]KernelResult{}
	for _, r := range rs {
		if r.Name == "layernorm_fwd" {
			rows[r.Mode] = r
		}
	}
	one := rows["fused"]
	for _, m := range []string{"fused-stream", "copy-stream", "cast-stream", "copy-same-bytes"} {
		r, ok := rows[m]
		if !ok {
			t.Fatalf("no layernorm_fwd %s row: %v", m, rs)
		}
		if r.Ms <= 0 || r.GBps <= 0 || r.PctOfCeil <= 0 {
			t.Errorf("%s: %v ms, %v GB/s, %v%%", m, r.Ms, r.GBps, r.PctOfCeil)
		}
		if d := r.Bytes - one.Bytes; d < -32 || d > 0 {
			t.Errorf("%s: %d bytes a launch, the op moves %d", m, r.Bytes, one.Bytes)
		}
	}
	if !strings.Contains(rows["fused-stream"].Shape, "captured as one CUDA graph") {
		t.Errorf("fused-stream shape %q", rows["fused-stream"].Shape)
	}
}

// TestGPUCeilingMeasured: a run whose ops leave out "copy" measures it
// anyway, and every row's ceiling is that copy's GB/s from the same run,
// marked as such; a given ceiling is marked given.
func TestGPUCeilingMeasured(t *testing.T) {
	g, p := gpuDev(t, true), gpuDev(t, false)
	rs, err := BenchKernels(g, p, KernelOptions{Warmup: 1, Repeats: 3, Ops: []string{"gelu_bwd"}})
	if err != nil {
		t.Fatal(err)
	}
	var copyGBps float64
	for _, r := range rs {
		if r.Name == "copy" {
			copyGBps = r.GBps
		}
	}
	if copyGBps <= 0 {
		t.Fatalf("no copy row measured: %+v", rs)
	}
	for _, r := range rs {
		if r.CeilingGBps != copyGBps || r.CeilingSource != "copy" || r.PctOfCeil <= 0 {
			t.Errorf("%s %s: ceiling %v (%q), %v%%; the copy measured %v", r.Name, r.Mode, r.CeilingGBps, r.CeilingSource, r.PctOfCeil, copyGBps)
		}
	}
	rs, err = BenchKernels(g, p, KernelOptions{Warmup: 1, Repeats: 3, Ops: []string{"gelu_bwd"}, CeilingGBps: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Name == "copy" || r.CeilingGBps != 1000 || r.CeilingSource != "given" {
			t.Errorf("given ceiling: %s %s: %v (%q)", r.Name, r.Mode, r.CeilingGBps, r.CeilingSource)
		}
	}
}
