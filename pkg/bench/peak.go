package bench

import (
	"sort"
	"strconv"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Peak measures the device's matmul throughput in FLOP/s on a square fp32
// GEMM of 1024 (2048 on a GPU), median of 5, for the MFU denominator, and
// says what it measured. MFU against a measured peak is honest on any
// machine; a datasheet figure is not.
func Peak(dev device.Device) (float64, string) {
	n := 1024
	if !isCPU(dev) {
		n = 2048
	}
	a, err1 := dev.Alloc(tensor.F32, n, n)
	w, err2 := dev.Alloc(tensor.F32, n, n)
	o, err3 := dev.Alloc(tensor.F32, n, n)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, "not measured (allocation failed)"
	}
	defer func() { dev.Free(a); dev.Free(w); dev.Free(o) }()
	var ts []float64
	for i := 0; i < 6; i++ {
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
	flops := 2 * float64(n) * float64(n) * float64(n) / ts[len(ts)/2]
	return flops, "measured fp32 matmul " + strconv.Itoa(n) + "^3 on this device"
}

func isCPU(dev device.Device) bool { return len(dev.Name()) >= 3 && dev.Name()[:3] == "cpu" }
