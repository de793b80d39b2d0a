// Package train is the training loop: learning-rate schedule, gradient
// clipping, metrics as JSON lines, checkpoints with exact resume, sampling.
package train
