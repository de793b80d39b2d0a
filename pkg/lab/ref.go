package lab

import (
	"sync"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// labSlack widens the contract's fp32 tolerance for a student's code: it
// sums in float32 in its own order where the reference sums in float64.
const labSlack = 8

var (
	refOnce sync.Once
	refDev  *cpu.Device
)

// ref is druto's CPU reference device (fused forms, one thread: a lab's
// sizes are small).
func ref() *cpu.Device {
	refOnce.Do(func() { refDev = cpu.New(device.Options{Fused: true, Threads: 1}) })
	return refDev
}

// refSync returns the reference device's error, which would be a bug in
// the lab's own cases.
func refSync() {
	if err := ref().Sync(); err != nil {
		panic("lab: the reference failed: " + err.Error())
	}
}

// tol is the tolerance scale of output of contract c at sizes s.
func tol(c *device.Contract, s ...int) float64 {
	scale := c.Tol(tensor.F32, s)
	return max(1, scale) * labSlack
}

func mustF32(v []float32, shape ...int) *tensor.Tensor {
	t, err := tensor.FromF32(append([]float32(nil), v...), shape...)
	if err != nil {
		panic("lab: " + err.Error())
	}
	return t
}

// randn fills n values from rng, normal with standard deviation sd plus
// offset.
func randn(rng *tensor.RNG, n int, sd, offset float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Norm()*sd + offset)
	}
	return v
}
