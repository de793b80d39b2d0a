package gpu

// cast.go: Cast, the launchers of kernels/cast.cu (one kernel per pair of
// float dtypes, rounding to nearest even); a cast to the same dtype is a
// device-to-device copy.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Cast converts src into dst (same number of elements, any float dtypes),
// rounding to nearest even.
func (d *Device) Cast(dst, src *tensor.Tensor) {
	const op = "cast"
	if !d.check(&device.Ops.Cast, []int{device.Numel(dst)}, dst, src) {
		return
	}
	n := src.Numel()
	if n == 0 {
		return
	}
	if dst.DType == src.DType {
		if launchHook != nil {
			return
		}
		if err := d.stream.CopyDtoD(d.ptr(dst), d.ptr(src), uint64(src.Bytes())); err != nil {
			d.fail(fmt.Errorf("gpu: %s: %w", op, err))
		}
		return
	}
	d.kCast(dst, src, int64(n))
}

// kCast launches cast_<src>_<dst> (the module is built once, for f32).
func (d *Device) kCast(dst, src *tensor.Tensor, n int64) bool {
	kernel := "cast_" + src.DType.String() + "_" + dst.DType.String()
	vec := vec4(d.ptr(dst), dst.DType.Size(), d.ptr(src), src.DType.Size())
	return d.run(kernel, tensor.F32, d.ewGrid(n, 4), cuda.D1(castBlock), 0, d.ptr(dst), d.ptr(src), n, vec)
}
