package gpu

// decode.go: generation over a key/value cache (device.Decoder), the
// kernels of kernels/decode.cu; the CPU twin is pkg/device/cpu/decode.go.
// Every launch's grid depends on the sizes, S and the device's SM count
// only, never on the positions (they are read on the device), so a decode
// step is captured once as a graph and replayed for every token.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.Decoder = (*Device)(nil)

var (
	decBlock       = kernels.MustBlock("decode.cu", "DEC_BLOCK")
	decAttBlock    = kernels.MustBlock("decode.cu", "DEC_ATT_BLOCK")
	decChunk       = kernels.MustBlock("decode.cu", "DEC_CHUNK")
	decSampleBlock = kernels.MustBlock("decode.cu", "DEC_SAMPLE_BLOCK")
	decPartBlock   = kernels.MustBlock("decode.cu", "DEC_PART_BLOCK")
	decPartIDs     = kernels.MustDefine("decode.cu", "DEC_PART_IDS")
)

// decPartBytes is the size of kernels/decode.cu's DecPart.
const decPartBytes = 32

// DecodeKernels are the kernels of the decode ops: a failure to build them,
// or their ops' self-test, turns generation's cache off on this device
// (DisableDecode), never the GPU.
var DecodeKernels = []string{"encoder_at", "kv_append", "attention_decode", "sample_parts", "sample_rows"}

// DecodeReady returns nil when every decode kernel is built for the
// device's float dtypes and the ops were not turned off.
func (d *Device) DecodeReady() error {
	if d.noDecode != "" {
		return fmt.Errorf("gpu: the decode ops are off: %s", d.noDecode)
	}
	for _, k := range DecodeKernels {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			if err := d.errs[kernelKey{k, dt}]; err != nil {
				return fmt.Errorf("gpu: decode kernel %s/%s unavailable: %w", k, dt, err)
			}
		}
	}
	return nil
}

// DisableDecode turns the decode ops off (DecodeReady then says why).
func (d *Device) DisableDecode(why string) { d.noDecode = why }

// IsDecodeCase reports whether a conformance case is one of the decode
// ops' (druto detect counts their failures apart: they turn the cache off,
// not the GPU).
func IsDecodeCase(name string) bool {
	for _, op := range []string{"EncoderAt ", "KVAppend ", "AttentionDecode ", "SampleHead "} {
		if strings.HasPrefix(name, op) || strings.Contains(name, ": "+op) {
			return true
		}
	}
	return false
}

// IsDecodeKernel reports whether kernel name is one of DecodeKernels.
func IsDecodeKernel(name string) bool { return slices.Contains(DecodeKernels, name) }

// decMaxHead is the largest head size attention_decode holds (its q in
// shared memory).
const decMaxHead = 256

// EncoderAt: out[i,:] = wte[tokens[i],:] + wpe[pos[i],:]; out is fp32.
// out (N,C) F32, wte (V,C), wpe (maxT,C), tokens (N) I32, pos (N) I32
func (d *Device) EncoderAt(out, wte, wpe, tokens, pos *tensor.Tensor, N, C int) {
	const op = "encoder_at"
	if !d.check(&device.DecodeOps.EncoderAt, []int{N, C}, out, wte, wpe, tokens, pos) ||
		!d.checkDT(op, tensor.F32, out) || !d.checkDT(op, wte.DType, wpe) || N == 0 {
		return
	}
	V, S := wte.Numel()/C, wpe.Numel()/C
	d.launch(op, wte.DType, cuda.D1(blocks(N*C, decBlock)), cuda.D1(decBlock), 0,
		d.ptr(out), d.ptr(wte), d.ptr(wpe), d.ptr(tokens), d.ptr(pos), N, C, V, S)
}

// KVAppend copies qkv's keys and values into the caches at pos[b]+t.
// kc, vc (B,NH,S,hs), qkv (B,T,3C), pos (B) I32, one dtype for the three
func (d *Device) KVAppend(kc, vc, qkv, pos *tensor.Tensor, B, T, C, NH, S int) {
	const op = "kv_append"
	if !d.check(&device.DecodeOps.KVAppend, []int{B, T, C, NH, S}, kc, vc, qkv, pos) ||
		!d.checkDT(op, qkv.DType, kc, vc) || B*T == 0 {
		return
	}
	d.launch(op, qkv.DType, cuda.D1(blocks(B*T*C, decBlock)), cuda.D1(decBlock), 0,
		d.ptr(kc), d.ptr(vc), d.ptr(qkv), d.ptr(pos), B, T, C, NH, S)
}

// AttentionDecode: one query row a sequence against its cached positions,
// split over the cache in chunks (flash-decoding), then the splits merged.
// The grid is (decSlots, B·NH): a block takes every decSlots-th chunk and
// merges them itself, so the grid fills the GPU without a block for each of
// the cache's (mostly empty) chunks.
// out (B,C), qkv (B,3C), kc, vc (B,NH,S,hs), pos (B) I32, one float dtype
func (d *Device) AttentionDecode(out, qkv, kc, vc, pos *tensor.Tensor, B, C, NH, S int) {
	const op = "attention_decode"
	if !d.check(&device.DecodeOps.AttentionDecode, []int{B, C, NH, S}, out, qkv, kc, vc, pos) ||
		!d.checkDT(op, qkv.DType, out, kc, vc) || B == 0 {
		return
	}
	if hs := C / NH; hs > decMaxHead {
		d.unsupported(op+" (head size above 256)", qkv.DType)
		return
	}
	X := decSlots(blocks(S, decChunk), B*NH, d.sms())
	if d.attX > 0 {
		X = min(d.attX, blocks(S, decChunk))
	}
	hs := C / NH
	po := d.scratch("decode.part_o", B*NH*X*hs*4)
	pml := d.scratch("decode.part_ml", B*NH*X*2*4)
	done := d.zeroScratch("decode.done", B*NH*4)
	if po == 0 || pml == 0 || done == 0 {
		return
	}
	d.launch(op, qkv.DType, cuda.Dim3{X: uint32(X), Y: uint32(B * NH), Z: 1}, cuda.D1(decAttBlock), 0,
		d.ptr(out), po, pml, done, d.ptr(qkv), d.ptr(kc), d.ptr(vc), d.ptr(pos), B, C, NH, S)
}

// decAttWave is the blocks of attention_decode an SM is given (before
// rounding up), about half of the 7 its launch bounds keep resident. When
// the rounding gives a pair more than one block (pairs < decAttWave·sms),
// the grid stays under decAttWave·sms + pairs < 2·decAttWave·sms = 8
// blocks an SM, and at or under 7 (one wave, no tail of blocks waiting for
// a free SM) except where X = 2 and pairs is above 3.5·sms: there at most
// one block an SM waits.
const decAttWave = 4

// decSlots is attention_decode's blocks a (b, h) pair (its grid's X, and
// the partials' slots a pair) for a cache of splits chunks, pairs = B·NH
// and sms multiprocessors: enough blocks to fill the GPU
// (ceil(decAttWave·sms/pairs)), at least one and never more than the
// chunks. It depends on the sizes only, never on the positions, so a
// captured graph replays for any lengths.
func decSlots(splits, pairs, sms int) int {
	return min(splits, max(1, blocks(decAttWave*sms, pairs)))
}

// SampleHead: the logits by the LM head's GEMM into logits (x's dtype),
// then sample_parts scans each row's vocabulary in parts of DEC_PART_IDS
// ids across the GPU (argmax, counts, weight sums) and sample_rows draws
// each row's token from them on the device and advances its state; only
// ids need to come back to the host.
// ids (B) I32, logits (B,V), x (B,C), wte (V,C), table (NS,V) I32, rows (B,RowLen) I32
func (d *Device) SampleHead(ids, logits, x, wte, table, rows *tensor.Tensor, B, C, V, NS int, o device.Sampling) {
	const op = "sample_rows"
	if !d.check(&device.DecodeOps.SampleHead, []int{B, C, V, NS}, ids, logits, x, wte, table, rows) ||
		!d.checkDT(op, x.DType, logits, wte) || B == 0 {
		return
	}
	P := blocks(V, decPartIDs)
	parts := d.scratch("decode.sample_parts", B*P*decPartBytes)
	if parts == 0 {
		return
	}
	d.Matmul(logits, nil, x, wte, nil, B, C, V, device.None)
	if !d.launch("sample_parts", x.DType, cuda.Dim3{X: uint32(P), Y: uint32(B), Z: 1}, cuda.D1(decPartBlock), 0,
		parts, d.ptr(logits), d.ptr(table), d.ptr(rows), V, NS, o.Temperature) {
		return
	}
	d.launch(op, x.DType, cuda.D1(B), cuda.D1(decSampleBlock), 0,
		d.ptr(ids), d.ptr(logits), d.ptr(table), d.ptr(rows), V, NS, o.Temperature, o.TopK, o.TopP, parts, P)
}
