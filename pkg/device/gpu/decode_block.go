package gpu

// decode_block.go: device.BlockDecoder, a decode step's transformer block
// as one launch of kernels/decode.cu's decode_layer, a persistent kernel
// whose phases (ln1 + qkv + the cache, attention, projection + residual,
// ln2 + fc + GELU, projection + residual) meet at barriers over the grid
// instead of at eight kernel boundaries.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.BlockDecoder = (*Device)(nil)

// carveouts holds the decode_layer functions whose shared-memory carveout
// is set.
var carveouts sync.Map // *cuda.Function -> true

var (
	decLayerBlock = kernels.MustBlock("decode.cu", "DEC_LAYER_BLOCK")
	dlRows        = kernels.MustDefine("decode.cu", "DL_ROWS")
	dlPerSM       = kernels.MustDefine("decode.cu", "DL_PER_SM")
	dlGen         = kernels.MustDefine("decode.cu", "DL_GEN")
)

// dlSmemBytes is decode_layer's dynamic shared memory (its DL_FLOATS after
// dl_in_bytes): the N input rows of C values of dt, rounded up to 16
// bytes, then the warps' sums (DL_WARPS·DL_ROWS), attention's q
// (DEC_MAX_HEAD), p (DEC_CHUNK), its warps' slots (2·DL_WARPS), pv
// (DEC_PV) and last, as floats.
func dlSmemBytes(dt tensor.DType, N, C int) int {
	warps := decLayerBlock / 32
	pv := max(decAttBlock*16/dt.Size(), decMaxHead)
	in := (N*C*dt.Size() + 15) / 16 * 16
	return in + 4*(warps*dlRows+decMaxHead+decChunk+2*warps+pv+1)
}

// dlGrid is decode_layer's grid: every block resident at once (the barrier
// waits for all of them), DL_PER_SM an SM or fewer where the registers or
// the shared memory hold fewer, or DLPerSMEnv's count where it is fewer (a
// measurement's knob: fewer blocks wait at each barrier).
func (d *Device) dlGrid(dt tensor.DType, N, C int) int {
	n := min(dlPerSM, d.residentBlocks("decode_layer", dt, decLayerBlock, dlSmemBytes(dt, N, C)))
	if v, err := strconv.Atoi(os.Getenv(DLPerSMEnv)); err == nil && v >= 1 {
		n = min(n, v)
	}
	return d.sms() * n
}

// DLPerSMEnv names the environment variable that caps decode_layer's
// blocks an SM (1 to DL_PER_SM).
const DLPerSMEnv = "DRUTO_DECODE_BLOCK_PER_SM"

// CanDecodeBlock returns nil when DecodeBlock runs decode_layer for these
// weights and sizes: the fused device, at most DL_ROWS rows, rows of whole
// 16-byte vectors from aligned tensors, heads up to decMaxHead, the
// kernel built, and the input rows in under 48 KiB of shared memory.
func (d *Device) CanDecodeBlock(dt tensor.DType, w device.BlockWeights, N, C, NH, S int) error {
	const op = "decode_layer"
	switch {
	case !d.fused:
		return errors.New("the unfused device runs the ops one by one")
	case d.noDecode != "":
		return fmt.Errorf("the decode ops are off: %s", d.noDecode)
	case N < 1 || N > dlRows:
		return fmt.Errorf("%d rows (%s takes 1 to %d)", N, op, dlRows)
	case NH < 1 || C%NH != 0 || C/NH > decMaxHead:
		return fmt.Errorf("%d channels in %d heads (%s holds heads of up to %d)", C, NH, op, decMaxHead)
	case C%(16/dt.Size()) != 0:
		return fmt.Errorf("%d channels of %s are not whole 16-byte vectors", C, dt)
	case dlSmemBytes(dt, N, C) > 48<<10:
		return fmt.Errorf("%d rows of %d channels need %d bytes of shared memory (%s takes 48 KiB)", N, C, dlSmemBytes(dt, N, C), op)
	}
	if err := d.errs[kernelKey{op, dt}]; err != nil {
		return fmt.Errorf("kernel %s/%s unavailable: %w", op, dt, err)
	}
	for _, t := range []*tensor.Tensor{w.LN1W, w.LN1B, w.QKVW, w.QKVB, w.ProjW, w.ProjB, w.LN2W, w.LN2B, w.FCW, w.FCB, w.FCProjW, w.FCProjB} {
		if t != nil && (t.DType != dt || uint64(d.ptr(t))%16 != 0) {
			return fmt.Errorf("a weight of %s is %s or not 16-byte aligned", op, t.DType)
		}
	}
	if d.dlGrid(dt, N, C) < 1 {
		return fmt.Errorf("no block of %s fits on an SM", op)
	}
	return nil
}

// DecodeBlock: one transformer block of a decode step (device.BlockDecoder).
// Where CanDecodeBlock refuses, it queues the block's ops one by one
// (decodeBlockOps).
// x (N,C) F32, kc, vc (N,NH,S,hs), pos (N) I32, w: C-wide weights
func (d *Device) DecodeBlock(x, kc, vc, pos *tensor.Tensor, w device.BlockWeights, N, C, NH, S int) {
	const op = "decode_layer"
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
	G := d.dlGrid(dt, N, C)
	hs := C / NH
	X := min(blocks(S, decChunk), max(1, blocks(G, N*NH)))
	sz := dt.Size()
	res := d.scratch("decode_layer.res", N*C*4)
	qkv := d.scratch("decode_layer.qkv", N*3*C*sz)
	atty := d.scratch("decode_layer.atty", N*C*sz)
	fch := d.scratch("decode_layer.fch", N*4*C*sz)
	po := d.scratch("decode_layer.part_o", N*NH*X*hs*4)
	pml := d.scratch("decode_layer.part_ml", N*NH*X*2*4)
	done := d.zeroScratch("decode_layer.done", N*NH*4)
	bar := d.zeroScratch("decode_layer.bar", (dlGen+1)*4)
	if res == 0 || qkv == 0 || atty == 0 || fch == 0 || po == 0 || pml == 0 || done == 0 || bar == 0 {
		return
	}
	if launchHook == nil {
		if f := d.fn(op, dt); f == nil {
			return
		} else if _, done := carveouts.LoadOrStore(f, true); !done {
			// Most of the SM's storage as shared memory, so that the
			// driver's split holds every block the grid counts on.
			_ = f.SetSharedCarveout(100)
		}
	}
	// ks, the warps a column of each linear phase: one for qkv's 3C and
	// fc's 4C columns, two for the projection's C, four for the MLP's
	// projection from 4C (about as many units as the grid has warps).
	d.launch(op, dt, cuda.D1(G), cuda.D1(decLayerBlock), dlSmemBytes(dt, N, C),
		d.ptr(x), res, qkv, atty, fch, po, pml, done, bar, d.ptr(kc), d.ptr(vc), d.ptr(pos),
		d.ptr(w.QKVW), d.ptr(w.LN1W), d.ptr(w.LN1B), d.ptr(w.QKVB), d.ptr(w.ProjW), d.ptr(w.ProjB),
		d.ptr(w.LN2W), d.ptr(w.LN2B), d.ptr(w.FCW), d.ptr(w.FCB), d.ptr(w.FCProjW), d.ptr(w.FCProjB),
		N, C, NH, S, X, 1, 2, 1, 4)
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
