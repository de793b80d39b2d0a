package labcuda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/lab"
)

// solution is the kernel of lab 5's solution notebook.
const solution = `
extern "C" __global__ void bias_gelu(float* out, const float* inp, const float* bias, int N, int C) {
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k < N * C) {
		float x = inp[k] + bias[k % C];
		float u = 0.7978845608f * (x + 0.044715f * x * x * x);
		out[k] = 0.5f * x * (1.0f + tanhf(u));
	}
}
`

// planted returns the solution with old replaced by new (a planted
// mistake), failing if old is not there.
func planted(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(solution, old) {
		t.Fatalf("the solution has no %q", old)
	}
	return strings.Replace(solution, old, new, 1)
}

// TestCompile compiles the solution, a kernel with a syntax error and one
// with another name with NVRTC alone (no GPU needed), and checks the
// exercise's one line on a machine without a GPU.
func TestCompile(t *testing.T) {
	if _, err := cuda.LoadNVRTC(cuda.LoadOptions{}); err != nil {
		testreq.Skip(t, "DRUTO_NVRTC_TESTS", "NVRTC does not load: %v", err)
	}
	r := &Runner{} // no GPU opened: PTX for NoGPUArch
	ver, err := r.Compile(solution)
	if err != nil || ver == "" {
		t.Fatalf("the solution: NVRTC %s: %v", ver, err)
	}
	_, err = r.Compile(planted(t, "float u =", "float u = y +"))
	var ce *lab.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "error") || ce.NVRTC != ver {
		t.Fatalf("a kernel with an undefined name: %v", err)
	}
	t.Logf("NVRTC %s: %s", ver, ce.Log)
	if _, err := r.Compile(planted(t, "bias_gelu(", "biasgelu(")); !errors.Is(err, lab.ErrKernelName) {
		t.Errorf("a kernel of another name: %v", err)
	}
	if _, err := (&Runner{Options: cuda.LoadOptions{NoNVRTC: true}}).Compile(solution); !errors.Is(err, lab.ErrNoNVRTC) {
		t.Errorf("NVRTC hidden: %v", err)
	}
	g := &Runner{}
	_, err = g.GPU()
	if err := g.Close(); err != nil {
		t.Error(err)
	}
	if err == nil {
		t.Log("a GPU is here: the no-GPU line is not shown, TestGPU grades the kernel")
		return
	}
	for _, c := range []struct {
		src, want string
	}{{solution, "your kernel compiles (NVRTC " + ver + ")"}, {planted(t, "x * x * x", "x * x * "), "does not compile"}} {
		res := lab.Run(BiasGELU(c.src), time.Minute)
		en, bn := lab.Feedback("en", res), lab.Feedback("bn", res)
		if !res.Skipped || res.Max != 0 || !strings.Contains(en, "No GPU here") || !strings.Contains(en, c.want) || !strings.Contains(bn, "জিপিইউ নেই") {
			t.Errorf("without a GPU: %+v\n%s\n%s", res, en, bn)
		}
		t.Log(en)
	}
}

// TestGPU grades the solution kernel, planted mistakes and a kernel that
// does not compile on the GPU (DRUTO_REQUIRE_GPU=1 makes a missing GPU a
// failure).
func TestGPU(t *testing.T) {
	g := &Runner{}
	_, err := g.GPU()
	if err != nil {
		gputest.Skip(t, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	res := lab.Run(BiasGELU(solution), time.Minute)
	if !res.Passed || res.Points != res.Max || !strings.Contains(res.Note, "GB/s") {
		t.Fatalf("the solution: %+v\n%s", res, lab.Feedback("en", res))
	}
	t.Log(lab.Feedback("en", res))
	for _, c := range []struct {
		name, src, hint string
	}{
		{"bias indexed by the row", planted(t, "bias[k % C]", "bias[k / C]"), "biasrow"},
		{"no 0.5", planted(t, "0.5f * x", "x"), "half"},
		{"erf", planted(t, "0.5f * x * (1.0f + tanhf(u))", "0.5f * x * (1.0f + erff(x * 0.70710678f))"), "erf"},
		{"the last element left out", planted(t, "k < N * C", "k < N * C - 1"), "bound"},
		{"empty", "extern \"C\" __global__ void bias_gelu(float* out, const float* inp, const float* bias, int N, int C) {}", "empty"},
		{"a syntax error", planted(t, "float u =", "float u = y +"), "compile"},
		{"another name", planted(t, "bias_gelu(", "biasgelu("), "kernelname"},
	} {
		res := lab.Run(BiasGELU(c.src), time.Minute)
		if res.Passed || res.Failure == nil || res.Failure.Hint != c.hint {
			t.Errorf("%s: want hint %q, got %+v\n%s", c.name, c.hint, res.Failure, lab.Feedback("en", res))
		}
	}
}
