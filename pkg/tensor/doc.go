// Package tensor holds druto's data types (F32, BF16, F16, I32), their
// round-to-nearest-even conversions, the two FP8 formats (E4M3, E5M2:
// saturating conversions and a scaled quantizer, fp8.go; not tensor dtypes
// yet, as no op stores them), shapes, host storage, and flat buffers
// whose named segments are views (the layout every multi-tensor kernel walks).
//
// A Tensor is a typed view: a dtype, a shape and either host bytes or a device
// address. Host tensors are allocated 8-byte aligned so that typed slices
// (F32, U16, I32) can alias the bytes without copying.
package tensor
