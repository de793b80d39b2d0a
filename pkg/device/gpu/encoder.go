package gpu

// encoder.go: the token + position embedding and its deterministic
// backward, the launchers of kernels/encoder.cu (see its header for the
// schemes). out, dout, dwte and dwpe are fp32 under every policy (the
// residual stream and parameter gradients); wte and wpe are the working
// dtype. The backward sorts the positions by token on the device (a
// stable radix sort), sums fixed-size segments of the sorted list and then
// combines the runs of one id that cross segments: balanced for any token
// distribution, the same launches for every batch (a graph captures them).
// The caller validates the tokens on the host (package gpt does); the
// kernels only make an out-of-range token harmless (a NaN row forward,
// skipped backward).

import (
	"fmt"
	"math/bits"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// The backward's launch constants, from kernels/encoder.cu.
var (
	encItems    = kernels.MustDefine("encoder.cu", "ENC_ITEMS")     // at most this many sort keys a thread
	encRadix    = kernels.MustDefine("encoder.cu", "ENC_RADIX")     // digits of a sort pass
	encSegAlign = kernels.MustDefine("encoder.cu", "ENC_SEG_ALIGN") // a segment's length is a multiple of it
)

// elemBlocks is the grid of the grid-stride elementwise kernels: enough
// blocks of 256 to fill any current GPU several times over, at most one per
// 256 elements.
func elemBlocks(n int) cuda.Dim3 { return cuda.D1(max(1, min(blocks(n, encBlock), 132*64))) }

// encoderArgs checks what both encoder ops need beyond their contracts:
// act is out or dout (B,T,C), table is wte or dwte (V,C), pos is wpe or
// dwpe (maxT,C) of the same dtype. It returns V.
func (d *Device) encoderArgs(op string, act, table, pos, tokens *tensor.Tensor, B, T, C int) (int, bool) {
	if pos.DType != table.DType {
		d.unsupported(op, act.DType, table.DType, pos.DType)
		return 0, false
	}
	return table.Numel() / C, true
}

// Encoder computes out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
// out (B,T,C) F32, wte (V,C), wpe (maxT,C), tokens (B,T) I32
func (d *Device) Encoder(out, wte, wpe, tokens *tensor.Tensor, B, T, C int) {
	const op = "encoder"
	if !d.check(&device.Ops.Encoder, []int{B, T, C}, out, wte, wpe, tokens) {
		return
	}
	V, ok := d.encoderArgs(op, out, wte, wpe, tokens, B, T, C)
	if !ok || !d.checkDT(op, tensor.F32, out) || B*T == 0 {
		return
	}
	dt, BT, n := wte.DType, B*T, B*T*C
	if d.fused {
		// Four channels a thread where C allows and the pointers align.
		es, vec, work := wte.DType.Size(), 0, n
		if C%4 == 0 {
			if vec = vec4(d.ptr(out), 4, d.ptr(wte), es, d.ptr(wpe), es); vec == 1 {
				work = n / 4
			}
		}
		d.launch("encoder_forward", dt, elemBlocks(work), cuda.D1(encBlock), 0,
			d.ptr(out), d.ptr(wte), d.ptr(wpe), d.ptr(tokens), BT, T, C, V, vec)
		return
	}
	tok := d.scratch("encoder.tok", n*4)
	pos := d.scratch("encoder.pos", T*C*4)
	if tok == 0 || pos == 0 {
		return
	}
	d.launch("encoder_gather_tokens", dt, elemBlocks(n), cuda.D1(encBlock), 0, tok, d.ptr(wte), d.ptr(tokens), BT, C, V)
	d.launch("encoder_gather_positions", dt, elemBlocks(T*C), cuda.D1(encBlock), 0, pos, d.ptr(wpe), T, C)
	d.launch("encoder_add_positions", dt, elemBlocks(n), cuda.D1(encBlock), 0, d.ptr(out), tok, pos, BT, T, C)
}

// encPlan is how the backward cuts its work (see kernels/encoder.cu): a
// radix sort of the B·T keys in passes of 8 bits over tiles of
// encThreads·items positions, then segs segments of L sorted positions.
type encPlan struct {
	bits, passes, tiles, items int // key bits (of V-1), radix passes, sort tiles and keys a thread
	L, segs                    int // segment length and count
}

// kmask is the mask of a key's bits.
func (p encPlan) kmask() uint32 { return uint32(1)<<p.bits - 1 }

// scratchBytes returns the sizes of the backward's scratch buffers: the
// sorted keys and positions (two copies: the passes ping-pong), the sort's
// counts (per pass and tile, then the look-back table after 4 tile
// counters) and the segments' partial rows (two a segment).
func (p encPlan) scratchBytes(BT, C int) (sorted, counts, part int) {
	return 4 * 4 * BT, 4 * (2*p.passes*p.tiles*encRadix + 4), 4 * 2 * p.segs * C
}

// encoderPlan returns the plan for BT positions over V ids on this GPU.
// The sort tiles: one key a thread while that gives at least a tile an SM,
// up to encItems keys (fewer tiles, less look-back) for large B·T. The
// segments: about two an SM (at least encSegAlign positions each, a
// multiple of it), so that they fill the GPU once and a run of one id that
// spans many of them leaves at most about 2·SMs partial rows to combine.
// It depends on BT, V and the GPU only (never on the tokens): the same
// launches for every batch, as a captured graph needs.
func (d *Device) encoderPlan(BT, V int) encPlan {
	nb := max(1, bits.Len(uint(V-1)))
	items := min(encItems, max(1, blocks(BT, encThreads*d.sms())))
	L := max(encSegAlign, blocks(blocks(BT, 2*d.sms()), encSegAlign)*encSegAlign)
	return encPlan{bits: nb, passes: blocks(nb, 8), tiles: blocks(BT, encThreads*items), items: items, L: L, segs: blocks(BT, L)}
}

// tokensBackward queues the sorted backward accumulating dout's rows into
// dst (V,C) F32, and with dwpe the position sums, spread over the sort's
// launches. Its scratch is sized from B·T, V and C (scratchBytes).
func (d *Device) tokensBackward(op string, dst, dwpe cuda.DevicePtr, dout, tokens *tensor.Tensor, B, T, C, V int) {
	dt, BT := dout.DType, B*T
	pl := d.encoderPlan(BT, V)
	if V > 1<<30 || int64(BT)*int64(C) >= 1<<31 || int64(BT)+int64(pl.L) >= 1<<31 {
		d.fail(fmt.Errorf("gpu: %s: B·T %d, C %d, V %d: more than the kernels index (V <= 2^30, B·T·C < 2^31): %w", op, BT, C, V, tensor.ErrShape))
		return
	}
	nSorted, nCounts, nPart := pl.scratchBytes(BT, C)
	sorted := d.scratch("encoder.sorted", nSorted)
	count := d.scratch("encoder.counts", nCounts)
	part := d.scratch("encoder.part", nPart)
	if sorted == 0 || count == 0 || part == 0 {
		return
	}
	keys := [2]cuda.DevicePtr{sorted, sorted + cuda.DevicePtr(4*BT)}
	vals := [2]cuda.DevicePtr{sorted + cuda.DevicePtr(8*BT), sorted + cuda.DevicePtr(12*BT)}
	hcnt, look := count, count+cuda.DevicePtr(4*pl.passes*pl.tiles*encRadix)
	// The position blocks, split evenly over the 1+passes sort launches.
	nW := 0
	if dwpe != 0 {
		nW = blocks(T*C, encThreads)
	}
	w := func(i int) int { return nW * i / (1 + pl.passes) }
	block := cuda.D1(encThreads)
	if !d.launch("encoder_sort_count", dt, grid1(pl.tiles+w(1)), block, 0,
		hcnt, look, dwpe, d.ptr(dout), d.ptr(tokens), B, T, C, V, pl.passes, pl.tiles, pl.items, 0) {
		return
	}
	for p := range pl.passes {
		in, out := (p+1)&1, p&1
		if !d.launch("encoder_sort_pass", dt, grid1(pl.tiles+w(p+2)-w(p+1)), block, 0,
			keys[out], vals[out], keys[in], vals[in], d.ptr(tokens), hcnt, look, dwpe, d.ptr(dout), B, T, C, V, p, pl.tiles, pl.items, w(p+1)) {
			return
		}
	}
	fin := (pl.passes - 1) & 1
	if !d.launch("encoder_backward", dt, grid1(pl.segs), block, 0, dst, part, d.ptr(dout), keys[fin], vals[fin], BT, C, V, pl.kmask(), pl.L) {
		return
	}
	d.launch("encoder_backward_fixup", dt, grid1(pl.segs), block, 0, dst, part, keys[fin], BT, C, V, pl.kmask(), pl.L, pl.segs)
}

// EncoderBackward accumulates dout into the rows of dwte and dwpe that
// Encoder read; deterministic (the same bits on every run). The fused
// form gives the CPU reference's bits for dwpe and for every id whose
// sorted positions lie in one segment (see encoderPlan); the others are
// summed in segment order.
// dwte (V,C) F32, dwpe (maxT,C) F32, dout (B,T,C), tokens (B,T) I32
func (d *Device) EncoderBackward(dwte, dwpe, dout, tokens *tensor.Tensor, B, T, C int) {
	const op = "encoder backward"
	if !d.check(&device.Ops.EncoderBackward, []int{B, T, C}, dwte, dwpe, dout, tokens) {
		return
	}
	V, ok := d.encoderArgs(op, dout, dwte, dwpe, tokens, B, T, C)
	if !ok || !d.checkDT(op, tensor.F32, dwte, dwpe) || B*T == 0 {
		return
	}
	dt := dout.DType
	if d.fused {
		d.tokensBackward(op, d.ptr(dwte), d.ptr(dwpe), dout, tokens, B, T, C, V)
		return
	}
	// Decomposed: batch sum into (T,C), accumulate; dense scatter-add into
	// a zeroed (V,C), accumulate.
	gpos := d.scratch("encoder.gpos", T*C*4)
	gtok := d.scratch("encoder.gtok", V*C*4)
	if gpos == 0 || gtok == 0 {
		return
	}
	d.launch("encoder_sum_positions", dt, grid1(blocks(T*C, encBlock)), cuda.D1(encBlock), 0, gpos, d.ptr(dout), B, T, C)
	d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(T)*int64(C), 1), cuda.D1(addF32Block), 0, d.ptr(dwpe), gpos, int64(T)*int64(C))
	if err := d.memset(gtok, V*C*4); err != nil {
		d.fail(fmt.Errorf("gpu: %s: %w", op, err))
		return
	}
	d.tokensBackward(op, gtok, 0, dout, tokens, B, T, C, V)
	d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(V)*int64(C), 1), cuda.D1(addF32Block), 0, d.ptr(dwte), gtok, int64(V)*int64(C))
}
