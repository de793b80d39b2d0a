package druto

// fp8.go: whether FP8 training can run here (issue 38). FP8 GEMMs need
// FP8 tensor cores, compute capability 8.9 (Ada) or newer, and druto's
// FP8 kernels (the producers that write FP8 with their transposed copy
// and amax) use sm_90's conversion instructions: --amp fp8 trains on
// sm_90 and newer, and is refused elsewhere with the reason that applies.

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
	if !fp8Kernels(devs[0]) {
		return true, fmt.Sprintf("%s (%s) has FP8 tensor cores (e4m3, e5m2), but %s: --amp fp8 is refused", devs[0].Name, devs[0].Arch, fp8KernelsNeed)
	}
	return true, fmt.Sprintf("%s (%s) trains under --amp fp8: the blocks' linear layers in FP8 (e4m3 forward, e5m2 gradients, delayed scaling)",
		devs[0].Name, devs[0].Arch)
}

// fp8KernelsNeed is why sm_89 cannot run druto's FP8 step.
const fp8KernelsNeed = "druto's FP8 kernels need compute capability 9.0 or newer (Hopper: their FP8 conversions are sm_90 instructions)"

// fp8Kernels reports whether druto's FP8 kernels run on d (sm_90+).
func fp8Kernels(d Device) bool { return d.Major >= 9 }

// FP8Error returns why training under --amp fp8 cannot run on backend
// ("auto", "cpu" or "gpu"), from the GPUs the driver lists (no kernel is
// built, nothing is written), or nil where it can: a CPU or a GPU below
// sm_89 has no FP8 tensor cores, and sm_89 lacks the instructions of
// druto's FP8 kernels.
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
	case hw && fp8Kernels(devs[0]):
		return nil
	case hw:
		return fmt.Errorf("--amp fp8: %s has FP8 tensor cores, but %s; this is %s; use --amp bf16",
			devs[0].Name, fp8KernelsNeed, devs[0].Arch)
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
