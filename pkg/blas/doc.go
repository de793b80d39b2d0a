// Package blas is the CPU path's matrix multiply: Sgemm on row-major float32
// matrices, dispatched to OpenBLAS's cblas_sgemm when a shared library is
// found at run time (dlopen; nothing is needed at build time), else to
// druto's own blocked SGEMM on a Go-assembly micro-kernel (internal/gemm:
// amd64 with AVX2 + FMA, detected at run time; on par with single-threaded
// OpenBLAS on the tiny GPT's shapes), else, on other CPUs and architectures
// or in a purego build, to gonum's pure-Go BLAS.
//
// The library is chosen once, on first use: the file named by the
// DRUTO_BLAS_LIB environment variable when it is set (and only that one: a
// path that does not load, e.g. DRUTO_BLAS_LIB=/nonexistent, forces the
// fallback), else the first of libopenblas.so.0, libopenblas.so and
// libblas.so.3 that loads and exports cblas_sgemm. Builds with
// CGO_ENABLED=0 always use the fallback. Name reports the choice, Describe
// the CPU path (library or instruction set, threads), and LoadError why no
// native library is used.
//
// On Debian and Ubuntu the library comes from the package
// libopenblas0-pthread (see APT-PACKAGES); it is about ten times faster
// than gonum on the shapes of the tiny GPT, and about as fast as the
// assembly fallback.
//
// Threads: OpenBLAS is set to one thread when loaded, and Sgemm spreads a
// large product over goroutines itself (SetThreads, by default GOMAXPROCS),
// rows of C to each; SgemmSerial keeps a product on the calling goroutine
// for callers that parallelise over many small products. OpenBLAS's own
// pool would spin between calls and take cores from the Go code that runs
// between GEMMs. The assembly fallback is threaded the same way.
//
// bf16: SgemmBF16 multiplies bf16 operands (Mat) on druto's kernels even
// with OpenBLAS loaded (it has no bf16 product): two bf16 operands on an
// AVX512_BF16 pair kernel (VDPBF16PS: two steps of k per instruction, about
// twice the fp32 kernels' rate) where the CPU has one (DotBF16), otherwise
// widened to fp32 inside the packing of the fp32 kernels.
//
// This is the only package of the CPU path that uses cgo; dl_cgo.go holds
// every dlopen and dlsym call.
package blas
