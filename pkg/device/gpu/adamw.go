package gpu

// adamw.go: AdamWStep, the launchers of kernels/adamw.cu (its header has
// the arithmetic, torch.optim.AdamW's, bit for bit the CPU reference's).
//
// Fused (apex FusedAdam, llm.c): one launch over the whole flat buffer. The
// layout's segments are cut into chunks of at most adamChunk elements that
// never straddle a segment; the table of (first element, length | decay
// flag) pairs is uploaded once per layout and kept in d.tables (the core
// frees it in Close). One block per chunk, float4 loads of the four fp32
// buffers, the working copy (16-bit, F32, or none) written in the same pass,
// GradScale's multiply applied first.
//
// Decomposed (torch's for-loop AdamW): per segment, one elementwise launch
// per step (scale the gradient, decay, m, v·β2, v += ..., sqrt, /√bc2,
// +eps, update), then a cast pass into the working copy: about ten launches
// per tensor, ~1500 for GPT-2 124M, all queued in one hop to the context's
// thread.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// adamChunk is the most elements one block of adamw_fused2 updates.
const adamChunk = 16384

// adamConsts are the per-step scalars (shared with the other device).
type adamConsts = device.AdamWConsts

func newAdamConsts(hp device.AdamW) adamConsts { return hp.Consts() }

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// adamSpan is one segment of the layout (device.AdamWArgs).
type adamSpan = device.Span

// adamChunks cuts spans into the fused kernel's table: for chunk k,
// table[2k] is its first element and table[2k+1] its length with bit 31
// set when the segment decays.
func adamChunks(spans []adamSpan) []uint32 {
	var table []uint32
	for _, s := range spans {
		for lo := s.Lo; lo < s.Hi; lo += adamChunk {
			n := uint32(min(adamChunk, s.Hi-lo))
			if s.Decay {
				n |= 1 << 31
			}
			table = append(table, uint32(lo), n)
		}
	}
	return table
}

// AdamWStep updates master, m and v in place over every segment of layout
// and, when work is not nil, writes the updated parameters rounded to
// work's dtype in the same pass. Elements outside every segment are left
// alone.
// master, grads, m, v (layout.Total) F32; work (layout.Total) F32, BF16, F16 or nil
func (d *Device) AdamWStep(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW) {
	wdt, spans, ok := d.adamArgs(&device.Ops.AdamWStep, master, work, grads, m, v, layout, hp, nil)
	if !ok {
		return
	}
	c := newAdamConsts(hp)
	if d.fused {
		d.adamWFused(wdt, master, work, grads, m, v, layout, spans, c)
	} else {
		d.batch(func() { d.adamWDecomposed(wdt, master, work, grads, m, v, spans, c) })
	}
}

// adamArgs checks the arguments AdamWStep and AdamWState share against c
// (state is c's last tensor when c has one) and returns the working copy's
// dtype (F32 without one) and layout's spans; ok is false when an error
// was recorded.
func (d *Device) adamArgs(c *device.Contract, master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) (wdt tensor.DType, spans []adamSpan, ok bool) {
	spans, sizes, err := device.AdamWArgs(c, layout, hp)
	if err != nil {
		d.fail(fmt.Errorf("gpu: %w", err))
		return wdt, nil, false
	}
	ts := []*tensor.Tensor{master, work, grads, m, v}
	if len(c.Params) > len(ts) {
		ts = append(ts, state)
	}
	if !d.check(c, sizes, ts...) {
		return wdt, nil, false
	}
	wdt = tensor.F32 // the module: the working copy's dtype
	if work != nil {
		wdt = work.DType
	}
	if layout.Total >= 1<<31 {
		d.fail(fmt.Errorf("gpu: %s: %d parameters, the chunk table holds fewer than 2^31: %w", c.Op, layout.Total, device.ErrUnsupported))
		return wdt, nil, false
	}
	return wdt, spans, true
}

// adamTable returns the device copy of layout's chunk table (uploading it
// on first use, or again when the layout's segments changed) and its number
// of chunks.
func (d *Device) adamTable(layout *tensor.Layout, spans []adamSpan) (cuda.DevicePtr, int) {
	table := adamChunks(spans)
	return d.layoutTable(tableKey{layout, "adamw"}, u32Bytes(table)), len(table) / 2
}

// tableKey names one of the tables kept for a layout: the optimizer's
// chunks, or AdamWStateFP8's chunks and weight records.
type tableKey struct {
	layout *tensor.Layout
	what   string
}

// layoutTable returns the device copy of data kept under key, uploading
// it on first use or again when it changed (a graph that read the old
// copy is then stale: d.moves). It returns 0 with an error recorded when
// the upload fails or would happen during graph capture, and the hooked
// address in launch tests.
func (d *Device) layoutTable(key tableKey, data []byte) cuda.DevicePtr {
	if launchHook != nil {
		return hookAddr
	}
	if t, ok := d.tables[key]; ok && bytes.Equal(t.data, data) {
		return t.ptr
	} else if ok {
		if err := d.ctx.Pool().Free(t.ptr); err != nil {
			d.fail(fmt.Errorf("gpu: %s: %w", key.what, err))
			return 0
		}
		delete(d.tables, key)
		d.moves++
	}
	if d.capturing {
		d.fail(fmt.Errorf("gpu: %s: its table would be uploaded during graph capture (run the step once before capturing)", key.what))
		return 0
	}
	p, err := d.ctx.Pool().Alloc(uint64(max(len(data), 1)))
	if err != nil {
		d.fail(fmt.Errorf("gpu: %s: table: %w", key.what, err))
		return 0
	}
	if err := cuda.Upload(d.stream, p, data); err != nil {
		_ = d.ctx.Pool().Free(p)
		d.fail(fmt.Errorf("gpu: %s: table: %w", key.what, err))
		return 0
	}
	d.tables[key] = layoutTable{ptr: p, data: slices.Clone(data)}
	return p
}

// u32Bytes is the little-endian bytes of vs (the device's order).
func u32Bytes(vs []uint32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// adamWFused: one adamw_fused2 launch, a block per chunk.
func (d *Device) adamWFused(wdt tensor.DType, master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, spans []adamSpan, c adamConsts) {
	table, chunks := d.adamTable(layout, spans)
	if table == 0 || chunks == 0 {
		return
	}
	d.kAdamWFused(wdt, chunks, master, work, grads, m, v, table, c)
}

// kAdamWFused launches adamw_fused2 (the next group's loads in flight
// during the current group's update) over chunks blocks.
func (d *Device) kAdamWFused(wdt tensor.DType, chunks int, master, work, grads, m, v *tensor.Tensor, table cuda.DevicePtr, c adamConsts) bool {
	vec := vec4(d.ptr(master), 4, d.ptr(grads), 4, d.ptr(m), 4, d.ptr(v), 4, d.ptr(work), wdt.Size())
	return d.run("adamw_fused2", wdt, cuda.D1(chunks), cuda.D1(adamwBlock), 0,
		d.ptr(master), d.ptr(work), d.ptr(grads), d.ptr(m), d.ptr(v), table,
		c.GS, b2i(c.Scaled), c.Decay, b2i(c.DoDecay), c.W1, b2i(c.Small), c.B2, c.W2, c.Step, c.BC2, c.Eps, vec)
}

// The ops of adamw_pass.
const (
	adamScaleInto = iota // a = b·s
	adamScale            // a = a·s
	adamLerp             // a = lerp(a, b, s)
	adamAddcmul          // a = a + (s·b)·b
	adamSqrtInto         // a = sqrt(b)
	adamDiv              // a = a / s
	adamAddScalar        // a = a + s
	adamAddcdiv          // a = a + s·(b / c)
)

// adamWDecomposed: torch's for-loop AdamW, a launch per step per tensor.
func (d *Device) adamWDecomposed(wdt tensor.DType, master, work, grads, m, v *tensor.Tensor, spans []adamSpan, c adamConsts) {
	longest := 0
	for _, s := range spans {
		longest = max(longest, s.Hi-s.Lo)
	}
	gbuf, den := d.buf("adamw.grad", longest*4), d.buf("adamw.den", longest*4) // reused per tensor
	if gbuf == 0 || den == 0 {
		return
	}
	at := func(t *tensor.Tensor, lo int) cuda.DevicePtr {
		return d.ptr(t).Add(uint64(lo) * uint64(t.DType.Size()))
	}
	for _, s := range spans {
		n := int64(s.Hi - s.Lo)
		p, g, ms, vs := at(master, s.Lo), at(grads, s.Lo), at(m, s.Lo), at(v, s.Lo)
		pass := func(op int, a, b, cc cuda.DevicePtr, scalar float32) bool {
			return d.run("adamw_pass", wdt, d.ewGrid(n, 1), cuda.D1(adamwBlock), 0, op, a, b, cc, scalar, b2i(c.Small), n)
		}
		ok := true
		if c.Scaled { // g = grad·scale, out of place: grads are an input
			ok = pass(adamScaleInto, gbuf, g, 0, c.GS)
			g = gbuf
		}
		if ok && s.Decay && c.DoDecay { // p.mul_(1 - lr·wd)
			ok = pass(adamScale, p, 0, 0, c.Decay)
		}
		ok = ok && pass(adamLerp, ms, g, 0, c.W1) && // m.lerp_(g, 1-β1)
			pass(adamScale, vs, 0, 0, c.B2) && // v.mul_(β2)
			pass(adamAddcmul, vs, g, 0, c.W2) && // v.addcmul_(g, g, 1-β2)
			pass(adamSqrtInto, den, vs, 0, 0) && // den = v.sqrt()
			pass(adamDiv, den, 0, 0, c.BC2) && // den /= sqrt(bc2)
			pass(adamAddScalar, den, 0, 0, c.Eps) && // den += eps
			pass(adamAddcdiv, p, ms, den, c.Step) // p.addcdiv_(m, den, step)
		if ok && work != nil { // work[seg].copy_(p)
			ok = d.run("adamw_store_work", wdt, d.ewGrid(n, 1), cuda.D1(adamwBlock), 0, at(work, s.Lo), p, n)
		}
		if !ok {
			return
		}
	}
}

// AdamWBF16 is AdamWStep (state nil) or AdamWState (state given) with m
// and v stored in bf16 and rounded stochastically (device.MomentsBF16):
// one adamw_bf16m launch, a block per chunk of the same table, the same
// bits as the CPU twin.
// master, grads (layout.Total) F32; work (layout.Total) or nil; m, v (layout.Total) BF16; state (StateLen) F32 or nil
func (d *Device) AdamWBF16(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) {
	wdt, spans, ok := d.adamArgs(&device.AdamWBF16, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return
	}
	table, chunks := d.adamTable(layout, spans)
	if table == 0 || chunks == 0 {
		return
	}
	c := newAdamConsts(hp) // with a state only the fixed parts are read
	d.run("adamw_bf16m", wdt, cuda.D1(chunks), cuda.D1(adamwBlock), 0,
		d.ptr(master), d.ptr(work), d.ptr(grads), d.ptr(m), d.ptr(v), table, d.ptr(state),
		c.GS, b2i(c.Scaled), c.Decay, b2i(c.DoDecay), c.W1, b2i(c.Small), c.B2, c.W2, c.Step, c.BC2, c.Eps,
		hp.Seed, device.MomentsStep(hp, nil))
}
