package gpu

// encoder.go: the token + position embedding and its deterministic
// backward, the launchers of kernels/encoder.cu (see its header for the
// schemes). out, dout, dwte and dwpe are fp32 under every policy (the
// residual stream and parameter gradients); wte and wpe are the working
// dtype. The caller validates the tokens on the host (package gpt does);
// the kernels only make an out-of-range token harmless (a NaN row forward,
// skipped backward).

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
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

// encPlan is how encoder_backward splits the token work (see
// kernels/encoder.cu): G groups of K consecutive token ids, each over S
// ranges of P positions.
type encPlan struct{ K, G, S, P int }

// encoderPlan picks the split for BT positions over V ids. A small
// vocabulary (V <= 1024: byte-level models) gives one id a block and
// splits the positions so that about 4·V positions fall in each range (at
// most 16 ranges): each id repeats many times there, and a frequent one
// would otherwise serialise one block. A large vocabulary gives about two
// blocks an SM, each owning ⌈V/G⌉ ids over all positions (S = 1: the CPU's
// summation order, the same bits).
func (d *Device) encoderPlan(BT, V int) encPlan {
	if V <= 1024 {
		S := max(1, min(16, BT/(4*V)))
		return encPlan{K: 1, G: V, S: S, P: blocks(BT, S)}
	}
	G := min(V, 2*d.sms())
	K := blocks(V, G)
	return encPlan{K: K, G: blocks(V, K), S: 1, P: BT}
}

// tokensBackward queues encoder_backward's token blocks (and, with dwpe,
// its position blocks) accumulating dout's rows into dst (V,C) F32, then
// encoder_backward_combine when the positions are split.
func (d *Device) tokensBackward(op string, dst, dwpe cuda.DevicePtr, dout, tokens *tensor.Tensor, B, T, C, V int) {
	dt, BT := dout.DType, B*T
	pl := d.encoderPlan(BT, V)
	if pl.K >= 1<<22 {
		d.fail(fmt.Errorf("gpu: %s: %d token ids for %d groups: %w", op, V, pl.G, tensor.ErrShape))
		return
	}
	var part cuda.DevicePtr
	if pl.S > 1 {
		if part = d.scratch("encoder.part", pl.S*V*C*4); part == 0 {
			return
		}
	}
	nW := 0
	if dwpe != 0 {
		nW = blocks(T*C, encThreads)
	}
	if !d.launch("encoder_backward", dt, grid1(pl.G*pl.S+nW), cuda.D1(encThreads), 0,
		dst, part, dwpe, d.ptr(dout), d.ptr(tokens), B, T, C, V, pl.K, pl.G, pl.S, pl.P) || pl.S == 1 {
		return
	}
	n := int64(V) * int64(C)
	d.launch("encoder_backward_combine", dt, d.ewGrid(n, 1), cuda.D1(encBlock), 0, dst, part, pl.S, n)
}

// EncoderBackward accumulates dout into the rows of dwte and dwpe that
// Encoder read; deterministic (the same bits on every run; equal to the
// CPU reference's where the positions are not split, see encoderPlan).
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
