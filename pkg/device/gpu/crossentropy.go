package gpu

// crossentropy.go: softmax cross-entropy over the vocabulary, the launchers
// of kernels/crossentropy.cu. Fused: on sm_90 (NVRTC 12+), where two rows
// fit in a block's shared memory and the rows are 16-byte vectors,
// crossentropy_fused_tma: one block an SM, the bulk-copy engine (TMA)
// bringing the next row into shared memory while the block works on the
// current one, so that each logit is read from DRAM once; elsewhere
// crossentropy_fused_l3, a persistent grid of ceRowsPerSM blocks per SM,
// each row read twice (the second time from L2). The TMA form is taken
// where it runs because it reads each logit once: on GPT-2's 16384 × 50304
// bf16 logits it took about 10% less time than the l3 form on an H200.
// Either writes the gradient over the logits in their own dtype; no
// probability buffer. Decomposed: max, exp, sum, divide into a
// materialised fp32 (N,V) probability buffer (a reused scratch), then the
// NLL gather (log-sum-exp form: log(sum) - (x[t] - max) from the logits and
// the row statistics) and the gradient pass. The caller validates the
// targets on the host (package gpt does); an out-of-range target gives a
// NaN loss, never an out-of-bounds access.

import (
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// ceRowsPerSM is how many rows crossentropy_fused_l3 keeps in flight per SM
// (blocks of its persistent grid; each block strides over the rows by the
// grid's size): enough that one block streams while another reduces, few
// enough that every row in flight (2·132 GPT-2 bf16 rows of 100 KB: 26 MB)
// stays in the 50 MB L2 until its second read. The kernel's
// __launch_bounds__(512, CE3_MIN_BLOCKS) asks for two resident blocks an SM
// (64 registers a thread) for bf16 only; fp32 and f16 need more registers
// for their conversions and ask for one, so there the grid's second block
// of an SM runs after the first rather than beside it.
const ceRowsPerSM = 2

// kernCETMA is the classifier kernel whose rows the bulk-copy engine
// brings into shared memory (sm_90+, two rows a block, one block an SM).
const kernCETMA = "crossentropy_fused_tma"

// ceGrid is crossentropy_fused_l3's grid for N rows on sms SMs.
func ceGrid(N, sms int) int { return max(1, min(N, ceRowsPerSM*max(1, sms))) }

// CrossEntropy computes losses[i] = -log softmax(logits[i])[targets[i]] in
// fp32 and, when dscale != 0, overwrites logits with
// (softmax(logits[i]) - onehot(targets[i]))·dscale.
// losses (N) F32, logits (N,V), targets (N) I32
func (d *Device) CrossEntropy(losses, logits, targets *tensor.Tensor, N, V int, dscale float32) {
	d.crossEntropy(losses, logits, targets, N, V, dscale, 0)
}

// crossEntropy is CrossEntropy with dscale multiplied on the device by the
// fp32 at mul when mul is not 0 (CrossEntropyScaled, step.go).
func (d *Device) crossEntropy(losses, logits, targets *tensor.Tensor, N, V int, dscale float32, mul cuda.DevicePtr) {
	const op = "cross-entropy"
	if !d.check(&device.Ops.CrossEntropy, []int{N, V}, losses, logits, targets) {
		return
	}
	dt := logits.DType
	if !dt.Float() {
		d.unsupported(op, losses.DType, dt, targets.DType)
		return
	}
	if N == 0 {
		return
	}
	l, x, t := d.ptr(losses), d.ptr(logits), d.ptr(targets)
	if d.fused {
		// 128-bit loads need rows that start on 16 bytes: V a multiple of
		// the vector and the buffer aligned (views may not be).
		vec := 0
		if es := dt.Size(); V%(16/es) == 0 && uint64(x)%16 == 0 {
			vec = 1
		}
		if smem := 2 * V * dt.Size(); vec == 1 && !d.noTMA && smem <= d.tmaSmem[kernelKey{kernCETMA, dt}] {
			d.launch(kernCETMA, dt, grid1(min(N, d.sms())), cuda.D1(ceTMABlock), smem, l, x, t, N, V, dscale, mul)
			return
		}
		d.launch("crossentropy_fused_l3", dt, grid1(ceGrid(N, d.sms())), cuda.D1(ce3Block), 0, l, x, t, N, V, dscale, vec, mul)
		return
	}
	probs := d.scratch("ce.probs", N*V*4)
	mx := d.scratch("ce.max", N*4)
	sum := d.scratch("ce.sum", N*4)
	if probs == 0 || mx == 0 || sum == 0 {
		return
	}
	eg := elemBlocks(N * V)
	d.do(func() error {
		// each launch only after the previous one was queued: a failed one
		// (an error recorded) stops the chain
		ok := d.launch("ce_rowmax", dt, grid1(N), cuda.D1(ceEWBlock), 0, mx, x, N, V) &&
			d.launch("ce_expsub", dt, eg, cuda.D1(ceEWBlock), 0, probs, x, mx, N, V) &&
			d.launch("ce_rowsum", tensor.F32, grid1(N), cuda.D1(ceEWBlock), 0, sum, probs, N, V) &&
			d.launch("ce_divide", tensor.F32, eg, cuda.D1(ceEWBlock), 0, probs, sum, N, V) &&
			d.launch("ce_nll", dt, grid1(blocks(N, ceEWBlock)), cuda.D1(ceEWBlock), 0, l, x, mx, sum, t, N, V)
		if ok && dscale != 0 {
			d.launch("ce_grad", dt, eg, cuda.D1(ceEWBlock), 0, x, probs, t, N, V, dscale, mul)
		}
		return nil
	})
}
