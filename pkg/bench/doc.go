// Package bench is druto's benchmark harness: modes (fused or decomposed,
// fp32, bf16 or fp16) times configs, timed with warm-up and medians, with MFU,
// memory and utilisation, written as JSON and CSV records.
package bench
