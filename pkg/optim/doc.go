// Package optim holds AdamW's hyper-parameters and schedule (linear warm-up,
// cosine decay) and gradient clipping by global norm; the update itself is
// the device's AdamWStep (fused multi-tensor, or the per-tensor baseline).
package optim
