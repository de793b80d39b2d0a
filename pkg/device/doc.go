// Package device defines Device, every operation of a GPT training step, which
// the CPU reference (package cpu) and the CUDA backend (package gpu) implement.
//
// Conventions, as in llm.c: arguments are outputs first, then inputs, then
// sizes; shape comments name each tensor's extent; backward ops ACCUMULATE
// (+=) into their gradient outputs, so the caller zeroes gradient buffers once
// per step and residual branches add up without extra copies. Tensors may be
// F32, BF16 or F16 wherever the precision policy (package amp) says so; the
// op computes in fp32 and rounds when it stores.
//
// Ops do not return errors: a device records the first failure (a launch that
// failed, a shape that does not fit) and returns it from Sync, the way CUDA
// reports asynchronous errors. Callers check Sync once per step.
//
// Every op that the fused-versus-plain comparison is about has a fused and a
// decomposed form inside each implementation; Options.Fused picks one for the
// whole device, so a model runs unchanged on either. A decomposed form that is
// a sequence of other ops is written once, here (decomposed.go), and both
// implementations call it.
//
// Each op is declared once: its method, and beside it its descriptor (a
// Contract in Ops, or next to an optional interface), from which the
// argument checks, the conformance cases (package devicetest), the
// profiler's classes (package bench) and the decomposed composition are
// derived. Contracts lists them.
package device
