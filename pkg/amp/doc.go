// Package amp is druto's precision policy (FP32, BF16, FP16), fp32 master
// weights with a 16-bit working copy, and GradScaler with torch.amp's semantics.
package amp
