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
func elemBlocks(n int) cuda.Dim3 { return cuda.D1(max(1, min(blocks(n, 256), 132*64))) }

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
		d.launch("encoder_forward", dt, elemBlocks(n), cuda.D1(encBlock), 0,
			d.ptr(out), d.ptr(wte), d.ptr(wpe), d.ptr(tokens), BT, T, C, V)
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

// encoderGroups is how many token groups encoder_backward_tokens splits
// the vocabulary into: about 16 warps per SM in all (one warp per 32
// channels per group), at most one group per token. Every warp walks all
// B·T tokens, so more groups cost instructions; fewer leave SMs idle.
func (d *Device) encoderGroups(C, V int) int {
	return max(1, min(V, blocks(d.sms()*16, blocks(C, 32))))
}

// EncoderBackward accumulates dout into the rows of dwte and dwpe that
// Encoder read; deterministic (the same bits on every run and equal to the
// CPU reference's, which sums in the same order).
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
	dt, BT := dout.DType, B*T
	groups := d.encoderGroups(C, V)
	tokGrid := cuda.Dim3{X: uint32(blocks(C, encBlock)), Y: uint32(groups), Z: 1}
	if d.fused {
		d.launch("encoder_backward_positions", dt, grid1(blocks(T*C, encBlock)), cuda.D1(encBlock), 0, d.ptr(dwpe), d.ptr(dout), B, T, C)
		d.launch("encoder_backward_tokens", dt, tokGrid, cuda.D1(encBlock), 0, d.ptr(dwte), d.ptr(dout), d.ptr(tokens), BT, C, V, groups)
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
	d.launch("encoder_backward_tokens", dt, tokGrid, cuda.D1(encBlock), 0, gtok, d.ptr(dout), d.ptr(tokens), BT, C, V, groups)
	d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(V)*int64(C), 1), cuda.D1(addF32Block), 0, d.ptr(dwte), gtok, int64(V)*int64(C))
}
