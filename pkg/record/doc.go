// Package record reads and writes druto's records: the benchmark report
// that pkg/bench writes (Report, its Bench records with their Kernel,
// Util and Profile rows, and the Sample records of a generation run) and
// the metrics line that pkg/train writes once a step (Metric).
//
// It is a leaf: it imports the standard library only, so a reader of
// records (plotting, a notebook) does not pull in the devices that made
// them. Every legacy form a reader accepts is handled here, once:
//
//   - a metrics line's "skipped" is true on a skipped step and
//     "skipped_steps" counts them; older logs wrote the count as
//     "skipped" (Metric and ParsePoints read both forms alike);
//   - a value that is not finite is written as null and read back as NaN
//     (Metric) or as absent (Point);
//   - a report record with kernel timings and no step time is a kernel
//     micro-benchmark and has no baseline (KernelsOnly).
//
// A report is read two ways: as written (Report, ParseReport), and as
// plotted (Results, ParseResults: float64 numbers, checked finite and
// non-negative, one baseline per config with step times).
package record
