package bench

import (
	"sort"
	"strconv"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Peak measures the device's matmul throughput in FLOP/s for the MFU
// denominator and says what it measured: on the CPU square GEMMs of 256,
// 512 and 1024 in fp32 and in bf16, the fastest (a step runs its linear
// layers in its policy's kernel, bf16 on a CPU with AVX512_BF16 being faster
// than fp32, and at a small model's widths, where the CPU's GEMM may run
// faster than at 1024: a peak of fp32 at 1024 alone put steps' MFU above
// 100%), on a GPU a square bf16 GEMM of 8192 with fp32 accumulation (the
// tensor-core peak MFU is conventionally quoted against). Each is the
// fastest of 8 after a warm-up: a peak is the best the GEMM reaches, and
// on a shared machine a median is dragged down by other processes, which
// also inflated MFU past 1. The operands are uniform random in [-1, 1): a
// product of zeros runs faster than real data does (~13% for bf16 on an
// H200), which would inflate the peak and understate MFU. MFU against a
// peak measured on the machine, in the step's own kernels, is honest
// anywhere; a datasheet figure is not.
func Peak(dev device.Device) (float64, string) {
	if !isCPU(dev) {
		return peakOf(dev, tensor.BF16, 8192)
	}
	var best float64
	var note string
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, n := range []int{256, 512, 1024} {
			if flops, what := peakOf(dev, dt, n); flops > best {
				best, note = flops, what
			}
		}
	}
	return best, note
}

// peakOf is the fastest of 8 square n×n×n matmuls of dt on dev, in FLOP/s,
// and what it measured.
func peakOf(dev device.Device, dt tensor.DType, n int) (float64, string) {
	a, err1 := dev.Alloc(dt, n, n)
	w, err2 := dev.Alloc(dt, n, n)
	o, err3 := dev.Alloc(dt, n, n)
	if err1 != nil || err2 != nil || err3 != nil {
		for _, t := range []*tensor.Tensor{a, w, o} {
			if t != nil {
				dev.Free(t)
			}
		}
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
	best, err := fastest(dev, func() { dev.Matmul(o, nil, a, w, nil, n, n, n, device.None) })
	if err != nil {
		return 0, "not measured: " + err.Error()
	}
	return 2 * float64(n) * float64(n) * float64(n) / best, "measured " + dt.String() + " matmul " + strconv.Itoa(n) + "^3 on this device"
}

// fastest runs op 9 times, waiting for the device after each, and returns
// the fastest of the last 8 in seconds (the first is a warm-up).
func fastest(dev device.Device, op func()) (float64, error) {
	var ts []float64
	for i := 0; i < 9; i++ {
		start := time.Now()
		op()
		if err := dev.Sync(); err != nil {
			return 0, err
		}
		if i > 0 {
			ts = append(ts, time.Since(start).Seconds())
		}
	}
	sort.Float64s(ts)
	return ts[0], nil
}

func isCPU(dev device.Device) bool { return len(dev.Name()) >= 3 && dev.Name()[:3] == "cpu" }

// PeakFP8 measures the device's FP8 matmul throughput in FLOP/s, the
// ceiling a profile's FP8 GEMM rows are taken against (they would pass
// 100% of the bf16 peak): a square e4m3 × e4m3 product of 8192 with fp32
// accumulation into bf16 (device.FP8's MatmulFP8, what an FP8 step runs),
// the fastest of 8 after a warm-up, on operands of random codes in
// [-1, 1). It returns 0 and why on a device without the FP8 ops or where
// they fail (before sm_89). On the CPU (the reference's emulated FP8) the
// product is of 512.
func PeakFP8(dev device.Device) (float64, string) {
	f, ok := dev.(device.FP8)
	if !ok {
		return 0, "not measured: the device has no FP8 matmul"
	}
	n := 8192
	if isCPU(dev) {
		n = 512
	}
	var ts []*tensor.Tensor
	alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		t, err := dev.Alloc(dt, shape...)
		if err != nil {
			return nil
		}
		ts = append(ts, t)
		return t
	}
	defer func() {
		for _, t := range ts {
			dev.Free(t)
		}
	}()
	a, w, o := alloc(tensor.F8E4M3, n, n), alloc(tensor.F8E4M3, n, n), alloc(tensor.BF16, n, n)
	one := alloc(tensor.F32, 1)
	if a == nil || w == nil || o == nil || one == nil {
		return 0, "not measured (allocation failed)"
	}
	rng := tensor.NewRNG(1)
	host := tensor.New(tensor.F8E4M3, n, n)
	for _, dst := range []*tensor.Tensor{a, w} {
		raw := host.Raw()
		for i := range raw {
			raw[i] = tensor.E4M3FromF32(2*rng.Float32() - 1)
		}
		dev.Upload(dst, host)
	}
	h1, _ := tensor.FromF32([]float32{1}, 1)
	dev.Upload(one, h1)
	best, err := fastest(dev, func() { f.MatmulFP8(o, a, w, nil, one, one, n, n, n) })
	if err != nil {
		return 0, "not measured: " + err.Error()
	}
	return 2 * float64(n) * float64(n) * float64(n) / best, "measured e4m3 matmul " + strconv.Itoa(n) + "^3 on this device"
}
