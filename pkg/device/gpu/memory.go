package gpu

// MemoryPeak returns the high-water mark of the device memory in use, in
// bytes, since the last ResetMemoryPeak: every buffer of this device's
// context goes through its caching pool (tensors, scratch, the cuBLAS
// workspace), and the mark counts the bytes handed out by size class
// (torch.cuda.max_memory_allocated's measure; what the pool keeps cached
// for reuse is not counted). The CUDA context and the loaded modules are
// not in it.
func (d *Device) MemoryPeak() int64 { return int64(d.ctx.Pool().Stats().PeakInUse) }

// ResetMemoryPeak starts MemoryPeak again from the bytes in use now.
func (d *Device) ResetMemoryPeak() { d.ctx.Pool().ResetPeak() }
