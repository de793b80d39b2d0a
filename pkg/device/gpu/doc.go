// Package gpu implements device.Device with the CUDA kernels of package
// kernels and cuBLAS, through package cuda.
//
// New builds every kernel variant (build.go): a cubin from the on-disk
// cache (os.UserCacheDir()/druto/kernels, keyed by the source and options
// hash, sm_XY and NVRTC version), else NVRTC for the exact sm_XY (then
// cached), else the embedded PTX JIT-compiled by the driver (NVRTC missing,
// hidden with DRUTO_NO_NVRTC=1, failing, or its cubin not loading). Each
// step's failure is recorded (Built.Fallback, CacheErr); a variant even
// the PTX fails for is Unavailable and the op that needs it records the
// error. Probe, BuildKernels and CompileKernels (probe.go) give detection
// and the CLI what they need of CUDA; SelfTest (selftest.go) checks every
// kernel through the conformance cases of package devicetest.
//
// Attention has two paths (attention.go): the flash-attention kernels for
// fused 16-bit at head sizes 32, 64 and 128 (bf16 on sm_80 or newer, fp16
// on sm_75 or newer), which save a (B,NH,T) fp32 log-sum-exp, and cuBLAS
// score GEMMs with softmax kernels everywhere else (the decomposed twin,
// fp32, bf16 on sm_75, Config.NoFlash), which save the (B,NH,T,T)
// probabilities. Device.AttentionState says which.
//
// Launches (gpu.go): on sm_90 and newer the fused device launches the
// kernels that begin with pdl_enter() (a file's "// druto:pdl" line) as
// programmatic dependent launches when NVRTC built them, so that a
// kernel's blocks are scheduled while the kernel before it drains and wait
// for it on the GPU; PDLEnv (DRUTO_PDL=off) turns that off and
// Device.PDLStatus says which and why.
package gpu
