package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/record"
	"github.com/druto/druto/pkg/tensor"
)

// poke sets element i of the gradients to v.
func poke(tr *Trainer, g *tensor.Tensor, i int, v float32) {
	h := tensor.New(tensor.F32, g.Numel())
	tr.dev.Download(h, g)
	h.F32()[i] = v
	tr.dev.Upload(g, h)
}

// TestRunFP16OverflowGoesOn: under fp16, steps with Inf and NaN gradients
// inside Run are skipped and logged as such ("skipped": true, null where a
// value is not finite, valid JSON on every line), and the run goes on to its
// end and checkpoints: on the host step, and on the device step (plain and
// as a replayed graph), whose metrics are collected four steps at a time.
func TestRunFP16OverflowGoesOn(t *testing.T) {
	for _, mode := range []StepMode{StepHost, StepDevice, StepGraph} {
		t.Run(mode.String(), func(t *testing.T) { testFP16Overflow(t, mode) })
	}
}

func testFP16Overflow(t *testing.T, mode StepMode) {
	o := testOptions(8, amp.FP16)
	o.OutDir, o.Step, o.LogEvery = t.TempDir(), mode, 4
	bad := map[int]float32{3: float32(math.Inf(1)), 5: float32(math.NaN())}
	if mode != StepHost {
		o.InjectGrad = func(step int) float32 { return bad[step] }
	}
	tr := modeTrainer(t, o)
	if got := tr.GraphStatus(); got != mode.String() {
		t.Fatalf("step mode %q, want %q", got, mode)
	}
	if mode == StepHost {
		tr.gradHook = func(step int, g *tensor.Tensor) {
			switch step {
			case 3:
				poke(tr, g, 1234, bad[3])
			case 5:
				poke(tr, g, 99, bad[5])
			}
		}
	}
	if err := tr.Run(context.Background(), 0, nil); err != nil {
		t.Fatalf("Run stopped on a skipped fp16 step: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(o.OutDir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := record.Lines(raw)
	if len(lines) != 8 {
		t.Fatalf("%d metrics lines, want 8", len(lines))
	}
	for i, l := range lines {
		if !json.Valid(l) {
			t.Fatalf("line %d is not valid JSON: %s", i+1, l)
		}
		skipped := i+1 == 3 || i+1 == 5
		if got := bytes.Contains(l, []byte(`"skipped":true`)); got != skipped {
			t.Errorf("line %d: skipped %v, want %v: %s", i+1, got, skipped, l)
		}
		if skipped && !bytes.Contains(l, []byte(`"grad_norm":null`)) {
			t.Errorf("line %d: a non-finite norm must be null: %s", i+1, l)
		}
	}
	ms, err := ReadMetricsFile(filepath.Join(o.OutDir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !ms[2].StepSkipped || !math.IsNaN(float64(ms[2].GradNorm)) || ms[7].Skipped != 2 || ms[7].StepSkipped {
		t.Errorf("read back: step 3 %+v, step 8 %+v", ms[2], ms[7])
	}
	if _, _, err := LoadModel(filepath.Join(o.OutDir, ModelFile)); err != nil {
		t.Errorf("final checkpoint: %v", err)
	}
}

// TestMetricJSON: a metric with non-finite values marshals to valid JSON
// with nulls; the older form with "skipped" as a count still reads.
func TestMetricJSON(t *testing.T) {
	inf := float32(math.Inf(1))
	b, err := json.Marshal(Metric{Step: 2, Loss: float32(math.NaN()), GradNorm: inf, TokensPerS: math.Inf(1), LossScale: 1, StepSkipped: true, Skipped: 1, ValLoss: inf})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"step":2,"loss":null,"lr":0,"grad_norm":null,"tokens_per_s":null,"ms_per_step":0,"loss_scale":1,"skipped":true,"skipped_steps":1,"val_loss":null}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var m Metric
	if err := json.Unmarshal([]byte(`{"step":4,"loss":1.5,"skipped":3,"val_loss":2}`), &m); err != nil || m.Skipped != 3 || m.StepSkipped || m.Loss != 1.5 || m.ValLoss != 2 {
		t.Errorf("old form: %+v %v", m, err)
	}
}

// poison sets every parameter to NaN, as a diverged update would.
func poison(t *testing.T, tr *Trainer) {
	p, err := tr.Model.Params()
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i] = float32(math.NaN())
	}
	if err := tr.Model.SetParams(p); err != nil {
		t.Fatal(err)
	}
}

// TestNaNLossStopsRun: under fp32 and bf16 a NaN loss stops Run with
// ErrDiverged and one line naming the step and the kept checkpoint, which
// stays intact, loadable and resumable; the metrics stay valid JSON. Under
// fp16 the run goes on through skipped steps, and stops only once
// maxSkipsInRow steps in a row were skipped. The device step (metrics
// collected several steps at a time, as in graph mode) stops at the same
// step with the same message.
func TestNaNLossStopsRun(t *testing.T) {
	for _, mode := range []StepMode{StepHost, StepDevice, StepGraph} {
		t.Run(mode.String(), func(t *testing.T) { testNaNLossStops(t, mode) })
	}
}

func testNaNLossStops(t *testing.T, mode StepMode) {
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		o := testOptions(80, p)
		o.OutDir, o.CheckpointEvery, o.Step, o.LogEvery = t.TempDir(), 2, mode, 3
		tr := modeTrainer(t, o)
		if got := tr.GraphStatus(); got != mode.String() {
			t.Fatalf("step mode %q, want %q", got, mode)
		}
		if err := tr.Run(context.Background(), 4, nil); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(filepath.Join(o.OutDir, ModelFile))
		poison(t, tr)
		if p == amp.FP16 {
			tr.opts.CheckpointEvery = 0 // Save would stop the run at once on NaN weights
		}
		err := tr.Run(context.Background(), 0, nil)
		if !errors.Is(err, ErrDiverged) {
			t.Fatalf("%v: Run on NaN weights: %v, want ErrDiverged", p, err)
		}
		msg := err.Error()
		wantStep := 5
		if p == amp.FP16 {
			wantStep = 4 + maxSkipsInRow
		}
		if strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprintf("at step %d:", wantStep)) || !strings.Contains(msg, "checkpoint of step 4") {
			t.Errorf("%v: message %q", p, msg)
		}
		t.Logf("%v: %s", p, msg)
		after, _ := os.ReadFile(filepath.Join(o.OutDir, ModelFile))
		if !bytes.Equal(before, after) {
			t.Errorf("%v: the last good checkpoint changed", p)
		}
		ms, err := ReadMetricsFile(filepath.Join(o.OutDir, MetricsFile))
		if err != nil || len(ms) != wantStep || !math.IsNaN(float64(ms[wantStep-1].Loss)) {
			t.Errorf("%v: metrics %d lines (want %d), err %v", p, len(ms), wantStep, err)
		}
		re := modeTrainer(t, o)
		if err := re.Resume(o.OutDir); err != nil || re.StepsDone() != 4 {
			t.Errorf("%v: resume from the kept checkpoint: step %d, %v", p, re.StepsDone(), err)
		}
		// Save itself refuses weights that are not finite.
		if err := tr.Save(o.OutDir); !errors.Is(err, ErrDiverged) {
			t.Errorf("%v: Save of NaN weights: %v", p, err)
		}
	}
}

// TestNonFiniteGradsDevice: under bf16 (no loss scaling) an Inf gradient
// with a finite loss stops the run at that step, with the same message on
// the host step and on the device step, whose metrics come back in a batch
// of four; the lines up to that step are logged, the last as skipped.
func TestNonFiniteGradsDevice(t *testing.T) {
	msgs := map[StepMode]string{}
	for _, mode := range []StepMode{StepHost, StepDevice} {
		o := testOptions(8, amp.BF16)
		o.OutDir, o.Step, o.LogEvery = t.TempDir(), mode, 4
		o.InjectGrad = func(step int) float32 {
			if step == 3 {
				return float32(math.Inf(1))
			}
			return 0
		}
		tr := newTrainer(t, o)
		var reported []Metric
		err := tr.Run(context.Background(), 0, func(m Metric) { reported = append(reported, m) })
		if !errors.Is(err, ErrDiverged) {
			t.Fatalf("%v: Run: %v, want ErrDiverged", mode, err)
		}
		msg := strings.ReplaceAll(err.Error(), o.OutDir, "OUT")
		if i := strings.Index(msg, "(loss "); i >= 0 { // the loss's last digits may differ between the paths
			msg = msg[:i] + msg[strings.Index(msg, ")")+1:]
		}
		msgs[mode] = msg
		if !strings.Contains(msg, "at step 3: the gradients are not finite under bf16") || !strings.Contains(msg, "there is no earlier checkpoint") {
			t.Errorf("%v: message %q", mode, err)
		}
		ms, err := ReadMetricsFile(filepath.Join(o.OutDir, MetricsFile))
		if err != nil || len(ms) != 3 || !ms[2].StepSkipped || ms[1].StepSkipped || len(reported) != 3 {
			t.Errorf("%v: %d metrics lines (want 3, the last skipped), %d reported, %v", mode, len(ms), len(reported), err)
		}
		if _, err := os.Stat(filepath.Join(o.OutDir, ModelFile)); err == nil {
			t.Errorf("%v: a checkpoint was written after the divergence", mode)
		}
	}
	if msgs[StepHost] != msgs[StepDevice] {
		t.Errorf("the messages differ:\nhost   %s\ndevice %s", msgs[StepHost], msgs[StepDevice])
	}
}

// modeTrainer is newTrainer for o.Step: StepGraph runs on a CPU device
// whose graphs replay the captured step (replayGrapher), so that graph mode
// runs without a GPU.
func modeTrainer(t *testing.T, o Options) *Trainer {
	if o.Step != StepGraph {
		return newTrainer(t, o)
	}
	trT, vaT := testTokens(t)
	tr, err := New(&replayGrapher{Device: cpu.New(device.Options{Fused: true})}, o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// errKilled stands for a process killed in the middle of a save.
var errKilled = errors.New("killed")

func straightLosses(t *testing.T, o Options) []float32 {
	o.OutDir = ""
	return runSteps(t, newTrainer(t, o), o.Optim.Steps)
}

// resumeAndCompare resumes the run in o.OutDir, runs it to its end and
// checks that its losses equal the straight run's; it returns the step the
// resume started from.
func resumeAndCompare(t *testing.T, o Options, straight []float32) int {
	t.Helper()
	b := newTrainer(t, o)
	if err := b.Resume(o.OutDir); err != nil {
		t.Fatalf("resume: %v", err)
	}
	from := b.StepsDone()
	var got []float32
	if err := b.Run(context.Background(), 0, func(m Metric) { got = append(got, m.Loss) }); err != nil {
		t.Fatal(err)
	}
	for i, l := range got {
		if l != straight[from+i] {
			t.Fatalf("step %d after resuming at %d: loss %v, straight %v", from+i+1, from, l, straight[from+i])
		}
	}
	return from
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in %s: %s", dir, e.Name())
		}
	}
}

// TestKillDuringSave: a save cut after the new model is written (before the
// commit) or between the state's commit and the model's rename leaves a
// folder from which druto sample loads a complete model and Resume
// continues bit-exactly: from the previous checkpoint in the first case,
// from the new one in the second. Stale temp files of a write killed midway
// are removed at the next start.
func TestKillDuringSave(t *testing.T) {
	defer func() { saveHook = nil }()
	o := testOptions(8, amp.FP32)
	straight := straightLosses(t, o)
	for _, c := range []struct {
		stage string
		from  int // the step Resume must continue from
	}{{"model", 4}, {"state", 6}} {
		o.OutDir = t.TempDir()
		a := newTrainer(t, o)
		if err := a.Run(context.Background(), 4, nil); err != nil {
			t.Fatal(err)
		}
		old, _ := os.ReadFile(filepath.Join(o.OutDir, ModelFile))
		for _, name := range []string{ModelFile, StateFile} { // writes killed midway
			os.WriteFile(filepath.Join(o.OutDir, "."+name+".tmp-123456"), old[:100], 0o644)
		}
		runSteps(t, a, 2)
		saveHook = func(stage string) error {
			if stage == c.stage {
				return errKilled
			}
			return nil
		}
		if err := a.Save(o.OutDir); !errors.Is(err, errKilled) {
			t.Fatalf("kill after %s: Save returned %v", c.stage, err)
		}
		saveHook = nil
		// What a user loading the model sees right after the kill.
		if _, _, err := LoadModel(filepath.Join(o.OutDir, ModelFile)); err != nil {
			t.Fatalf("kill after %s: %s does not load: %v", c.stage, ModelFile, err)
		}
		if got, _ := os.ReadFile(filepath.Join(o.OutDir, ModelFile)); !bytes.Equal(got, old) {
			t.Errorf("kill after %s: %s is not the previous model", c.stage, ModelFile)
		}
		if from := resumeAndCompare(t, o, straight); from != c.from {
			t.Errorf("kill after %s: resumed from step %d, want %d", c.stage, from, c.from)
		}
		noTemps(t, o.OutDir)
	}
}

// failingWriter fails with ENOSPC after n bytes, like a full disk.
type failingWriter struct {
	w io.Writer
	n int
}

func (f *failingWriter) Write(b []byte) (int, error) {
	if len(b) <= f.n {
		f.n -= len(b)
		return f.w.Write(b)
	}
	k, _ := f.w.Write(b[:f.n])
	f.n = 0
	return k, &os.PathError{Op: "write", Path: "checkpoint", Err: syscall.ENOSPC}
}

// TestDiskFullDuringSave: a disk that fills up while the model or the state
// is written fails Save with the cause, leaves the previous pair intact (it
// resumes bit-exactly) and no temp file.
func TestDiskFullDuringSave(t *testing.T) {
	defer func() { wrapWriter = nil }()
	o := testOptions(8, amp.FP32)
	straight := straightLosses(t, o)
	for _, file := range []int{1, 2} { // fail the model's write, then the state's
		o.OutDir = t.TempDir()
		a := newTrainer(t, o)
		if err := a.Run(context.Background(), 4, nil); err != nil {
			t.Fatal(err)
		}
		runSteps(t, a, 2)
		n := 0
		wrapWriter = func(w io.Writer) io.Writer {
			if n++; n == file {
				return &failingWriter{w: w, n: 4096}
			}
			return w
		}
		err := a.Save(o.OutDir)
		wrapWriter = nil
		if !errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("file %d: Save on a full disk returned %v", file, err)
		}
		noTemps(t, o.OutDir)
		if from := resumeAndCompare(t, o, straight); from != 4 {
			t.Errorf("file %d: resumed from step %d, want 4", file, from)
		}
	}
}

// rawSafetensors builds a file from a header given as JSON and data bytes.
func rawSafetensors(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// TestCraftedCheckpoint: metadata with huge or negative sizes, a layer count
// the file cannot hold, tensors sharing bytes and NaN weights are refused
// with ErrCorrupt (or a clear error), without a panic and without allocating
// more than the file's size.
func TestCraftedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	params := gpt.InitParams(testCfg, 3)
	if _, err := SaveModel(good, testCfg, params); err != nil {
		t.Fatal(err)
	}
	ts, _, err := readSafetensors(good, 4*maxParams)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(kv ...string) map[string]string {
		m := configMeta(testCfg)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := map[string]map[string]string{
		"vocab 2^62":      meta("vocab_size", "4611686018427387904"),
		"vocab 2^29":      meta("vocab_size", "536870912"),
		"vocab 2^24":      meta("vocab_size", "16777216"), // a plausible count: refused by the tensors, before allocating 2 GB
		"all 2^30":        meta("vocab_size", "1073741824", "n_positions", "1073741824", "n_layer", "1073741824", "n_head", "1", "n_embd", "1073741824"),
		"channels 2^20":   meta("n_embd", "1048576", "n_head", "1"),
		"layers 2^31-1":   meta("n_layer", "2147483647"),
		"layers 1000":     meta("n_layer", "1000"),
		"negative vocab":  meta("vocab_size", "-5"),
		"zero heads":      meta("n_head", "0"),
		"not a number":    meta("n_embd", "32.0"),
		"heads not divid": meta("n_head", "5"),
	}
	for name, m := range cases {
		p := filepath.Join(dir, "crafted.safetensors")
		if _, err := writeSafetensors(p, ts, m); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := LoadModel(p)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: loading allocated %d MB", name, grew>>20)
		}
	}
	// Two tensors on the same bytes: without the check, a header of many
	// such entries multiplies the memory a small file takes.
	data := make([]byte, 64)
	shared := rawSafetensors(`{"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}}`, data)
	if _, _, err := parseSafetensors(shared); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tensors sharing bytes: %v", err)
	}
	// NaN weights load as an error, not as a model that prints NaN.
	params[10] = float32(math.NaN())
	p := filepath.Join(dir, "nan.safetensors")
	if _, err := SaveModel(p, testCfg, params); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadModel(p); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("NaN weights: %v", err)
	}
}

// TestSpecialFiles: a device or a FIFO given as a checkpoint is refused at
// once, without reading from it or blocking.
func TestSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	paths := []string{"/dev/zero"}
	if err := exec.Command("mkfifo", fifo).Run(); err == nil {
		paths = append(paths, fifo)
	} else {
		t.Logf("no FIFO here (%v); checking /dev/zero only", err)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Logf("skipping %s: %v", p, err)
			continue
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := LoadModel(p)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: LoadModel still blocked after 30 s", p)
		}
	}
}

// TestStateValidation: a state file whose loss scale is not finite or not
// above 0, or whose counts do not add up, is refused on resume.
func TestStateValidation(t *testing.T) {
	o := testOptions(6, amp.FP16)
	o.OutDir = t.TempDir()
	if err := newTrainer(t, o).Run(context.Background(), 2, nil); err != nil {
		t.Fatal(err)
	}
	statePath := filepath.Join(o.OutDir, StateFile)
	n := testCfg.NumParams()
	st, m, v, _, err := loadState(statePath, n)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(st)
	for _, c := range []struct{ field, value string }{
		{"scale", "1e39"}, // +Inf in float32
		{"scale", "-1e39"},
		{"scale", "0"},
		{"scale", "-1"},
		{"scale", "3e38"}, // finite, but grows to +Inf
		{"scale", `"NaN"`},
		{"step", "-3"},
		{"opt_steps", "99"},
		{"skipped", "-1"},
		{"data_pos", "-8"},
	} {
		var fields map[string]json.RawMessage
		json.Unmarshal(good, &fields)
		fields[c.field] = json.RawMessage(c.value)
		js, _ := json.Marshal(fields)
		if _, err := writeSafetensors(statePath, []stTensor{
			{Name: "adamw.m", Shape: []int{n}, Data: m}, {Name: "adamw.v", Shape: []int{n}, Data: v},
		}, map[string]string{"druto_state": string(js)}); err != nil {
			t.Fatal(err)
		}
		err := newTrainer(t, o).Resume(o.OutDir)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s %s: resume gave %v, want ErrCorrupt", c.field, c.value, err)
		}
		t.Logf("%s %s: %v", c.field, c.value, err)
	}
}

// TestResumeOtherData: a resume on other training data is refused unless
// Options.DataChanged says it is meant.
func TestResumeOtherData(t *testing.T) {
	o := testOptions(6, amp.FP32)
	o.OutDir = t.TempDir()
	if err := newTrainer(t, o).Run(context.Background(), 2, nil); err != nil {
		t.Fatal(err)
	}
	trainT, valT := testTokens(t)
	other := append([]int32(nil), trainT[:len(trainT)/2]...)
	other[0] ^= 1
	tr, err := New(newTrainer(t, o).dev, o, other, valT)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Resume(o.OutDir); err == nil || !strings.Contains(err.Error(), "other data") {
		t.Errorf("resume on other data: %v", err)
	}
	o.DataChanged = true
	tr, _ = New(tr.dev, o, other, valT)
	if err := tr.Resume(o.OutDir); err != nil || tr.StepsDone() != 2 {
		t.Errorf("resume with DataChanged: step %d, %v", tr.StepsDone(), err)
	}
}

// TestSamplerChecks: the Sampler streams text piece by piece, an error
// from emit stops the generation, Generate returns exactly n tokens, a NaN
// temperature is refused, and logits that are not finite are an error,
// never a token.
func TestSamplerChecks(t *testing.T) {
	tr := newTrainer(t, testOptions(4, amp.FP32))
	rng := tensor.NewRNG(1)
	stop := errors.New("enough")
	pieces := 0
	_, err := newSampler(tr.Model, data.Bytes{}, SampleOptions{Temperature: 0.8}, rng.Uint64()).Generate([]int32{'a'}, 50, func(string) error {
		if pieces++; pieces == 7 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || pieces != 7 {
		t.Errorf("emit error: %v after %d pieces", err, pieces)
	}
	if out, err := Generate(tr.Model, rng, nil, 5, 0); err != nil || len(out) != 5 {
		t.Errorf("Generate: %d tokens, %v", len(out), err)
	}
	if _, err := Generate(tr.Model, rng, nil, 1, float32(math.NaN())); err == nil {
		t.Error("NaN temperature accepted")
	}
	poison(t, tr)
	for _, temp := range []float32{0, 0.8} {
		s, err := NewSampler(tr.Model, nil, SampleOptions{Temperature: temp})
		if err != nil {
			t.Fatal(err)
		}
		if text, err := s.Sample("a", 3, nil); err == nil || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("temperature %g: NaN weights sampled %q, %v", temp, text, err)
		}
	}
}

// TestTransformersHostile: a transformers GPT-2 file (hf.go) gets the same
// checks as druto's own: a config.json that is a FIFO or a device is
// refused without blocking or reading it, a crafted layer count is refused
// before anything is sized from it, and weights that are not finite (here
// in F16) are refused.
func TestTransformersHostile(t *testing.T) {
	real := gpt.Config{Vocab: 300, MaxSeq: 16, Layers: 1, Heads: 2, Channels: 16}
	params := gpt.InitParams(real, 1)
	const cfgJSON = `{"model_type": "gpt2", "n_embd": 16, "n_head": 2, "n_layer": 1, "n_positions": 16, "vocab_size": 300}`
	write := func(t *testing.T, config string, dt string, p []float32) string {
		dir := t.TempDir()
		if config != "" {
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(dir, "model.safetensors")
		writeRawSafetensors(t, path, hfTensors(real, p, true, dt), map[string]string{"format": "pt"})
		return path
	}
	load := func(path string) error { // with a deadline: a blocked read fails the test
		done := make(chan error, 1)
		go func() { _, _, err := LoadModel(path); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Minute):
			t.Fatalf("LoadModel(%s) did not return (blocked?)", path)
			return nil
		}
	}
	if err := load(write(t, cfgJSON, "F16", params)); err != nil {
		t.Fatalf("the plain file does not load: %v", err)
	}
	huge := strings.Replace(cfgJSON, `"n_layer": 1`, `"n_layer": 1073741824`, 1)
	if err := load(write(t, huge, "F32", params)); !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "\n") {
		t.Errorf("n_layer 2^30: %v, want a one-line corrupt-checkpoint error", err)
	}
	nan := append([]float32(nil), params...)
	nan[len(nan)/2] = float32(math.NaN())
	if err := load(write(t, cfgJSON, "F16", nan)); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("a NaN F16 weight: %v", err)
	}
	path := write(t, "", "F32", params)
	cfg := filepath.Join(filepath.Dir(path), "config.json")
	if err := os.Symlink("/dev/zero", cfg); err != nil {
		t.Fatal(err)
	}
	if err := load(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("config.json -> /dev/zero: %v", err)
	}
	path = write(t, "", "F32", params)
	cfg = filepath.Join(filepath.Dir(path), "config.json")
	if exec.Command("mkfifo", cfg).Run() != nil {
		t.Log("mkfifo failed here; the FIFO case is left out")
		return
	}
	if err := load(path); err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("config.json a FIFO: %v", err)
	}
}

// files returns the contents of the regular files in dir, by name.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			out[e.Name()] = string(b)
		}
	}
	return out
}

// TestFreshReplacesAtFirstCheckpoint: a run that replaces another
// (Recipe.Fresh, druto train --overwrite) leaves the old run's files
// byte-identical until its first checkpoint is committed: when its data
// are bad, and when its first save is cut before the commit point, whether
// the process goes on (Run settles the folder) or is killed (the next start
// does). A save cut after the commit point, and a save that completes,
// leave the new run's model, state and log together. No temp file stays.
func TestFreshReplacesAtFirstCheckpoint(t *testing.T) {
	defer func() { saveHook = nil }()
	o := testOptions(4, amp.FP32)
	oldRun := func() (string, map[string]string) {
		o.OutDir = t.TempDir()
		if err := newTrainer(t, o).Run(context.Background(), 4, nil); err != nil {
			t.Fatal(err)
		}
		return o.OutDir, files(t, o.OutDir)
	}
	dir, before := oldRun()
	bad := Recipe{Options: o, Data: filepath.Join(dir, "missing.txt"), Fresh: true}
	if _, err := Start(cpu.New(device.Options{Fused: true}), bad); err == nil {
		t.Fatal("a fresh run on missing data started")
	}
	if got := files(t, dir); !maps.Equal(got, before) {
		t.Errorf("a fresh run that failed to start changed %s: %v, was %v", dir, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(before)))
	}
	for _, c := range []struct {
		stage    string // the save is cut after this stage ("": not cut)
		replaced bool
	}{{"model", false}, {"state", true}, {"metrics", true}, {"", true}} {
		for _, killed := range []bool{false, true} {
			dir, before := oldRun()
			n := o
			n.OutDir, n.Seed = dir, 8 // another model than the old run's
			b := newTrainer(t, n)
			b.fresh = true
			saveHook = func(stage string) error {
				if stage == c.stage {
					return errKilled
				}
				return nil
			}
			var err error
			if killed { // no deferred clean-up: the next start settles the folder
				if err = b.openMetrics(); err != nil {
					t.Fatal(err)
				}
				runSteps(t, b, 2)
				b.emit(Metric{Step: 2, Loss: 1}, nil)
				err = b.Save(dir)
				b.metrics.Close()
				if got := files(t, dir); !c.replaced && !maps.Equal(got, before) {
					for name := range before {
						if got[name] != before[name] {
							t.Errorf("killed after %s: %s changed", c.stage, name)
						}
					}
				}
				if rerr := recoverCheckpoint(dir, false); rerr != nil {
					t.Fatal(rerr)
				}
			} else {
				err = b.Run(context.Background(), 2, nil)
			}
			saveHook = nil
			if (c.stage != "") != errors.Is(err, errKilled) {
				t.Fatalf("cut after %q (killed %v): %v", c.stage, killed, err)
			}
			after := files(t, dir)
			for _, name := range []string{ModelFile, StateFile, MetricsFile} {
				if changed := after[name] != before[name]; changed != c.replaced {
					t.Errorf("cut after %q (killed %v): %s changed %v, want %v", c.stage, killed, name, changed, c.replaced)
				}
			}
			if c.replaced {
				if _, _, err := LoadModel(filepath.Join(dir, ModelFile)); err != nil {
					t.Errorf("cut after %q (killed %v): %v", c.stage, killed, err)
				}
				r := newTrainer(t, n)
				if err := r.Resume(dir); err != nil || r.StepsDone() != 2 {
					t.Errorf("cut after %q (killed %v): resume at step %d: %v", c.stage, killed, r.StepsDone(), err)
				}
				if ms, err := ReadMetricsFile(filepath.Join(dir, MetricsFile)); err != nil || len(ms) == 0 || ms[len(ms)-1].Step != 2 {
					t.Errorf("cut after %q (killed %v): the log holds %+v (%v), want the new run's", c.stage, killed, ms, err)
				}
			} else if !maps.Equal(after, before) {
				t.Errorf("cut after %q (killed %v): the old run's files changed: %v", c.stage, killed, slices.Sorted(maps.Keys(after)))
			}
			noTemps(t, dir)
		}
	}
}
