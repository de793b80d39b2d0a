package druto

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device/gpu"
)

func fakeGPU(name string, major, minor int) []Device {
	i := gpu.DeviceInfo{Name: name, Major: major, Minor: minor}
	return []Device{{DeviceInfo: i, CC: i.CC(), Arch: i.Arch()}}
}

// TestFP8Refusal: detect's verdict and train's refusal on the CPU, below
// sm_89 (bf16 or fp16 suggested as the GPU has them) and on sm_89 (FP8
// tensor cores, but not the sm_90 instructions of druto's kernels); on
// sm_90 and newer fp8 is accepted.
func TestFP8Refusal(t *testing.T) {
	for _, c := range []struct {
		name string
		devs []Device
		cpu  bool
		hw   bool
		want []string // nil: accepted
		note string
	}{
		{"no GPU", nil, false, false, []string{"--amp fp8: fp8 needs an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper); this is the CPU (no CUDA GPU found); use --amp bf16"}, "no: "},
		{"backend cpu", fakeGPU("NVIDIA H200", 9, 0), true, false, []string{"this is the CPU (--backend cpu); use --amp bf16"}, "no: "},
		{"T4", fakeGPU("Tesla T4", 7, 5), false, false, []string{"this is Tesla T4 (sm_75); use --amp fp16"}, "no: "},
		{"A100", fakeGPU("NVIDIA A100", 8, 0), false, false, []string{"this is NVIDIA A100 (sm_80); use --amp bf16"}, "no: "},
		{"L4", fakeGPU("NVIDIA L4", 8, 9), false, true, []string{"NVIDIA L4 has FP8 tensor cores", "compute capability 9.0", "sm_89", "use --amp bf16"}, "NVIDIA L4 (sm_89) has FP8 tensor cores"},
		{"H200", fakeGPU("NVIDIA H200", 9, 0), false, true, nil, "NVIDIA H200 (sm_90) trains under --amp fp8"},
	} {
		hw, note := fp8Verdict(c.devs, c.cpu)
		if hw != c.hw || !strings.HasPrefix(note, c.note) {
			t.Errorf("%s: verdict %v %q", c.name, hw, note)
		}
		err := fp8Refusal(c.devs, c.cpu)
		if (err == nil) != (c.want == nil) {
			t.Fatalf("%s: %v, want refused %v", c.name, err, c.want != nil)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		r := Report{Backend: BackendGPU, Devices: c.devs}
		if c.cpu || len(c.devs) == 0 {
			r.Backend = BackendCPU
		}
		if got := r.PolicyError(amp.FP8); (got == nil) != (c.want == nil) {
			t.Errorf("%s: PolicyError(fp8) %v", c.name, got)
		}
	}
}
