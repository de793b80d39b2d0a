// Package amp is druto's precision policy (FP32, BF16, FP16, and FP8: the
// policy table and the per-tensor scaling of FP8 operands, whose GPU
// kernels are not written yet), fp32 master weights with a 16-bit working
// copy, and GradScaler with torch.amp's semantics.
package amp
