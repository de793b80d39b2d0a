package druto

// fp8.go: whether FP8 training can run here (issue 38). FP8 GEMMs need
// FP8 tensor cores, compute capability 8.9 (Ada) or newer. druto has the
// FP8 pieces of the GPU (the cast with its transposed copy and amax, the
// cuBLASLt FP8 GEMM, both sm_90; the scales' update on the device) but not
// yet the FP8 training step that uses them (the producing kernels emitting
// FP8, the step around the GEMMs), so for now
// --amp fp8 is refused on every machine, with the reason that applies: the
// hardware where it lacks FP8, "not yet implemented" where it has it.

import (
	"fmt"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device/gpu"
)

// fp8Needs is the hardware requirement, as the refusals word it.
const fp8Needs = "fp8 needs an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper)"

// fp8Verdict says whether the first of devs has FP8 tensor cores and, in
// a sentence, what that means for --amp fp8; cpu says training runs on
// the CPU regardless of the GPUs (--backend cpu).
func fp8Verdict(devs []Device, cpu bool) (hw bool, note string) {
	switch {
	case cpu || len(devs) == 0:
		return false, "no: " + fp8Needs + "; this is the CPU"
	case !amp.FP8Hardware(devs[0].Major, devs[0].Minor):
		return false, fmt.Sprintf("no: %s; this is %s (%s)", fp8Needs, devs[0].Name, devs[0].Arch)
	}
	return true, fmt.Sprintf("%s (%s) has FP8 tensor cores (e4m3, e5m2), but druto's FP8 training step is not written yet: --amp fp8 is refused (issue 38)",
		devs[0].Name, devs[0].Arch)
}

// FP8Error returns why training under --amp fp8 cannot run on backend
// ("auto", "cpu" or "gpu"), from the GPUs the driver lists (no kernel is
// built, nothing is written): a CPU or a GPU below sm_89 has no FP8 tensor
// cores; on sm_89 and newer the GPU kernels are not written yet. It never
// returns nil today.
func FP8Error(backend string, load gpu.LoadOptions) error {
	var devs []Device
	if backend != BackendCPU {
		infos, _ := gpu.Devices(load) // no driver or no GPU: the CPU
		for _, i := range infos {
			devs = append(devs, Device{DeviceInfo: i, CC: i.CC(), Arch: i.Arch()})
		}
	}
	return fp8Refusal(devs, backend == BackendCPU)
}

// fp8Refusal is FP8Error's message for devs.
func fp8Refusal(devs []Device, cpu bool) error {
	hw, _ := fp8Verdict(devs, cpu)
	switch {
	case hw:
		return fmt.Errorf("--amp fp8 is not yet implemented on the GPU: %s (%s) has FP8 tensor cores, but druto's FP8 training step (producers emitting FP8, the step around the FP8 GEMMs) is not written yet; use --amp bf16",
			devs[0].Name, devs[0].Arch)
	case cpu || len(devs) == 0:
		this := "the CPU (no CUDA GPU found)"
		if cpu {
			this = "the CPU (--backend cpu)"
		}
		return fmt.Errorf("--amp fp8: %s; this is %s; use --amp bf16", fp8Needs, this)
	}
	alt := "bf16"
	if devs[0].Major < 8 { // no bf16 tensor cores either (train.Choose)
		alt = "fp16"
	}
	return fmt.Errorf("--amp fp8: %s; this is %s (%s); use --amp %s", fp8Needs, devs[0].Name, devs[0].Arch, alt)
}
