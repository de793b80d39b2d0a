// Package train is the training loop: learning-rate schedule, gradient
// clipping, metrics as JSON lines, checkpoints with exact resume, sampling.
//
// A Sampler draws text from a model and only ever emits valid UTF-8; it
// has temperature, top-k, top-p and a seed, and can stream. LoadCheckpoint
// reads druto's checkpoints and the GPT-2 files that Hugging Face
// transformers writes (hf.go), with the tokenizer a checkpoint records.
package train
