// Package gpu implements device.Device with the CUDA kernels of package
// kernels and cuBLAS, through package cuda.
//
// Attention has two paths (attention.go): the flash-attention kernels for
// fused 16-bit at head sizes 32, 64 and 128 (bf16 on sm_80 or newer, fp16
// on sm_75 or newer), which save a (B,NH,T) fp32 log-sum-exp, and cuBLAS
// score GEMMs with softmax kernels everywhere else (the decomposed twin,
// fp32, bf16 on sm_75, Config.NoFlash), which save the (B,NH,T,T)
// probabilities. Device.AttentionState says which.
package gpu
