package gpu

// decode_block.go: device.BlockDecoder, a decode step's transformer block
// in five launches: kernels/decode.cu's decode_linear for the block's four
// linear phases (ln1 + qkv + the cache, the projection + residual, ln2 +
// fc + GELU, the MLP's projection + residual) and attention_decode between
// the first two, instead of the eight of its ops one by one: the
// layernorms run in the prologues of the products they feed, the residual
// adds and the cache append in the epilogues of those before.

import (
	"errors"
	"fmt"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.BlockDecoder = (*Device)(nil)

var (
	decLayerBlock = kernels.MustBlock("decode.cu", "DEC_LAYER_BLOCK")
	dlRows        = kernels.MustDefine("decode.cu", "DL_ROWS")
	dlQKV         = kernels.MustDefine("decode.cu", "DL_QKV")
	dlProj        = kernels.MustDefine("decode.cu", "DL_PROJ")
	dlFC          = kernels.MustDefine("decode.cu", "DL_FC")
)

// dlSmemBytes is decode_linear's dynamic shared memory: the warps' sums
// (DL_WARPS·DL_ROWS floats), then the N normalised rows of C values of dt.
func dlSmemBytes(dt tensor.DType, N, C int) int {
	return 4*(decLayerBlock/32)*dlRows + (N*C*dt.Size()+15)/16*16
}

// CanDecodeBlock returns nil when DecodeBlock runs decode_linear for these
// weights and sizes: the fused device, at most DL_ROWS rows, rows of whole
// 16-byte vectors from aligned tensors, heads up to decMaxHead, the
// kernel built, and the normalised rows in under 48 KiB of shared memory.
func (d *Device) CanDecodeBlock(dt tensor.DType, w device.BlockWeights, N, C, NH, S int) error {
	const op = "decode_linear"
	switch {
	case !d.fused:
		return errors.New("the unfused device runs the ops one by one")
	case d.noDecode != "":
		return fmt.Errorf("the decode ops are off: %s", d.noDecode)
	case N < 1 || N > dlRows:
		return fmt.Errorf("%d rows (%s takes 1 to %d)", N, op, dlRows)
	case NH < 1 || C%NH != 0 || C/NH > decMaxHead:
		return fmt.Errorf("%d channels in %d heads (attention_decode holds heads of up to %d)", C, NH, decMaxHead)
	case C%(16/dt.Size()) != 0:
		return fmt.Errorf("%d channels of %s are not whole 16-byte vectors", C, dt)
	case dlSmemBytes(dt, N, C) > 48<<10:
		return fmt.Errorf("%d rows of %d channels need %d bytes of shared memory (%s takes 48 KiB)", N, C, dlSmemBytes(dt, N, C), op)
	}
	for _, k := range []string{op, "attention_decode"} {
		if err := d.errs[kernelKey{k, dt}]; err != nil {
			return fmt.Errorf("kernel %s/%s unavailable: %w", k, dt, err)
		}
	}
	for _, t := range []*tensor.Tensor{w.LN1W, w.LN1B, w.QKVW, w.QKVB, w.ProjW, w.ProjB, w.LN2W, w.LN2B, w.FCW, w.FCB, w.FCProjW, w.FCProjB} {
		if t != nil && (t.DType != dt || uint64(d.ptr(t))%16 != 0) {
			return fmt.Errorf("a weight of %s is %s or not 16-byte aligned", op, t.DType)
		}
	}
	return nil
}

// DecodeBlock: one transformer block of a decode step (device.BlockDecoder).
// Where CanDecodeBlock refuses, it queues the block's ops one by one
// (decodeBlockOps).
// x (N,C) F32, kc, vc (N,NH,S,hs), pos (N) I32, w: C-wide weights
func (d *Device) DecodeBlock(x, kc, vc, pos *tensor.Tensor, w device.BlockWeights, N, C, NH, S int) {
	const op = "decode_linear"
	if !d.check(&device.DecodeOps.DecodeBlock, []int{N, C, NH, S}, x, kc, vc, pos, w.LN1W, w.LN1B, w.QKVW, w.QKVB,
		w.ProjW, w.ProjB, w.LN2W, w.LN2B, w.FCW, w.FCB, w.FCProjW, w.FCProjB) || !d.checkDT(op, kc.DType, vc) {
		return
	}
	dt := kc.DType
	if d.CanDecodeBlock(dt, w, N, C, NH, S) != nil {
		d.decodeBlockOps(x, kc, vc, pos, w, N, C, NH, S)
		return
	}
	if uint64(d.ptr(x)|d.ptr(kc)|d.ptr(vc))%16 != 0 {
		d.fail(fmt.Errorf("gpu: %s: x or a cache is not 16-byte aligned: %w", op, device.ErrUnsupported))
		return
	}
	hs, sz := C/NH, dt.Size()
	X := decSlots(blocks(S, decChunk), N*NH, d.sms())
	res := d.scratch("decode_block.res", N*C*4)
	qkv := d.scratch("decode_block.qkv", N*3*C*sz)
	atty := d.scratch("decode_block.atty", N*C*sz)
	fch := d.scratch("decode_block.fch", N*4*C*sz)
	po := d.scratch("decode_block.part_o", N*NH*X*hs*4)
	pml := d.scratch("decode_block.part_ml", N*NH*X*2*4)
	done := d.zeroScratch("decode_block.done", N*NH*4)
	if res == 0 || qkv == 0 || atty == 0 || fch == 0 || po == 0 || pml == 0 || done == 0 {
		return
	}
	// linear queues one phase of decode_linear over W (OC,K); ks, the warps
	// a column: one for qkv's 3C and fc's 4C columns, two for the
	// projection's C, four for the MLP's projection from 4C, so that a
	// warp's part of a row is at most C values.
	xp, cp, vp, pp := d.ptr(x), d.ptr(kc), d.ptr(vc), d.ptr(pos)
	linear := func(phase int, out, outf, xf, in cuda.DevicePtr, wt, lnw, lnb, b *tensor.Tensor, K, OC, ks int) bool {
		smem := dlSmemBytes(dt, N, K) // the warps' sums, then the normalised rows
		if phase == dlProj {
			smem = dlSmemBytes(dt, 0, K) // the warps' sums (ks > 1) alone
		}
		return d.launch(op, dt, cuda.D1(blocks(OC, decLayerBlock/32/ks)), cuda.D1(decLayerBlock), smem,
			out, outf, cp, vp, pp, xf, in, d.ptr(wt), d.ptr(lnw), d.ptr(lnb), d.ptr(b), N, K, OC, NH, S, ks, phase)
	}
	_ = linear(dlQKV, qkv, 0, xp, 0, w.QKVW, w.LN1W, w.LN1B, w.QKVB, C, 3*C, 1) &&
		d.launch("attention_decode", dt, cuda.Dim3{X: uint32(X), Y: uint32(N * NH), Z: 1}, cuda.D1(decAttBlock), 0,
			atty, po, pml, done, qkv, cp, vp, pp, N, C, NH, S, blocks(S, decChunk)) &&
		linear(dlProj, 0, res, xp, atty, w.ProjW, nil, nil, w.ProjB, C, C, 2) &&
		linear(dlFC, fch, 0, res, 0, w.FCW, w.LN2W, w.LN2B, w.FCB, C, 4*C, 1) &&
		linear(dlProj, 0, xp, res, fch, w.FCProjW, nil, nil, w.FCProjB, 4*C, C, 4)
}

// decodeBlockOps queues device.DecodeBlockOps over scratch buffers of the
// device (allocated once, so a graph can capture it).
func (d *Device) decodeBlockOps(x, kc, vc, pos *tensor.Tensor, w device.BlockWeights, N, C, NH, S int) {
	dt := kc.DType
	buf := func(name string, dt tensor.DType, n int) *tensor.Tensor {
		p := d.scratch("decode_block."+name, n*dt.Size())
		if p == 0 {
			return nil
		}
		return tensor.OnDevice(dt, uintptr(p), n)
	}
	s := device.BlockScratch{LN: buf("ln", dt, N*C), QKV: buf("qkv", dt, N*3*C), Atty: buf("atty", dt, N*C),
		Proj: buf("proj", dt, N*C), Pre: buf("pre", dt, N*4*C), FCH: buf("fch", dt, N*4*C),
		Res: buf("res", tensor.F32, N*C), Mean: buf("mean", tensor.F32, N), Rstd: buf("rstd", tensor.F32, N)}
	if s.LN == nil || s.QKV == nil || s.Atty == nil || s.Proj == nil || s.Pre == nil || s.FCH == nil || s.Res == nil ||
		s.Mean == nil || s.Rstd == nil {
		return
	}
	if err := device.DecodeBlockOps(d, x, kc, vc, pos, w, s, N, C, NH, S); err != nil {
		d.fail(err)
	}
}
