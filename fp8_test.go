package druto

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device/gpu"
)

func fakeGPU(name string, major, minor int) []Device {
	i := gpu.DeviceInfo{Name: name, Major: major, Minor: minor}
	return []Device{{DeviceInfo: i, CC: i.CC(), Arch: i.Arch()}}
}

// TestFP8Refusal: detect's verdict and train's refusal on the CPU, below
// sm_89 (bf16 or fp16 suggested as the GPU has them) and on sm_89+, where
// FP8 hardware is there but the kernels are not yet.
func TestFP8Refusal(t *testing.T) {
	for _, c := range []struct {
		name string
		devs []Device
		cpu  bool
		hw   bool
		want []string
	}{
		{"no GPU", nil, false, false, []string{"--amp fp8: fp8 needs an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper); this is the CPU (no CUDA GPU found); use --amp bf16"}},
		{"backend cpu", fakeGPU("NVIDIA H200", 9, 0), true, false, []string{"this is the CPU (--backend cpu); use --amp bf16"}},
		{"T4", fakeGPU("Tesla T4", 7, 5), false, false, []string{"this is Tesla T4 (sm_75); use --amp fp16"}},
		{"A100", fakeGPU("NVIDIA A100", 8, 0), false, false, []string{"this is NVIDIA A100 (sm_80); use --amp bf16"}},
		{"L4", fakeGPU("NVIDIA L4", 8, 9), false, true, []string{"not yet implemented on the GPU", "NVIDIA L4 (sm_89)", "use --amp bf16"}},
		{"H200", fakeGPU("NVIDIA H200", 9, 0), false, true, []string{"not yet implemented on the GPU", "NVIDIA H200 (sm_90)"}},
	} {
		hw, note := fp8Verdict(c.devs, c.cpu)
		if hw != c.hw || !strings.HasPrefix(note, map[bool]string{true: "NVIDIA", false: "no: "}[c.hw]) {
			t.Errorf("%s: verdict %v %q", c.name, hw, note)
		}
		err := fp8Refusal(c.devs, c.cpu)
		if err == nil {
			t.Fatalf("%s: fp8 accepted", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
