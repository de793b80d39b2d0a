package gpu

// matmul_tc.go: the launcher of matmul_tc.cu's matmul_rows_tc, the fused
// forward of a linear layer over tcRowsMin..tcRowsMax rows (a decode step
// at batch 9 to 64) on the tensor cores, where cuBLASLt's tiles leave most
// SMs idle (see matmul_tc.cu).
//
// The plan (tcPlan): a column tile of ct = 16·2^lmt outputs and a K chunk of
// kc = span·(8/2^lmt) inputs a block, chosen from the sizes and the SM count
// only (a captured graph replays the grid) by a model of the time (tcCost)
// with rough bandwidths (tcDRAM, tcL2, tcSM, bytes a nanosecond):
//   - the weights from DRAM; the weights and every block's staged rows
//     (ceil(OC/ct) copies of the input) from L2; and the busiest SM's share
//     of those through its own port, whichever takes longest;
//   - then, with more than one K chunk, the last block of a column tile
//     reading every chunk's fp32 sums (chunks·ct·N·4 bytes) on its own SM.
// More rows than columns a tile make the rows' copies the larger traffic;
// more chunks, the last block's. The lowest estimate wins (ties: fewer
// blocks). tcForce (the benchmarks) overrides it.

import (
	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// kernRowsTC is matmul_tc.cu's kernel.
const kernRowsTC = "matmul_rows_tc"

var (
	tcBlock   = kernels.MustBlock("matmul_tc.cu", "TC_BLOCK")
	tcRowsMin = kernels.MustDefine("matmul_tc.cu", "TC_ROWS_MIN")
	tcRowsMax = kernels.MustDefine("matmul_tc.cu", "TC_ROWS_MAX")
	tcSpanMax = kernels.MustDefine("matmul_tc.cu", "TC_SPAN")
	tcPad     = kernels.MustDefine("matmul_tc.cu", "TC_PAD")
	tcRPad    = kernels.MustDefine("matmul_tc.cu", "TC_RPAD")
	tcSmemMax = kernels.MustDefine("matmul_tc.cu", "TC_SMEM")
)

// The bandwidths of tcCost's model, bytes a nanosecond: DRAM, L2 to the
// SMs, one SM's loads (rough values for an H100/H200; only their ratios
// matter to the choice).
const (
	tcDRAM = 4000
	tcL2   = 7000
	tcSM   = 100
)

// tcPlanT is one launch shape of matmul_rows_tc: the column tile is
// 16<<lmt outputs, a warp takes span inputs of a K chunk of
// span·(warps>>lmt).
type tcPlanT struct{ lmt, span int }

// ct is the plan's column tile, kw the warps that share a tile's K chunk,
// kc that chunk.
func (p tcPlanT) ct() int { return 16 << p.lmt }
func (p tcPlanT) kw() int { return (tcBlock / 32) >> p.lmt }
func (p tcPlanT) kc() int { return p.span * p.kw() }

// grid is the plan's (column tiles, K chunks) for C inputs and OC outputs.
func (p tcPlanT) grid(C, OC int) (tiles, chunks int) { return blocks(OC, p.ct()), blocks(C, p.kc()) }

// smem is the dynamic shared memory of a launch over N rows: the staged
// rows, or the warps' sums, whichever is larger (they share it).
func (p tcPlanT) smem(N int) int {
	np := blocks(N, 8) * 8
	return max(np*(p.kc()+tcPad)*2, p.kw()*N*(p.ct()+tcRPad)*4)
}

// tcPlans lists every plan the kernel takes (a warp's span a multiple of
// 32 up to TC_SPAN, columns tiles of 16, 32, 64) that fits N rows in
// TC_SMEM bytes.
func tcPlans(N int) []tcPlanT {
	var out []tcPlanT
	for lmt := 0; lmt <= 2; lmt++ {
		for span := 32; span <= tcSpanMax; span *= 2 {
			if p := (tcPlanT{lmt, span}); p.smem(N) <= tcSmemMax {
				out = append(out, p)
			}
		}
	}
	return out
}

// tcCost is tcPlan's estimate for p, in picoseconds (see the file's
// comment).
func tcCost(p tcPlanT, N, C, OC, sms int) int {
	tiles, chunks := p.grid(C, OC)
	kc := min(p.kc(), C)
	w := OC * C * 2
	rows := tiles * N * C * 2
	sm := blocks(tiles*chunks, sms) * (p.ct() + N) * kc * 2
	t := max(1000*w/tcDRAM, 1000*(w+rows)/tcL2, 1000*sm/tcSM)
	if chunks > 1 {
		t += 1000 * chunks * p.ct() * N * 4 / tcSM
	}
	return t
}

// tcPlan returns the plan for N rows, C inputs and OC outputs on sms SMs:
// the cheapest by tcCost.
func tcPlan(N, C, OC, sms int) tcPlanT {
	var best tcPlanT
	bc, bb := -1, 0
	for _, p := range tcPlans(N) {
		c := tcCost(p, N, C, OC, sms)
		t, k := p.grid(C, OC)
		if bc < 0 || c < bc || (c == bc && t*k < bb) {
			best, bc, bb = p, c, t*k
		}
	}
	return best
}

// tcFits reports whether matmul_rows_tc takes this fused forward: 16-bit
// operands, N in its range, C a multiple of 8 with inp and weight 16-byte
// aligned, and the kernel built for dt (sm_80 and newer; noTC off).
func (d *Device) tcFits(inp, weight *tensor.Tensor, N, C int) bool {
	dt := inp.DType
	if d.noTC || (dt != tensor.BF16 && dt != tensor.F16) || N < tcRowsMin || N > tcRowsMax || C%8 != 0 {
		return false
	}
	if d.ptr(inp)%16 != 0 || d.ptr(weight)%16 != 0 {
		return false
	}
	return launchHook != nil || d.funcs[kernelKey{kernRowsTC, dt}] != nil
}

// matmulRowsTC queues matmul_rows_tc for out = inp·weightᵀ + bias (+GELU)
// over N rows: the plan's grid (column tiles, K chunks), the chunks' fp32
// sums in scratch and a counter a column tile (zeroed once; the kernel
// resets each).
func (d *Device) matmulRowsTC(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	p := tcPlan(N, C, OC, d.sms())
	if f := d.tcForce; f.span > 0 && f.smem(N) <= tcSmemMax {
		p = f
	}
	tiles, chunks := p.grid(C, OC)
	var part, done cuda.DevicePtr
	if chunks > 1 {
		part = d.buf("matmul.tc.part", chunks*N*OC*4)
		done = d.zeroScratch("matmul.tc.done", tiles*4)
		if part == 0 || done == 0 {
			return
		}
	}
	gelu := 0
	if act == device.GELU {
		gelu = 1
	}
	d.run(kernRowsTC, out.DType, cuda.Dim3{X: uint32(tiles), Y: uint32(chunks), Z: 1}, cuda.D1(tcBlock), p.smem(N),
		d.ptr(out), d.ptr(pre), part, done, d.ptr(inp), d.ptr(weight), d.ptr(bias), N, C, OC, gelu, p.lmt, p.span)
}

// TCEnv names the environment variable that, set to "on", runs the fused
// forward products of 9-64 rows on matmul_rows_tc; else they stay on
// cuBLASLt. Off by default: measured slower than cuBLASLt at every plan
// (bench/results/h100/2026-12-06-s46).
const TCEnv = "DRUTO_MATMUL_TC"
