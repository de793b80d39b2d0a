package train

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
)

// torchPython returns Debian's python3, or the python3 on PATH (the GPU
// machine's, with CUDA PyTorch), whichever can import torch. Without one
// the test skips, unless DRUTO_TORCH_TESTS=require (set by .ci/run, which
// installs python3-torch) turns the skip into a failure.
func torchPython(t *testing.T) string {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import torch").Run() != nil {
		if p, err := exec.LookPath("python3"); err == nil && exec.Command(p, "-c", "import torch").Run() == nil {
			return p
		}
	}
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		if os.Getenv("DRUTO_TORCH_TESTS") == "require" {
			t.Fatalf("DRUTO_TORCH_TESTS=require but %s cannot import torch: %v (apt-get install python3-torch)", py, err)
		}
		t.Skipf("no PyTorch for %s (apt-get install python3-torch); skipping the checkpoint cross-check", py) // require: DRUTO_TORCH_TESTS
	}
	return py
}

// TestCheckpointLoadsInPyTorch saves a trained druto checkpoint and has
// scripts/torch_eval.py load it into a PyTorch GPT-2 (transformers'
// GPT2LMHeadModel when installed, else the script's plain-torch GPT-2 with
// the same names and Conv1D layout) and evaluate the same file with the same
// batching: the losses must agree to 1e-4.
func TestCheckpointLoadsInPyTorch(t *testing.T) {
	py := torchPython(t)
	tr := newTrainer(t, testOptions(20, amp.FP32))
	runSteps(t, tr, 20)
	dir := t.TempDir()
	if err := tr.Save(dir); err != nil {
		t.Fatal(err)
	}
	text := data.Corpus(99, 40000)
	dataPath := filepath.Join(dir, "eval.txt")
	if err := os.WriteFile(dataPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, params, err := LoadModel(filepath.Join(dir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpt.New(cpu.New(device.Options{Fused: true}), cfg, amp.FP32)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetParams(params); err != nil {
		t.Fatal(err)
	}
	toks, _ := data.Encode(text)
	l, err := data.NewLoader(toks, 4, 32)
	if err != nil {
		t.Fatal(err)
	}
	want, err := EvalLoss(m, l, 4, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	// From the package directory, where go test and scripts/gpu-bench.sh run
	// a test binary (runtime.Caller's build-time path is absent where the
	// binary was built in another tree, as on the GPU machine).
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "torch_eval.py"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("torch_eval.py: %v (run the test from pkg/train)", err)
	}
	out, err := exec.Command(py, script, "--checkpoint", filepath.Join(dir, ModelFile), "--data", dataPath, "--batch", "4", "--seq", "32").Output()
	if err != nil {
		t.Fatalf("torch_eval.py: %v\n%s", err, out)
	}
	var res struct{ Loss float64 }
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("torch_eval.py printed %q: %v", out, err)
	}
	rel := math.Abs(res.Loss-float64(want)) / float64(want)
	t.Logf("eval loss: druto %.6f, PyTorch %.6f, relative difference %.2g", want, res.Loss, rel)
	if rel > 1e-4 {
		t.Errorf("PyTorch's loss %.6f differs from druto's %.6f by %.2g > 1e-4", res.Loss, want, rel)
	}
}
