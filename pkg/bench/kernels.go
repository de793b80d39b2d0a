package bench

// kernels.go: the kernel micro-benchmarks of the GPU backend
// (gpu.BenchKernels) as a Record of a Report, for `druto bench` and the
// committed bench/results/kernels-*.json.

import "github.com/druto/druto/pkg/device/gpu"

// KernelRecord wraps kernel micro-benchmark results as a Record (config
// "kernel-microbench", mode "bf16": the BF16 policy's dtypes) whose Kernels
// are the results.
func KernelRecord(rs []gpu.KernelResult) Record {
	r := Record{Config: "kernel-microbench", Mode: "bf16"}
	for _, k := range rs {
		r.Kernels = append(r.Kernels, Kernel{Name: k.Name, Mode: k.Mode, Ms: k.Ms, GBps: k.GBps, CeilingGBps: k.CeilingGBps, CeilingSource: k.CeilingSource, TFLOPs: k.TFLOPs})
	}
	return r
}
