// Package kernels embeds druto's CUDA C sources (one file per op) and their
// pre-built PTX, and builds them for the GPU at hand.
//
// Each .cu file names its kernels and storage dtypes in "// druto:kernel"
// and "// druto:dtypes" lines; a Variant is one kernel for one dtype, chosen
// at compile time with -DDTYPE=DRUTO_F32, DRUTO_BF16 or DRUTO_F16. The
// sources include no CUDA headers, so NVRTC and nvcc compile the same text.
// What the files share (the dtypes and their conversions, 4-wide vector
// loads, warp sums) is in common.cuh, which each file includes with
// `#include "common.cuh"`: nvcc reads it from this folder, and Source
// pastes it in place of that line for NVRTC (Expand). Every module of a
// file and dtype holds all of the file's kernels.
//
// Builder makes a variant ready on a device, best way first:
//
//  1. a cubin from the on-disk cache, os.UserCacheDir()/druto/kernels,
//     keyed by (source and options hash, sm_XY, NVRTC version);
//  2. NVRTC, for the device's exact sm_XY (the cubin is then cached, written
//     to a temp file and renamed);
//  3. the embedded PTX (ptx/*.ptx, compute_75, PTX ISA 7.8), which the
//     driver JIT compiles: used when NVRTC is missing or hidden
//     (DRUTO_NO_NVRTC=1), fails, or its cubin does not load.
//
// Each step's failure is recorded in the result (Fallback, CacheErr); a
// variant for which even the PTX fails is Unavailable, and the op runs its
// decomposed form. The PTX is regenerated with `go generate ./kernels`
// (gen-ptx.sh, nvcc 11.8), which writes each source's sha256, and each
// included header's, into the PTX header; TestPTXUpToDate fails when a .cu
// or a header changed and the PTX did not.
// pkg/device/gpu launches the kernels (one Go file per .cu); layernorm.go
// here keeps a stand-alone launcher of layernorm_forward for detect's
// self-test.
package kernels
