// Package gpudev is the GPU tests' one opener of a GPU device, for the
// packages above pkg/device/gpu (gpt, train): one fused device per test
// binary, or the skip of package gputest where none is usable. It is a
// package of its own because pkg/cuda's and pkg/device/gpu's tests use
// gputest, which therefore cannot import them.
package gpudev

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
)

var fused struct {
	sync.Once
	dev *gpu.Device
	err error
}

// Fused returns the test binary's fused GPU device on device 0, made at
// the first call and kept for the binary's life, or skips tb (with
// DRUTO_REQUIRE_GPU=1, fails it) where none is usable, saying why.
func Fused(tb testing.TB) *gpu.Device {
	tb.Helper()
	fused.Do(func() { fused.dev, fused.err = open() })
	if fused.err != nil {
		gputest.Skip(tb, fused.err)
	}
	return fused.dev
}

// open builds a fused device on device 0 as detection does (gpu.Probe),
// or says why it could not.
func open() (*gpu.Device, error) {
	m, dev, errs := gpu.Probe(context.Background(), gpu.Config{Options: device.Options{Fused: true}})
	switch {
	case dev != nil:
		return dev, nil
	case !m.Support:
		return nil, gpu.ErrNoGPUSupport
	case len(errs) == 0:
		return nil, gpu.ErrNoDevice
	}
	return nil, errors.Join(errs...)
}
