// Package kernels embeds druto's CUDA C sources (one file per op) and their
// pre-built PTX.
//
// Each .cu file names its kernels and storage dtypes in "// druto:kernel"
// and "// druto:dtypes" lines; a Variant is one kernel for one dtype, chosen
// at compile time with -DDTYPE=DRUTO_F32, DRUTO_BF16 or DRUTO_F16. The
// sources include no CUDA headers, so NVRTC and nvcc compile the same text.
// What the files share (the dtypes and their conversions, 4-wide vector
// loads, warp sums) is in common.cuh, which each file includes with
// `#include "common.cuh"`: nvcc reads it from this folder, and Source
// pastes it in place of that line for NVRTC (Expand). Code that two files
// share beyond that has a header of its own: flash_common.cuh (the two
// flash-attention files), layernorm.cuh (the layernorm forward's row, which
// layernorm.cu and fp8.cu's FP8 producers both run), gelu.cuh (the GELU's
// derivative, which gelu.cu's backwards and fp8.cu's dGELU cast both
// compute). Every module of a file and dtype holds all of the file's
// kernels.
//
// Package gpu (pkg/device/gpu) builds a variant on a device, best way
// first: a cubin from its on-disk cache, NVRTC for the exact sm_XY, or the
// embedded PTX (ptx/*.ptx, compute_75 or the file's druto:arch, PTX ISA
// 7.8) JIT-compiled by the driver; and it launches the kernels (one Go
// file per .cu). This package imports nothing of druto: it is the sources,
// their PTX and the manifest read from their directives (Variants, Source,
// ParsePTXHeader).
//
// A file whose instructions need a newer GPU says so on a "// druto:arch"
// line, and its PTX is made for that target: flash_attention.cu (bf16:
// sm_80), flash_attention2.cu (sm_80), and fp8.cu (sm_90: the FP8
// cast-transpose of issue 38, q = fp8(x·s), qt = qᵀ and amax in one pass,
// and the layernorm forwards that write their output so, as the qkv and fc
// GEMMs' FP8 input; its cvt.rn.satfinite.e4m3x2/e5m2x2 is sm_90-only in
// PTX ISA 7.8). On an older device those variants are unavailable and are
// not compiled.
//
// emu/ holds host emulators of some kernels (a development tool, not part
// of druto): each compiles a .cu as C++ with -DDRUTO_EMU, runs every CUDA
// thread of a block as a host thread, and checks the results against a
// reference (emu/NAME/run.sh). emu/fp8 is also run by pkg/device/gpu's
// TestFP8EmulatorMatchesCPU and TestLayerNormFP8EmulatorMatchesCPU against
// pkg/tensor's FP8 conversions and pkg/device/cpu's twins.
//
// The PTX is regenerated with `go generate ./kernels`
// (gen-ptx.sh, nvcc 11.8), which writes each source's sha256, and each
// included header's, into the PTX header; TestPTXUpToDate fails when a .cu
// or a header changed and the PTX did not.
package kernels
