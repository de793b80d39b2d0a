package gpu

// microbench.go: the kernel micro-benchmarks of the GPU backend (llm.c
// dev/cuda/common.h benchmark_kernel): each memory-bound op of the step at
// the size of a GPT-2 124M step, fused and decomposed, timed with CUDA
// events around the op, L2 flushed before every run, median of the runs,
// and the achieved bandwidth against the device's measured copy bandwidth.
//
// Bytes are counted once per op as the least it must move: each input read
// once and each output written once (an accumulated gradient is both). The
// decomposed form is charged the same bytes, so its GB/s is the effective
// bandwidth of doing the same work in several passes. Each memory-bound op
// also has an informational "copy-same-bytes" row: a device-to-device copy
// of half its bytes (so the same bytes read plus written) timed the same
// way, the share of the large copy's bandwidth that a transfer of that size
// reaches with its launch, ramp-up and drain (a 20 µs op pays a few µs of
// those, which belong to it: the ceiling stays the 1 GiB copy's). Their
// stream rows add "cast-stream": cast_f32_bf16 over the op's bytes, a
// kernel that only moves them, in a graph like the op's "fused-stream":
// the share of the ceiling a launch of that size reaches at all.
//
// Timing: before each run the inputs an op overwrites are restored (device
// copies, untimed) and a buffer of at least four times the L2 is read
// (gradnorm_partial2 over it: a read-only pass, writing one float64 per 16
// KB), which evicts the op's data from L2 and leaves only clean lines
// there; the op is then charged the write-back of its own output lines
// still dirty in L2 when it ends (the extra time of the same read flush
// after it: timeKernel). (Until December 2026 the flush was a write of
// that buffer, which left the L2 full of dirty lines that the timed op then
// had to write back to DRAM beside its own traffic: up to the L2's size,
// about 50 MB on the H200, charged to ops of 75-180 MB, while its own last
// writes went uncharged. The "fused-dirty-l2" row of
// layernorm_fwd times the default kernel after that old flush, so one run
// shows the difference.) The flush, the start event, the op's
// launches and the end event are queued in one hop to the context's thread
// while the GPU is busy with the flush, so the clock starts with the op's
// work queued; the time is the GPU's from the first kernel to the last,
// plus any gaps in which the GPU waited for the host to queue the next
// launch (which eager, per-tensor execution pays as well; GradNorm's time
// also includes the download of its result, which the op waits for).

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// KernelOptions configure BenchKernels; the zero value is the standard run
// except for Layout, which the AdamW, grad-norm and cast benchmarks need.
type KernelOptions struct {
	Warmup      int            // untimed runs first (default 3)
	Repeats     int            // timed runs, of which the median is reported (default 20)
	CeilingGBps float64        // the bandwidth GB/s are compared with (default: the "copy" op's, measured in the same run, which runs it when Ops leave it out)
	Ops         []string       // the ops to run by name (default all: see KernelOps)
	Layout      *tensor.Layout // the parameter layout (GPT-2 124M's: gpt.Config.Layout)
}

// KernelOps are the micro-benchmarks BenchKernels runs, by name. "copy" is
// a device-to-device copy of 1 GiB, the ceiling the others are compared
// with when KernelOptions.CeilingGBps is zero. "launch" is one launch of a
// kernel with one element of work: the fixed cost every op's time includes
// (launch, ramp-up and drain as the events see them), which bounds the
// share of the ceiling an op of few bytes can reach.
var KernelOps = []string{
	"copy", "launch",
	"layernorm_fwd", "residual_layernorm_fwd", "layernorm_bwd", "gelu_bwd", "gelu_bias_bwd",
	"adamw", "gradnorm", "cast_f32_bf16", "crossentropy_fused_classifier",
	"attention_fwd", "attention_bwd",
	// microbench_gemm.go
	"gemm_peak",
	"gemm_qkv_fwd", "gemm_qkv_bwd", "gemm_attn_proj_fwd", "gemm_attn_proj_bwd",
	"gemm_mlp_fc_fwd", "gemm_mlp_fc_bwd", "gemm_mlp_proj_fwd", "gemm_mlp_proj_bwd",
	"gemm_attn_proj_dgrad", "gemm_attn_proj_wgrad", "gemm_attn_proj_wgrad_bgrad",
	"encoder_fwd", "encoder_bwd", "encoder_bwd_skewed", "encoder_bwd_small",
}

// copyBytes is the size of the "copy" micro-benchmark's buffers.
const copyBytes = 1 << 30

// KernelResult is one op in one form: the median time and bandwidth, and
// the spread of the runs. Its first five fields are pkg/bench's Kernel.
type KernelResult struct {
	Name        string  `json:"name"`
	Mode        string  `json:"mode"` // fused or decomposed
	Ms          float64 `json:"ms"`   // median
	GBps        float64 `json:"gbps"`
	CeilingGBps float64 `json:"ceiling_gbps"`
	// CeilingSource says where CeilingGBps comes from: "copy" (the 1 GiB
	// copy measured in the same run) or "given" (KernelOptions.CeilingGBps);
	// empty, with CeilingGBps and PctOfCeil 0, when the copy failed.
	CeilingSource string  `json:"ceiling_source,omitempty"`
	Bytes         int64   `json:"bytes"`
	MsMin         float64 `json:"ms_min"`
	MsMax         float64 `json:"ms_max"`
	// MsClean is the median time of the op alone from a clean L2, without
	// the write-back of its own lines left dirty at its end that Ms charges
	// (see timeKernel); 0 for the dirty-l2 rows.
	MsClean   float64 `json:"ms_clean,omitempty"`
	PctOfCeil float64 `json:"pct_of_ceiling"`
	Shape     string  `json:"shape"`
	FLOPs     int64   `json:"flops,omitempty"`  // the op's FLOPs where it is compute-bound (attention: causal)
	TFLOPs    float64 `json:"tflops,omitempty"` // FLOPs / median time
	// PctOfPeak is TFLOPs as a share of the "gemm_peak" row's (fused) of
	// the same run, where both were measured.
	PctOfPeak float64 `json:"pct_of_peak_flops,omitempty"`
}

// kernelCase is one op ready to run on a device: run queues it, reset
// restores what it overwrites (may be nil), free releases its buffers.
type kernelCase struct {
	shape string
	bytes int64
	flops int64 // 0 for the memory-bound ops
	run   func()
	reset func()
	free  func()
}

// BenchKernels runs the micro-benchmarks on fused and on plain (a device
// of the decomposed form on the same context) under the BF16 policy's
// dtypes and returns a result per op and form. The attention ops run a
// third form where the fused device has the flash kernels: "fused-cublas",
// the fused device with flash switched off (the cuBLAS score GEMMs and the
// fused softmax kernels), so the flash kernels are timed beside the path
// they replace, and "fused-v1" where the default is variant 2 (flashV2):
// the first flash variant, the fallback where variant 2 is not built,
// beside it (attention_fwd: flash_fwd_hs64 against flash_fwd2_hs64;
// attention_bwd: flash_bwd_dot + memset + flash_bwd_hs64 + flash_bwd_dq
// against flash_bwd2_dot + flash_bwd2kv_hs64 + flash_bwd2q_hs64), and
// attention_bwd "fused-store": AttentionBackwardStore, the default kernels
// writing dqkv without reading it; they report TFLOP/s with causal FLOPs (forward
// 2·B·NH·T²·hs, backward 2.5 times that).
func BenchKernels(fused, plain *Device, o KernelOptions) ([]KernelResult, error) {
	if fused == nil || plain == nil || !fused.Fused() || plain.Fused() {
		return nil, fmt.Errorf("gpu: bench: BenchKernels needs a fused and a decomposed GPU device")
	}
	if o.Warmup <= 0 {
		o.Warmup = 3
	}
	if o.Repeats <= 0 {
		o.Repeats = 20
	}
	ops := o.Ops
	if len(ops) == 0 {
		ops = KernelOps
	}
	source := "given"
	if o.CeilingGBps <= 0 {
		// the ceiling is measured in this run, on this GPU: never a
		// number carried over from another machine
		source = "copy"
		if !slices.Contains(ops, "copy") {
			ops = append([]string{"copy"}, ops...)
		}
	}
	ctx := fused.Context()
	flushBytes := uint64(max(4*ctx.Device.L2Bytes, 256<<20))
	flush, err := ctx.Pool().Alloc(2 * flushBytes) // two regions: timeKernel's flushes A1, and A2 and B
	if err != nil {
		return nil, fmt.Errorf("gpu: bench: L2 flush buffer: %w", err)
	}
	defer ctx.Pool().Free(flush)
	// defined contents (the read flush sums them); later runs only read it
	if err := fused.Stream().Memset8(flush, 0, 2*flushBytes); err != nil {
		return nil, fmt.Errorf("gpu: bench: L2 flush buffer: %w", err)
	}
	var out []KernelResult
	ceiling := o.CeilingGBps
	def, defEpi, defDNN := fused.flashV2, fused.dgeluEpi, fused.dnn.on // the flash variant, DGELU form and attention backend New chose
	restore := func(d *Device) {
		d.noFlash, d.flashV2, d.ltx.force, d.noTMA, d.noFixed = false, def, 0, false, false
		if d == fused {
			d.dgeluEpi, d.dnn.on = defEpi, defDNN
		}
	}
	defer restore(fused)
	type form struct {
		d       *Device
		mode    string
		noFlash bool
		flashV2 bool
		algo    int  // GEMM rows: run candidate algo-1 of every cuBLASLt matmul (0: the chosen one)
		epi     bool // gemm_mlp_proj_bwd: MatmulBackwardGELU's epilogue form (Device.dgeluEpi)
		cudnn   bool // attention rows: cuDNN's fused attention (cudnn.go); the other fused rows run the own kernels
		dirty   bool // the old write flush (L2 left dirty) before each run
		noTMA   bool // the kernel a TMA kernel replaces (fused-l3, fused-generic; Device.noTMA)
		noFixed bool // the layernorm kernels of run-time C (fused-generic, fused-tma; Device.noFixed)
	}
	for _, name := range ops {
		forms := []form{{d: fused, mode: "fused", flashV2: def, epi: defEpi, cudnn: defDNN}, {d: plain, mode: "decomposed"}}
		switch {
		case name == "copy" || name == "launch" || name == "gemm_peak" || name == "gelu_bias_bwd":
			forms = forms[:1] // one form
		case strings.HasPrefix(name, "gemm_attn_proj"):
			// the weak shape: every further candidate (microbench_gemm.go)
			for k := 2; k <= cuda.LtMaxCandidates; k++ {
				forms = append(forms, form{d: fused, mode: fmt.Sprintf("fused-algo%d", k), flashV2: def, algo: k, epi: defEpi, cudnn: defDNN})
			}
		case name == "layernorm_fwd" || name == "residual_layernorm_fwd" || name == "layernorm_bwd":
			// fused: the fixed-width kernel of C = 768 (lnFixed) where
			// built; fused-generic: the kernel of run-time C it replaces
			// (layernorm_backward_rf32 for the backward); fused-tma: the
			// backward's TMA kernel, the default before the fixed-width one
			generic := form{d: fused, mode: "fused-generic", flashV2: def, epi: defEpi, cudnn: defDNN, noFixed: true, noTMA: true}
			forms = []form{forms[0], generic, forms[1]}
			if name == "layernorm_bwd" && fused.tmaSmem[kernelKey{kernLNBackTMA, tensor.BF16}] > 0 {
				forms = slices.Insert(forms, 1, form{d: fused, mode: "fused-tma", flashV2: def, epi: defEpi, cudnn: defDNN, noFixed: true})
			}
			if name == "layernorm_fwd" {
				old := forms[0]
				old.dirty, old.mode = true, "fused-dirty-l2"
				forms = append(forms, old)
			}
		case name == "crossentropy_fused_classifier" && len(fused.tmaSmem) > 0:
			// the TMA kernel (fused) beside the one it replaces
			forms = []form{forms[0], {d: fused, mode: "fused-l3", flashV2: def, epi: defEpi, cudnn: defDNN, noTMA: true}, forms[1]}
		case name == "gemm_mlp_proj_bwd":
			// MatmulBackwardGELU's other fused form beside the default
			other := "fused-epilogue"
			if defEpi {
				other = "fused-kernel"
			}
			forms = []form{forms[0], {d: fused, mode: other, flashV2: def, epi: !defEpi, cudnn: defDNN}, forms[1]}
		case strings.HasPrefix(name, "attention_") && fused.flash(tensor.BF16, 64):
			// fused: the own flash kernels (variant 2 where built);
			// fused-v1: the first variant beside them; fused-cudnn:
			// cuDNN's fused attention where it loaded.
			forms = []form{{d: fused, mode: "fused", flashV2: def, epi: defEpi}, {d: fused, mode: "fused-cublas", noFlash: true, epi: defEpi}, {d: plain, mode: "decomposed"}}
			if def {
				forms = append(forms[:1], append([]form{{d: fused, mode: "fused-v1", epi: defEpi}}, forms[1:]...)...)
			}
			if name == "attention_bwd" {
				// AttentionBackwardStore: the default kernels writing dqkv
				// without reading it, no zeroing before (the model's form)
				forms = append(forms[:1], append([]form{{d: fused, mode: "fused-store", flashV2: def, epi: defEpi}}, forms[1:]...)...)
			}
			if fused.dnn.h != nil && fused.dnn.off == "" {
				// cuDNN's fused attention (the store form for backward,
				// the only backward it runs)
				forms = append(forms[:1], append([]form{{d: fused, mode: "fused-cudnn", flashV2: def, epi: defEpi, cudnn: true}}, forms[1:]...)...)
			}
		}
		var opBytes int64 // the op's bytes, for its copy-same-bytes row
		for _, f := range forms {
			f.d.noFlash, f.d.flashV2, f.d.ltx.force, f.d.noTMA, f.d.noFixed = f.noFlash, f.flashV2, f.algo, f.noTMA, f.noFixed
			if f.d == fused {
				f.d.dgeluEpi, f.d.dnn.on = f.epi, f.cudnn
			}
			caseName := name
			if f.mode == "fused-store" || (f.mode == "fused-cudnn" && name == "attention_bwd") {
				caseName += "_store"
			}
			kc, err := newKernelCase(caseName, f.d, o.Layout)
			if errors.Is(err, errNoCandidate) {
				restore(f.d)
				continue
			}
			if err != nil {
				restore(f.d)
				return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (%s): %w", name, f.mode, err)
			}
			r, err := timeKernel(f.d, kc, flush, flushBytes, f.dirty, o)
			restore(f.d)
			kc.free()
			if err != nil {
				return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (%s): %w", name, f.mode, err)
			}
			r.Name, r.Mode = name, f.mode
			r.GBps = float64(kc.bytes) / (r.Ms * 1e6)
			if kc.flops > 0 {
				r.FLOPs, r.TFLOPs = kc.flops, float64(kc.flops)/(r.Ms*1e9)
			}
			if name == "copy" && ceiling <= 0 {
				ceiling = r.GBps
			}
			if kc.flops == 0 && f.mode == "fused" {
				opBytes = kc.bytes
			}
			out = append(out, r)
		}
		if sameBytesCopy[name] && opBytes > 0 {
			// The op and the copy of its bytes as streams (streamCase).
			k := streamLaunches(opBytes)
			for _, st := range []struct {
				mode  string
				mk    func() (*kernelCase, error)
				graph bool
			}{
				{"fused-stream", func() (*kernelCase, error) { return newKernelCase(name, fused, o.Layout) }, true},
				// the same stream with every launch a plain one: what
				// programmatic dependent launch (PDLEnv) gains, in one run
				{"fused-stream-nopdl", func() (*kernelCase, error) { return newKernelCase(name, fused, o.Layout) }, true},
				// not in a graph: a captured device-to-device copy becomes a
				// memcpy node, which the H200 ran at 2.5-2.7 TB/s (the copy
				// engines?) where the same copies queued on the stream ran at
				// the 1 GiB copy's speed
				{"copy-stream", func() (*kernelCase, error) { return newCopyCase(fused, opBytes) }, false},
				// a kernel that moves the op's bytes and does nothing else
				// (cast_f32_bf16: read two thirds, write one), in the same
				// kind of graph as fused-stream: what a launch of this size
				// reaches on this GPU without the copy engine's overheads
				{"cast-stream", func() (*kernelCase, error) { return newCastCase(fused, opBytes) }, true},
			} {
				if st.mode == "fused-stream-nopdl" && len(fused.pdl) == 0 {
					continue // no PDL on this device: the fused-stream row is this one
				}
				pdl := fused.pdl
				if st.mode == "fused-stream-nopdl" {
					fused.pdl = map[kernelKey]bool{} // for the capture: the graph keeps each launch's attributes
				}
				kc, err := streamCase(fused, k, st.graph, st.mk)
				fused.pdl = pdl
				if err != nil {
					restore(fused)
					return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (%s): %w", name, st.mode, err)
				}
				r, err := timeKernel(fused, kc, flush, flushBytes, false, o)
				restore(fused)
				kc.free()
				if err != nil {
					return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (%s): %w", name, st.mode, err)
				}
				r.Name, r.Mode = name, st.mode
				per := float64(k)
				r.Ms, r.MsMin, r.MsMax, r.MsClean, r.Bytes = r.Ms/per, r.MsMin/per, r.MsMax/per, r.MsClean/per, kc.bytes/int64(k)
				r.GBps = float64(r.Bytes) / (r.Ms * 1e6)
				out = append(out, r)
			}
			kc, err := newCopyCase(fused, opBytes)
			if err != nil {
				return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (copy-same-bytes): %w", name, err)
			}
			r, err := timeKernel(fused, kc, flush, flushBytes, false, o)
			kc.free()
			if err != nil {
				return finish(out, ceiling, source), fmt.Errorf("gpu: bench: %s (copy-same-bytes): %w", name, err)
			}
			r.Name, r.Mode = name, "copy-same-bytes"
			r.GBps = float64(kc.bytes) / (r.Ms * 1e6)
			out = append(out, r)
		}
	}
	return finish(out, ceiling, source), nil
}

// streamBytes is what the launches of a stream row move together: ten
// L2s of the H200, so that no launch finds another's data in L2.
const streamBytes = 512 << 20

// streamLaunches is how many launches of an op of bytes bytes a stream row
// runs: enough to move streamBytes, 2 to 8.
func streamLaunches(bytes int64) int {
	return int(min(max((streamBytes+bytes-1)/bytes, 2), 8))
}

// streamCase is k cases of one op, each on buffers of its own, captured
// as one CUDA graph and timed as one op: the op as the step meets it, a
// node of a graph among kernels on other data, where a launch's ramp-up
// and drain sit beside its neighbours' and the write-back of its dirty
// lines is paid during the next one, rather than alone after an idle GPU.
// The "fused-stream" and "copy-stream" rows report its time and bytes per
// launch (the write-back of the last launch's lines still charged); the
// single-launch rows stay beside them, so one run shows both. Without
// graph, or where the capture fails, the k launches are queued one by one
// (the shape says so).
func streamCase(d *Device, k int, graph bool, mk func() (*kernelCase, error)) (*kernelCase, error) {
	cs := make([]*kernelCase, 0, k)
	var g device.Graph
	all := &kernelCase{free: func() {
		if g != nil {
			if err := g.Close(); err != nil {
				d.fail(err)
			}
		}
		for _, c := range cs {
			c.free()
		}
	}}
	for range k {
		c, err := mk()
		if err != nil {
			all.free()
			return nil, err
		}
		cs = append(cs, c)
		all.bytes += c.bytes
	}
	each := func() {
		for _, c := range cs {
			c.run()
		}
	}
	// One plain run first: what an op sets up on its first call (a chunk
	// table upload, a GEMM algorithm choice) cannot happen in a capture.
	each()
	err := d.Sync()
	if err == nil && graph {
		g, err = d.Capture(func() error { each(); return nil })
	}
	how := "captured as one CUDA graph"
	switch {
	case err != nil:
		g, how = nil, fmt.Sprintf("queued one by one (no graph: %v)", err)
	case !graph:
		how = "queued one by one"
	}
	all.shape = fmt.Sprintf("%s; %d launches back to back, each on its own buffers, %s", cs[0].shape, k, how)
	all.run = each
	if g != nil {
		all.run = func() {
			if err := g.Launch(); err != nil {
				d.fail(err)
			}
		}
	}
	if cs[0].reset != nil {
		all.reset = func() {
			for _, c := range cs {
				c.reset()
			}
		}
	}
	return all, nil
}

// sameBytesCopy are the memory-bound ops that get a copy-same-bytes row.
var sameBytesCopy = map[string]bool{
	"layernorm_fwd": true, "residual_layernorm_fwd": true, "layernorm_bwd": true, "gelu_bwd": true, "gelu_bias_bwd": true,
	"adamw": true, "gradnorm": true, "cast_f32_bf16": true, "crossentropy_fused_classifier": true,
}

// newCopyCase is a device-to-device copy of bytes/2 bytes (bytes moved:
// read plus written), rounded down to 16 bytes.
func newCopyCase(d *Device, bytes int64) (*kernelCase, error) {
	half := bytes / 2 &^ 15
	a := &allocs{d: d, rng: tensor.NewRNG(uint64(time.Now().UnixNano()))}
	n := int(half / 4)
	src, dst := a.rand(tensor.F32, 0, 1, n), a.zeros(tensor.F32, n)
	kc := &kernelCase{shape: fmt.Sprintf("%.1f MB device-to-device, read and written", float64(half)/1e6), bytes: 2 * half, free: a.free}
	if err := d.Sync(); err != nil || a.err != nil {
		a.free()
		if err == nil {
			err = a.err
		}
		return nil, err
	}
	kc.run = func() {
		if err := d.Stream().CopyDtoD(cuda.DevicePtr(dst.Dev), cuda.DevicePtr(src.Dev), uint64(half)); err != nil {
			d.fail(fmt.Errorf("gpu: bench: copy: %w", err))
		}
	}
	return kc, nil
}

// newCastCase is cast_f32_bf16 over bytes/6 elements: bytes moved, two
// thirds read (fp32) and one third written (bf16), as layernorm forward
// moves its rows.
func newCastCase(d *Device, bytes int64) (*kernelCase, error) {
	n := int(bytes / 6 &^ 3)
	a := &allocs{d: d, rng: tensor.NewRNG(uint64(time.Now().UnixNano()))}
	src, dst := a.rand(tensor.F32, 0, 1, n), a.zeros(tensor.BF16, n)
	kc := &kernelCase{shape: fmt.Sprintf("cast_f32_bf16 of %d elements (%.1f MB read, %.1f MB written)", n, float64(4*n)/1e6, float64(2*n)/1e6), bytes: 6 * int64(n), free: a.free}
	if err := d.Sync(); err != nil || a.err != nil {
		a.free()
		if err == nil {
			err = a.err
		}
		return nil, err
	}
	kc.run = func() { d.Cast(dst, src) }
	return kc, nil
}

// finish sets each result's ceiling, given or measured (source), and its
// share of it (none, 0, when the ceiling is unknown: the copy failed), and
// where the run measured "gemm_peak" each compute-bound row's share of
// that peak.
func finish(rs []KernelResult, ceiling float64, source string) []KernelResult {
	if ceiling <= 0 {
		ceiling, source = 0, ""
	}
	var peak float64
	for _, r := range rs {
		if r.Name == "gemm_peak" && r.Mode == "fused" {
			peak = r.TFLOPs
		}
	}
	for i := range rs {
		rs[i].CeilingGBps, rs[i].CeilingSource = ceiling, source
		if ceiling > 0 {
			rs[i].PctOfCeil = 100 * rs[i].GBps / ceiling
		}
		if peak > 0 && rs[i].TFLOPs > 0 {
			rs[i].PctOfPeak = 100 * rs[i].TFLOPs / peak
		}
	}
	return rs
}

// timeKernel runs kc warmup+repeats times and returns the median. Each
// run starts from an L2 holding only clean lines (readFlush, twice: the
// first, of the buffer's first region, writes back what the reset left
// dirty; the second reads the other region, as the flush after the op
// does, so that neither finds its region in L2) and is charged its own
// writes: the op's time from the start event to the end event, plus what
// the read flush after it (B) takes longer than the same flush from a clean
// L2 (A2, timed just before the op): the write-back of the op's output
// lines still dirty in L2 when it ended, which a steady stream of ops pays
// in the next one. (Timing the op alone would leave up to an L2 of its
// writes uncharged; flushing by a write, the old way and the dirty form
// here, charges it up to an L2 of someone else's.) r.MsClean is the median
// of the op alone.
//
//	[reset] flush A1 | e0 | flush A2 | start | op | end | flush B | e3
//	ms = (end - start) + ((e3 - end) - (start - e0))
func timeKernel(d *Device, kc *kernelCase, flush cuda.DevicePtr, flushBytes uint64, dirty bool, o KernelOptions) (KernelResult, error) {
	ctx, s := d.Context(), d.Stream()
	var evs [4]*cuda.Event // e0, start, end, e3
	for k := range evs {
		e, err := ctx.NewEvent()
		if err != nil {
			return KernelResult{}, err
		}
		defer e.Destroy()
		evs[k] = e
	}
	e0, start, end, e3 := evs[0], evs[1], evs[2], evs[3]
	var ms, clean []float64
	for i := range o.Warmup + o.Repeats {
		if kc.reset != nil {
			kc.reset()
		}
		// The flushes, the events and the op's launches are queued in one
		// hop to the context's thread, while the GPU is still busy with the
		// flush: the clock starts with the op's work already queued.
		err := ctx.Do(func() error {
			if dirty {
				if err := s.Memset8(flush, uint8(i), flushBytes); err != nil {
					return err
				}
			} else {
				if !d.readFlush(flush, flushBytes) {
					return fmt.Errorf("gpu: bench: L2 flush: %w", d.Sync())
				}
				if err := e0.Record(s); err != nil {
					return err
				}
				d.readFlush(flush+cuda.DevicePtr(flushBytes), flushBytes)
			}
			if err := start.Record(s); err != nil {
				return err
			}
			kc.run()
			if err := end.Record(s); err != nil {
				return err
			}
			if !dirty {
				d.readFlush(flush+cuda.DevicePtr(flushBytes), flushBytes)
				return e3.Record(s)
			}
			return nil
		})
		if err != nil {
			return KernelResult{}, err
		}
		if err := d.Sync(); err != nil {
			return KernelResult{}, err
		}
		el, err := cuda.Elapsed(start, end)
		if err != nil {
			return KernelResult{}, err
		}
		op := float64(el) / float64(time.Millisecond)
		charged := op
		if !dirty {
			a, err := cuda.Elapsed(e0, start)
			if err != nil {
				return KernelResult{}, err
			}
			b, err := cuda.Elapsed(end, e3)
			if err != nil {
				return KernelResult{}, err
			}
			charged += float64(b-a) / float64(time.Millisecond) // not clipped at 0: the median stays unbiased where there is nothing to write back
		}
		if i >= o.Warmup {
			ms, clean = append(ms, charged), append(clean, op)
		}
	}
	r := KernelResult{Bytes: kc.bytes, Shape: kc.shape}
	r.Ms, r.MsMin, r.MsMax = median(ms)
	if !dirty {
		r.MsClean, _, _ = median(clean)
	}
	return r, nil
}

// median sorts xs and returns its median, minimum and maximum.
func median(xs []float64) (med, lo, hi float64) {
	sort.Float64s(xs)
	med = xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return med, xs[0], xs[len(xs)-1]
}

// readFlush queues a read of the flush buffer (bytes, 16-byte aligned):
// gradnorm_partial2's sums of squares over it into a scratch of one
// float64 per chunk, which the flush never reads back.
func (d *Device) readFlush(flush cuda.DevicePtr, bytes uint64) bool {
	n := int(bytes / 4)
	np := (n + gnChunk - 1) / gnChunk
	part := d.buf("bench.flush", np*8)
	if part == 0 {
		return false
	}
	warps := gnBlock / 32
	nb := max(1, min(d.residentBlocks("gradnorm_partial2", tensor.F32, gnBlock, 0)*d.sms(), (np+warps-1)/warps))
	return d.run("gradnorm_partial2", tensor.F32, cuda.D1(nb), cuda.D1(gnBlock), 0, part, flush, int64(n), 1)
}

// allocs allocates device tensors and fills them with fresh random values
// (never zeros); free releases them all.
type allocs struct {
	d   *Device
	rng *tensor.RNG
	ts  []*tensor.Tensor
	err error
}

// randTile is the most fresh random values rand draws on the host; larger
// tensors repeat the tile (device copies), which changes no timing.
const randTile = 1 << 22

// rand returns a device tensor of normal values mean + std·N(0,1) in dt.
func (a *allocs) rand(dt tensor.DType, mean, std float64, shape ...int) *tensor.Tensor {
	t := a.zeros(dt, shape...)
	if t == nil {
		return nil
	}
	n := t.Numel()
	k := min(n, randTile)
	h := tensor.New(dt, k)
	v := make([]float32, k)
	for i := range v {
		v[i] = float32(mean + std*a.rng.Norm())
	}
	if err := h.SetF32(v); err != nil {
		a.err = err
		return t
	}
	a.d.Upload(t.MustView(0, k), h)
	es := uint64(dt.Size())
	for off := k; off < n && a.err == nil; off += k {
		m := min(k, n-off)
		a.err = a.d.Stream().CopyDtoD(cuda.DevicePtr(t.Dev)+cuda.DevicePtr(uint64(off)*es), cuda.DevicePtr(t.Dev), uint64(m)*es)
	}
	return t
}

// zeros returns a zeroed device tensor (for outputs only).
func (a *allocs) zeros(dt tensor.DType, shape ...int) *tensor.Tensor {
	if a.err != nil {
		return nil
	}
	t, err := a.d.Alloc(dt, shape...)
	if err != nil {
		a.err = err
		return nil
	}
	a.ts = append(a.ts, t)
	return t
}

func (a *allocs) free() {
	for _, t := range a.ts {
		a.d.Free(t)
	}
}

// newKernelCase allocates the inputs of op name on d at GPT-2 124M step
// sizes (B 16, T 1024: N = 16384 rows of C = 768) under the BF16 policy.
func newKernelCase(name string, d *Device, layout *tensor.Layout) (*kernelCase, error) {
	const N, C, V = 16 * 1024, 768, 50304
	a := &allocs{d: d, rng: tensor.NewRNG(uint64(time.Now().UnixNano()))}
	bf, f32 := tensor.BF16, tensor.F32
	nc := int64(N) * C
	kc := &kernelCase{shape: fmt.Sprintf("N=%d C=%d bf16 (residual stream f32)", N, C), free: a.free}
	switch name {
	case "copy":
		n := copyBytes / 4
		src, dst := a.rand(f32, 0, 1, n), a.zeros(f32, n)
		kc.shape = fmt.Sprintf("%d MiB device-to-device", copyBytes>>20)
		kc.bytes = 2 * copyBytes
		kc.run = func() {
			if err := d.Stream().CopyDtoD(cuda.DevicePtr(dst.Dev), cuda.DevicePtr(src.Dev), copyBytes); err != nil {
				d.fail(fmt.Errorf("gpu: bench: copy: %w", err))
			}
		}
	case "launch":
		out, x, y := a.zeros(f32, 4), a.rand(f32, 0, 1, 4), a.rand(bf, 0, 1, 4)
		kc.shape = "add of 4 elements: one block"
		kc.bytes = 4 * (4 + 4 + 2)
		kc.run = func() { d.Add(out, x, y, 4) }
	case "layernorm_fwd":
		out, mean, rstd := a.zeros(bf, N, C), a.zeros(f32, N), a.zeros(f32, N)
		inp, w, b := a.rand(f32, 0.5, 2, N, C), a.rand(bf, 1, 0.2, C), a.rand(bf, 0, 0.1, C)
		kc.bytes = nc*(4+2) + 2*C*2 + 2*N*4
		kc.run = func() { d.LayerNorm(out, mean, rstd, inp, w, b, N, C) }
	case "residual_layernorm_fwd":
		res, out, mean, rstd := a.zeros(f32, N, C), a.zeros(bf, N, C), a.zeros(f32, N), a.zeros(f32, N)
		x, y, w, b := a.rand(f32, 0.5, 2, N, C), a.rand(bf, 0, 1, N, C), a.rand(bf, 1, 0.2, C), a.rand(bf, 0, 0.1, C)
		kc.bytes = nc*(4+2+4+2) + 2*C*2 + 2*N*4
		kc.run = func() { d.ResidualLayerNorm(res, out, mean, rstd, x, y, w, b, N, C) }
	case "layernorm_bwd":
		dinp, dw, db := a.rand(f32, 0, 1, N, C), a.rand(f32, 0, 1, C), a.rand(f32, 0, 1, C)
		dout, inp, w := a.rand(bf, 0, 1, N, C), a.rand(f32, 0.5, 2, N, C), a.rand(bf, 1, 0.2, C)
		mean, rstd := a.rand(f32, 0.5, 0.01, N), a.rand(f32, 0.5, 0.01, N)
		kc.bytes = nc*(2+4+4+4) + C*2 + 2*N*4 + 2*2*C*4
		kc.run = func() { d.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C) }
	case "gelu_bwd":
		n := N * 4 * C
		dinp, inp, dout := a.zeros(bf, n), a.rand(bf, 0, 2, n), a.rand(bf, 0, 1, n)
		kc.shape = fmt.Sprintf("n=%d (N=%d × 4C) bf16", n, N)
		kc.bytes = int64(n) * 3 * 2
		kc.run = func() { d.GELUBackward(dinp, inp, dout, n) }
	case "gelu_bias_bwd":
		// gelu_bias_backward alone, as MatmulBackwardGELU's kernel form runs
		// it after the dgrad GEMM: dpre (N, 4C) in place, the fc bias
		// gradient from per-chunk sums (matmul_bias_grad over them)
		n4 := 4 * C
		dpre, pristine, pre, dpb := a.zeros(bf, N, n4), a.rand(bf, 0, 1, N, n4), a.rand(bf, 0, 2, N, n4), a.rand(f32, 0, 1, n4)
		rows, chunks := geluBiasChunks(N, blocks(n4, 32*8), d.residentBlocks("gelu_bias_backward", bf, geluBlock, 0)*d.sms())
		kc.shape = fmt.Sprintf("N=%d × 4C=%d bf16 in place, fp32 bias gradient (%d chunks of %d rows)", N, n4, chunks, rows)
		kc.bytes = int64(N)*int64(n4)*2*3 + int64(chunks)*int64(n4)*4*2 + int64(n4)*4*2
		kc.reset = func() {
			if err := d.Stream().CopyDtoD(cuda.DevicePtr(dpre.Dev), cuda.DevicePtr(pristine.Dev), uint64(dpre.Bytes())); err != nil {
				a.err = err
			}
		}
		kc.run = func() { d.geluBiasBackward(dpre, pre, dpb, N, n4) }
	case "adamw", "gradnorm", "cast_f32_bf16":
		if layout == nil {
			return nil, fmt.Errorf("gpu: bench: %s needs KernelOptions.Layout", name)
		}
		P := layout.Total
		kc.shape = fmt.Sprintf("layout of %d parameters in %d tensors", P, len(layout.Segments))
		grads := a.rand(f32, 0, 1e-2, P)
		switch name {
		case "adamw":
			master, work := a.rand(f32, 0, 0.05, P), a.zeros(bf, P)
			m, v := a.rand(f32, 0, 1e-3, P), a.rand(f32, 1e-6, 1e-7, P)
			kc.shape += ", bf16 working copy"
			kc.bytes = int64(P) * (4*4 + 3*4 + 2)
			step := 0
			kc.run = func() {
				step++
				d.AdamWStep(master, work, grads, m, v, layout, device.AdamW{
					LR: 6e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step, GradScale: 1,
				})
			}
		case "gradnorm":
			kc.bytes = int64(P) * 4
			kc.run = func() { d.GradNorm(grads, 1) }
		case "cast_f32_bf16":
			work := a.zeros(bf, P)
			kc.bytes = int64(P) * (4 + 2)
			kc.run = func() { d.Cast(work, grads) }
		}
	case "crossentropy_fused_classifier":
		logits, pristine := a.zeros(bf, N, V), a.rand(bf, 0, 2, N, V)
		losses := a.zeros(f32, N)
		tok := tensor.New(tensor.I32, N)
		for i := range tok.I32() {
			tok.I32()[i] = int32(a.rng.Intn(V))
		}
		targets := a.zeros(tensor.I32, N)
		if a.err == nil {
			d.Upload(targets, tok)
		}
		kc.shape = fmt.Sprintf("B=16 T=1024 V=%d bf16 logits, gradient written over them", V)
		kc.bytes = int64(N)*int64(V)*2*2 + 2*N*4
		kc.reset = func() {
			if err := d.Stream().CopyDtoD(cuda.DevicePtr(logits.Dev), cuda.DevicePtr(pristine.Dev), uint64(logits.Bytes())); err != nil {
				a.err = err
			}
		}
		kc.run = func() { d.CrossEntropy(losses, logits, targets, N, V, 1/float32(N)) }
	case "attention_fwd", "attention_bwd", "attention_bwd_store":
		// GPT-2 124M's attention: B 16, NH 12, T 1024, hs 64, bf16.
		const B, T, NH = 16, 1024, 12
		st := d.AttentionState(bf, B, T, C, NH)
		qkv, out, att := a.rand(bf, 0, 1, B, T, 3*C), a.zeros(bf, B, T, C), a.zeros(st.DType, st.Shape...)
		path := "cuBLAS scores + softmax kernels, probabilities saved"
		if len(st.Shape) == 3 {
			path = "flash kernels, log-sum-exp saved"
			if d.dnn.on {
				path = "cuDNN fused attention (" + d.AttentionBackend() + "), log-sum-exp saved"
			}
		}
		kc.shape = fmt.Sprintf("B=%d NH=%d T=%d hs=%d bf16 causal (%s)", B, NH, T, C/NH, path)
		fwd := int64(2) * B * NH * T * T * int64(C/NH)
		if name == "attention_fwd" {
			kc.flops = fwd
			kc.bytes = int64(B)*T*(3*C+C)*2 + int64(st.Numel())*int64(st.DType.Size())
			kc.run = func() { d.Attention(out, att, qkv, B, T, C, NH) }
			break
		}
		dout, dqkv := a.rand(bf, 0, 1, B, T, C), a.zeros(bf, B, T, 3*C)
		if a.err == nil {
			d.Attention(out, att, qkv, B, T, C, NH) // the state backward reads
		}
		kc.flops = fwd * 5 / 2
		kc.bytes = int64(B)*T*(3*C+C+C+2*3*C)*2 + int64(st.Numel())*int64(st.DType.Size())
		if name == "attention_bwd_store" {
			// dqkv written only (the same work: bytes as counted above)
			kc.shape += ", dqkv stored"
			kc.run = func() { d.AttentionBackwardStore(dqkv, dout, qkv, out, att, B, T, C, NH) }
			break
		}
		kc.reset = func() { d.Zero(dqkv) }
		kc.run = func() { d.AttentionBackward(dqkv, dout, qkv, out, att, B, T, C, NH) }
	case "encoder_fwd", "encoder_bwd", "encoder_bwd_skewed", "encoder_bwd_small":
		// GPT-2 124M's embedding (B 16, T 1024, V 50304, C 768), or the
		// small preset's (B 32, T 256, V 256, C 256). Tokens: one id in
		// every `hot` (a frequent word, about 5% of GPT-2's tokens, or
		// byte, up to a fifth of UTF-8 text), the rest uniform; skewed:
		// bytes of text in GPT-2's vocabulary (what the bench trains on),
		// Zipf s=1 over the ids below 256 (the most frequent 16%, as a
		// space in English text).
		B, T, C, V, hot := 16, 1024, C, V, 20
		if name == "encoder_bwd_small" {
			B, T, C, V, hot = 32, 256, 256, 256, 5
		}
		n := B * T
		tok := tensor.New(tensor.I32, n)
		seen := map[int32]bool{}
		var zipf [256]float64 // cumulative weights 1/(r+1)
		for r := range zipf {
			zipf[r] = 1 / float64(r+1)
			if r > 0 {
				zipf[r] += zipf[r-1]
			}
		}
		for i := range tok.I32() {
			v := int32(a.rng.Intn(V))
			switch {
			case name == "encoder_bwd_skewed":
				r, _ := slices.BinarySearch(zipf[:], a.rng.Float64()*zipf[255])
				v = int32(min(r, 255)*37+11) % 256 // the ranks scattered over the byte ids
			case i%hot == 0:
				v = 1
			}
			tok.I32()[i], seen[v] = v, true
		}
		tokens := a.zeros(tensor.I32, n)
		if a.err == nil {
			d.Upload(tokens, tok)
		}
		kc.shape = fmt.Sprintf("B=%d T=%d C=%d V=%d, %d distinct ids", B, T, C, V, len(seen))
		bt, tc := int64(n), int64(T)*int64(C)
		if name == "encoder_fwd" {
			out, wte, wpe := a.zeros(f32, n, C), a.rand(bf, 0, 1, V, C), a.rand(bf, 0, 1, T, C)
			kc.shape += ", bf16 tables"
			kc.bytes = bt*4 + bt*int64(C)*(2+4) + tc*2 // the rows gathered, out, wpe once
			kc.run = func() { d.Encoder(out, wte, wpe, tokens, B, T, C) }
			break
		}
		dwte, dwpe, dout := a.rand(f32, 0, 1, V, C), a.rand(f32, 0, 1, T, C), a.rand(f32, 0, 1, n, C)
		kc.shape += ", f32 dout and gradients (the step's residual stream)"
		// What the op must move, once: the tokens, dout, the rows of the
		// ids seen and dwpe read and written. Not counted: the sort's
		// traffic (16 bytes a position a pass), the segments' partial rows,
		// and the position sums' second read of dout.
		kc.bytes = bt*4 + bt*int64(C)*4 + 2*int64(len(seen))*int64(C)*4 + 2*tc*4
		kc.run = func() { d.EncoderBackward(dwte, dwpe, dout, tokens, B, T, C) }
	default:
		if strings.HasPrefix(name, "gemm_") {
			a.free()
			return newGEMMCase(name, d)
		}
		return nil, fmt.Errorf("gpu: bench: no kernel micro-benchmark %q (have %v)", name, KernelOps)
	}
	if err := d.Sync(); err != nil || a.err != nil {
		a.free()
		if err == nil {
			err = a.err
		}
		return nil, fmt.Errorf("gpu: bench: %s: %w", name, err)
	}
	return kc, nil
}

// KernelTable formats results as a fixed-width table: per op the fused and
// decomposed times, their GB/s and share of the ceiling, and the speed-up
// (each other form's ms over the fused form's: above 1 where the fused form
// is the faster).
func KernelTable(rs []KernelResult) string {
	s := fmt.Sprintf("%-30s %-12s %10s %10s %8s %8s %8s %7s\n", "op", "form", "ms", "GB/s", "% ceil", "speed-up", "TFLOP/s", "% peak")
	fusedMs := map[string]float64{}
	for _, r := range rs {
		if r.Mode == "fused" {
			fusedMs[r.Name] = r.Ms
		}
	}
	for _, r := range rs {
		up := ""
		if f := fusedMs[r.Name]; r.Mode == "decomposed" && f > 0 {
			up = fmt.Sprintf("%.2fx", r.Ms/f)
		}
		if f := fusedMs[r.Name]; (strings.HasPrefix(r.Mode, "fused-") || strings.HasPrefix(r.Mode, "copy-")) && f > 0 {
			up = fmt.Sprintf("%.2fx", r.Ms/f)
		}
		tf, pk := "", ""
		if r.TFLOPs > 0 {
			tf = fmt.Sprintf("%.1f", r.TFLOPs)
		}
		if r.PctOfPeak > 0 {
			pk = fmt.Sprintf("%.1f%%", r.PctOfPeak)
		}
		s += fmt.Sprintf("%-30s %-12s %10.4f %10.0f %7.1f%% %8s %8s %7s\n", r.Name, r.Mode, r.Ms, r.GBps, r.PctOfCeil, up, tf, pk)
	}
	return s
}
