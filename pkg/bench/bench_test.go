package bench

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

func tinyCase(t *testing.T) Case {
	t.Helper()
	cfg, err := gpt.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return Case{Name: "tiny", Config: cfg, Batch: 2, Seq: 32}
}

// TestStepTimesCPU: a short run on the CPU gives a record whose figures are
// consistent with each other (median between min and max, tokens/s from the
// median, MFU from the given peak, memory from gpt.MemoryFor) and whose loss
// is that of a model that has just started to train.
func TestStepTimesCPU(t *testing.T) {
	c := tinyCase(t)
	for _, m := range []Mode{Baseline, {Fused: true, Policy: amp.BF16}} {
		dev := cpu.New(device.Options{Fused: m.Fused, Threads: 2})
		const peak = 1e11
		r, err := StepTimes(dev, c, m, Options{Warmup: 1, Steps: 3}, peak)
		if err != nil {
			t.Fatal(err)
		}
		if r.Config != "tiny" || r.Mode != m.String() || r.Baseline != (m == Baseline) || r.Steps != 3 ||
			r.Batch != 2 || r.Seq != 32 {
			t.Errorf("%s: record %+v", m, r)
		}
		if !(0 < r.StepMsMin && r.StepMsMin <= r.StepMs && r.StepMs <= r.StepMsMax) {
			t.Errorf("%s: min %v, median %v, max %v", m, r.StepMsMin, r.StepMs, r.StepMsMax)
		}
		if r.Timing != TimingHost {
			t.Errorf("%s: timing %q, want %q", m, r.Timing, TimingHost)
		}
		if want := 2 * 32 / (r.StepMs / 1e3); math.Abs(r.TokensPerS-want) > 1e-9*want {
			t.Errorf("%s: %v tokens/s, want %v from the median", m, r.TokensPerS, want)
		}
		if want := c.Config.FLOPsPerToken(32) * r.TokensPerS / peak; math.Abs(r.MFU-want) > 1e-12 {
			t.Errorf("%s: MFU %v, want %v", m, r.MFU, want)
		}
		// Byte-level vocabulary of 256: a fresh model starts near ln 256 = 5.55.
		if !(r.Loss > 3 && r.Loss < 7) {
			t.Errorf("%s: loss %v after 4 steps", m, r.Loss)
		}
		mem := gpt.MemoryFor(c.Config, 2, 32, m.Policy)
		if r.Memory != (Memory{Params: mem.Params, Grads: mem.Grads, Optimizer: mem.Optimizer, Activations: mem.Activations}) {
			t.Errorf("%s: memory %+v, want %+v", m, r.Memory, mem)
		}
	}
}

// TestStepTimesSpanCPU: the device-resident step on the CPU, which has no
// timing marks, says that its times are one span over the steps (min and
// max equal to the median).
func TestStepTimesSpanCPU(t *testing.T) {
	m := Mode{Fused: true, Policy: amp.BF16, Step: train.StepDevice}
	r, err := StepTimes(cpu.New(device.Options{Fused: true, Threads: 2}), tinyCase(t), m, Options{Warmup: 1, Steps: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Timing != TimingSpan || r.StepMsMin != r.StepMs || r.StepMsMax != r.StepMs || r.StepPath != "device" {
		t.Errorf("timing %q (path %q), min %v median %v max %v; want %q, all equal", r.Timing, r.StepPath, r.StepMsMin, r.StepMs, r.StepMsMax, TimingSpan)
	}
}

// TestStepTimesModeMismatch: a mode on a device of the other form is an
// error, not a mislabelled record.
func TestStepTimesModeMismatch(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true, Threads: 1})
	_, err := StepTimes(dev, tinyCase(t), Baseline, Options{Warmup: 1, Steps: 1}, 0)
	if err == nil || !strings.Contains(err.Error(), "fused=true") {
		t.Fatalf("decomposed mode on a fused device: %v", err)
	}
}

func TestSpeedUps(t *testing.T) {
	r := &Report{Records: []Record{
		{Config: "a", Mode: "decomposed+fp32", Baseline: true, StepMs: 120},
		{Config: "a", Mode: "fused+bf16", StepMs: 40},
		{Config: "b", Mode: "fused+bf16", StepMs: 10}, // no baseline: no speed-up
	}}
	got := r.SpeedUps()
	if len(got) != 1 || got["a"]["decomposed+fp32"] != 1 || got["a"]["fused+bf16"] != 3 {
		t.Fatalf("SpeedUps = %v", got)
	}
}

// TestSaveLoad: a report survives the round trip, Save leaves only the
// file, and a corrupt or missing file is an error naming it.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	r := NewReport("cpu (2 threads)")
	r.PeakFLOPs = 2e11
	r.Records = []Record{{Config: "tiny", Mode: "fused+fp32", StepMs: 85.4, Loss: 5.5, Memory: Memory{Params: 4}}}
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("Save left %d entries in its folder", len(es))
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Device != r.Device || got.Date != r.Date || got.PeakFLOPs != r.PeakFLOPs || len(got.Records) != 1 ||
		got.Records[0].StepMs != 85.4 || got.Records[0].Memory.Params != 4 {
		t.Errorf("loaded %+v, saved %+v", got, r)
	}
	if err := os.WriteFile(path, []byte(`{"device": "x", "records": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("truncated report: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "none.json")); err == nil {
		t.Error("missing report loaded")
	}
}

// TestPeakCPU: the CPU peak is a measured GEMM rate, the faster of fp32
// and bf16, positive and below what the cores could possibly do (4 GHz x 2
// AVX-512 FMA units x 32 FLOP = 256 GFLOP/s a core in fp32; VDPBF16PS
// doubles that). A step's MFU against it stays at or below 100% in either
// precision: the peak is measured in the kernels the step runs.
func TestPeakCPU(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true})
	flops, note := Peak(dev)
	t.Logf("%.1f GFLOP/s: %s", flops/1e9, note)
	if ok, _ := regexp.MatchString(`^measured (f32|bf16) matmul (256|512|1024)\^3 on this device$`, note); !ok {
		t.Errorf("note %q", note)
	}
	if limit := float64(dev.Threads()) * 512e9; !(flops > 0 && flops < limit) {
		t.Errorf("peak %v FLOP/s outside (0, %v)", flops, limit)
	}
	cfg, err := gpt.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c := Case{Name: "tiny", Config: cfg, Batch: 8, Seq: 128}
	for _, m := range []Mode{{Fused: true, Policy: amp.FP32}, {Fused: true, Policy: amp.BF16}} {
		r, err := StepTimes(dev, c, m, Options{Warmup: 1, Steps: 3}, flops)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f ms, MFU %.1f%%", m, r.StepMs, 100*r.MFU)
		if !(r.MFU > 0 && r.MFU <= 1) {
			t.Errorf("%s: MFU %.1f%% against the measured peak; want (0, 100%%]", m, 100*r.MFU)
		}
	}
}

// peakCPU is a CPU device that measures its memory as the GPU's allocator
// does: the high-water mark of the bytes of its live tensors.
type peakCPU struct {
	*cpu.Device
	live       map[*tensor.Tensor]int64
	inUse, top int64
	resets     int
}

func (c *peakCPU) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	t, err := c.Device.Alloc(dt, shape...)
	if err == nil {
		c.live[t] = int64(t.Numel()) * int64(dt.Size())
		c.inUse += c.live[t]
		c.top = max(c.top, c.inUse)
	}
	return t, err
}

func (c *peakCPU) Free(t *tensor.Tensor) {
	c.inUse -= c.live[t]
	delete(c.live, t)
}

func (c *peakCPU) ResetMemoryPeak()  { c.top, c.resets = c.inUse, c.resets+1 }
func (c *peakCPU) MemoryPeak() int64 { return c.top }

// TestStepTimesPeak: on a device that measures its memory, the record
// carries the peak of the case, reset before the model is made: at least
// the model, optimizer and activations that gpt.MemoryOn counts (on the
// CPU, which has no scratch of its own, exactly those) plus what an earlier
// case still holds, never that case's stale mark. A device that does not
// measure leaves it 0.
func TestStepTimesPeak(t *testing.T) {
	c := tinyCase(t)
	m := Mode{Fused: true, Policy: amp.BF16}
	dev := &peakCPU{Device: cpu.New(device.Options{Fused: true, Threads: 2}), live: map[*tensor.Tensor]int64{}}
	left, _ := dev.Alloc(tensor.F32, 1<<20) // an earlier case's 4 MiB, still held
	dev.top = 1 << 40                       // and a stale mark
	r, err := StepTimes(dev, c, m, Options{Warmup: 1, Steps: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem := gpt.MemoryOn(dev, c.Config, c.Batch, c.Seq, m.Policy)
	total := mem.Params + mem.Grads + mem.Optimizer + mem.Activations
	held := int64(4 << 20)
	if dev.resets != 1 || r.PeakBytes != held+total {
		t.Errorf("peak %d bytes after %d resets; the step counts %d bytes, %d were held before", r.PeakBytes, dev.resets, total, held)
	}
	t.Logf("tiny B2 T32 bf16: peak %d bytes, counted %d (+%d held)", r.PeakBytes, total, held)
	dev.Free(left)
	r, err = StepTimes(cpu.New(device.Options{Fused: true, Threads: 2}), c, m, Options{Warmup: 1, Steps: 1}, 0)
	if err != nil || r.PeakBytes != 0 {
		t.Fatalf("a device that does not measure: peak %d, %v", r.PeakBytes, err)
	}
}

// TestCPUModel: on Linux the report names the processor, with the vector
// extensions /proc/cpuinfo lists among those the kernels choose between.
func TestCPUModel(t *testing.T) {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		testreq.Skip(t, "DRUTO_OS_TESTS", "no /proc/cpuinfo: %v", err)
	}
	got := NewReport("cpu").CPU
	if strings.Contains(string(raw), "model name") && got == "" {
		t.Fatal("the report names no CPU where /proc/cpuinfo has a model name")
	}
	if strings.Contains(string(raw), " avx2 ") && !strings.Contains(got, "avx2") {
		t.Errorf("CPU %q: avx2 missing", got)
	}
	t.Logf("cpu: %s", got)
}
