package bench

import (
	"sort"
	"strconv"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Peak measures the device's matmul throughput in FLOP/s for the MFU
// denominator and says what it measured: on the CPU a square fp32 GEMM of
// 1024 (its fastest path), on a GPU a square bf16 GEMM of 8192 with fp32
// accumulation (the tensor-core peak MFU is conventionally quoted against),
// the fastest of 8 after a warm-up: a peak is the best the GEMM reaches, and
// on a shared machine a median is dragged down by other processes, which
// inflated MFU past 1 (measured on a loaded 2-core EPYC). The operands are uniform random in [-1, 1):
// a product of zeros runs faster than real data does (measured on an H200:
// ~13% for bf16), which would inflate the peak and understate MFU. MFU
// against a peak measured on the machine is honest anywhere; a datasheet
// figure is not.
func Peak(dev device.Device) (float64, string) {
	n, dt := 1024, tensor.F32
	if !isCPU(dev) {
		n, dt = 8192, tensor.BF16
	}
	a, err1 := dev.Alloc(dt, n, n)
	w, err2 := dev.Alloc(dt, n, n)
	o, err3 := dev.Alloc(dt, n, n)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, "not measured (allocation failed)"
	}
	defer func() { dev.Free(a); dev.Free(w); dev.Free(o) }()
	rng := tensor.NewRNG(1)
	host := tensor.New(dt, n, n)
	vals := make([]float32, n*n)
	for _, dst := range []*tensor.Tensor{a, w} {
		for i := range vals {
			vals[i] = 2*rng.Float32() - 1
		}
		if err := host.SetF32(vals); err != nil {
			return 0, "not measured: " + err.Error()
		}
		dev.Upload(dst, host)
	}
	var ts []float64
	for i := 0; i < 9; i++ {
		start := time.Now()
		dev.Matmul(o, nil, a, w, nil, n, n, n, device.None)
		if err := dev.Sync(); err != nil {
			return 0, "not measured: " + err.Error()
		}
		if i > 0 {
			ts = append(ts, time.Since(start).Seconds())
		}
	}
	sort.Float64s(ts)
	flops := 2 * float64(n) * float64(n) * float64(n) / ts[0]
	return flops, "measured " + dt.String() + " matmul " + strconv.Itoa(n) + "^3 on this device"
}

func isCPU(dev device.Device) bool { return len(dev.Name()) >= 3 && dev.Name()[:3] == "cpu" }
