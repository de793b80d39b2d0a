package train

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
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

// TestGreedyMatchesPyTorch: greedy generation over druto's key/value cache
// gives the token ids of PyTorch's (../shared/anchors/torch_sample_bench.py,
// with and without its cache) on the same checkpoint and prompt. The weights
// are GPT-2's initialisation times 4, so that the argmax moves around
// rather than repeating one token.
func TestGreedyMatchesPyTorch(t *testing.T) {
	py := torchPython(t)
	script, err := filepath.Abs("../../../shared/anchors/torch_sample_bench.py")
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		testreq.Skip(t, "DRUTO_TESTDATA_TESTS", "the PyTorch anchor (../shared/anchors) is missing: %v", err)
	}
	cfg := gpt.Config{Vocab: 300, MaxSeq: 64, Layers: 2, Heads: 2, Channels: 32}
	params := gpt.InitParams(cfg, 4)
	for i := range params {
		params[i] *= 4
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if _, err := SaveModel(path, cfg, params); err != nil {
		t.Fatal(err)
	}
	m, err := gpt.New(cpu.New(device.Options{Fused: true, Threads: 2}), cfg, amp.FP32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.SetParams(params); err != nil {
		t.Fatal(err)
	}
	prompt := []int32{5, 17, 250, 3, 99, 42, 7}
	const n = 48
	s, err := NewSampler(m, Unmasked(cfg.Vocab), SampleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Generate(prompt, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(prompt))
	for i, p := range prompt {
		ids[i] = strconv.Itoa(int(p))
	}
	cmd := exec.Command(py, script, path, strconv.Itoa(n), "0", "1")
	cmd.Env = append(os.Environ(), "PROMPT_IDS="+strings.Join(ids, ","), "DEV=cpu", "DTYPE=fp32")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		Equal bool    `json:"greedy_tokens_equal"`
		IDs   []int32 `json:"generated_ids"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("%s printed %q: %v", script, out, err)
	}
	distinct := map[int32]bool{}
	for _, id := range res.IDs {
		distinct[id] = true
	}
	if !res.Equal || len(distinct) < 4 {
		t.Fatalf("PyTorch's own paths disagree (%v) or its greedy output repeats (%d distinct ids): %v", res.Equal, len(distinct), res.IDs)
	}
	if !slices.Equal(got, res.IDs) {
		t.Fatalf("druto %v\nPyTorch %v", got, res.IDs)
	}
	t.Logf("%d greedy tokens equal, %d distinct", n, len(distinct))
}
