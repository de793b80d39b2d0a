package gpu

// matmul.go: the linear layers, Matmul and MatmulBackward, on cuBLASLt and
// cuBLAS with fp32 accumulation.
//
// Row-major products are run as cuBLAS's column-major ones on the same
// memory: a row-major X (r,c) is the column-major Xᵀ (c,r) with ld c. So
//
//	out (N,OC) = inp (N,C)·W (OC,C)ᵀ       is  TransA, M=OC, N=N, K=C, A=W (ld C), B=inp (ld C), D=out (ld OC)
//	dinp (N,C) += dout (N,OC)·W (OC,C)     is  M=C, N=N, K=OC, A=W (ld C), B=dout (ld OC), D=dinp (ld C), beta 1
//	dW (OC,C) += doutᵀ (OC,N)·inp (N,C)    is  TransB, M=C, N=OC, K=N, A=inp (ld C), B=dout (ld OC), D=dW (ld C), beta 1
//
// Fused forward over at most rowsMax rows (a decode step's): matmul.cu's
// matmul_rows. Otherwise, and where it does not apply: one cublasLtMatmul with the bias (EpilogueBias) or, for
// 16-bit outputs, the bias+GELU epilogue (EpilogueGELUAuxBias: out =
// gelu(pre), pre stored as the aux matrix), the GELU computed on the fp32
// pre-activation before rounding, as the CPU reference's fused epilogue
// does; fp32 outputs take the bias epilogue into pre and gelu.go's one-pass
// geluForward (cuBLASLt's GELU approximation is not fp32-accurate). Decomposed forward:
// a plain GEMM, then gelu.go's biasAdd, then its geluForwardDecomposed (the
// eager-PyTorch sequence of elementwise passes).
//
// Backward: the dgrad GEMM (beta 1 into dinp), the wgrad GEMM (beta 1
// into dweight, fp32 or 16-bit; cuBLAS rounds α·A·B to a 16-bit output type
// before adding β·C, so accumulating into a non-zero 16-bit gradient rounds
// twice; the model's are zeroed first). Fused, both run on cuBLASLt (plain
// products through ltGemm, so that every GEMM's algorithm is chosen once
// and cached alike), the wgrad with the bias-gradient epilogue
// (EpilogueBGradB: Σ over the N rows of dout, or of its 16-bit copy where
// dout is fp32, written into an fp32 scratch vector) and one small kernel
// adds that into dbias (backward ops accumulate; the epilogue overwrites).
// MatmulBackwardGELU (matmul_gelu.go) runs the dgrad GEMM with the
// DGELU_BGRAD epilogue instead. Decomposed, cuBLAS runs the GEMMs and
// dbias comes from matmul.cu's column-sum kernel. A configuration cuBLASLt
// has no algorithm for (an odd leading dimension with an aux matrix, say)
// runs the decomposed sequence instead; the reason is kept in LtFallbacks.
//
// Algorithms: each cuBLASLt configuration (shape, layout, dtypes,
// epilogue) asks the heuristic once for up to cuda.LtCandidates algorithms
// and runs the first that works (ltMatmul), or with DRUTO_GEMM_TUNE=1 the
// fastest of them timed at the first use (gemm_tune.go); LtChoices lists
// them. The workspace is WorkspaceBytes (32 MiB), shared with cuBLAS.
// Nothing is configured during graph capture.
//
// dtypes: A and B of one GEMM share a type. The model passes an fp32
// residual gradient as dout against 16-bit weights (the attention and MLP
// projections); dout is then cast once into a reused 16-bit scratch buffer
// for the GEMMs (gemmOperand).

import (
	"fmt"
	"sort"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Kernel names of matmul.cu.
const (
	kernBiasGrad = "matmul_bias_grad" // dbias (OC) F32 += Σ_rows dout (N,OC), T = dout's dtype
	kernAddF32   = "add_f32"          // dst (n) F32 += src (n) F32
	kernCastBias = "cast_bias_grad"   // g (N,OC) T = dout (N,OC) F32 rounded, part (chunks,OC) F32 its column sums
)

// ltKey identifies one configured cuBLASLt matmul.
type ltKey struct {
	p cuda.LtParams
}

// ltEntry is a configured matmul or why cuBLASLt could not configure it,
// and the candidate algorithm it runs (the heuristic's first, or the
// fastest where DRUTO_GEMM_TUNE=1 timed them).
type ltEntry struct {
	m    *cuda.LtMatmul
	err  error
	best int
	note string // how best was chosen
	set  int    // the candidate ltMatmul last selected (Run may have moved past it, see cuda.LtMatmul)
}

// ltExtra is the state of the micro-benchmarks and of tuning: force makes
// every cuBLASLt matmul run candidate force-1 (0: each its best); trace,
// when not nil, collects the matmuls run; tune is DRUTO_GEMM_TUNE=1.
type ltExtra struct {
	force  int
	missed int // matmuls that had no candidate force-1 (fell back)
	trace  *[]*cuda.LtMatmul
	tune   int // 0 unread, 1 off, 2 on
}

// dataType maps a float dtype to its cuBLAS element type.
func dataType(dt tensor.DType) (cuda.DataType, bool) {
	switch dt {
	case tensor.F32:
		return cuda.R32F, true
	case tensor.BF16:
		return cuda.R16BF, true
	case tensor.F16:
		return cuda.R16F, true
	}
	return 0, false
}

// LtFallbacks lists, sorted, the cuBLASLt configurations that had no
// algorithm and run the decomposed sequence instead, with cuBLASLt's reason
// (not FP8 ones: MatmulFP8 has no other path and returns the error).
func (d *Device) LtFallbacks() []string {
	var out []string
	for k, e := range d.lts {
		if e.err != nil && !k.p.AType.FP8() {
			out = append(out, fmt.Sprintf("M=%d N=%d K=%d epilogue %d (fp32 bias %v): %v", k.p.M, k.p.N, k.p.K, k.p.Epilogue, k.p.BiasF32, e.err))
		}
	}
	sort.Strings(out)
	return out
}

// ltAligned reports whether every non-null pointer is 256-byte aligned, as
// cuBLASLt's heuristic assumes unless told otherwise (Pool blocks are;
// views at odd offsets may not be, and take the cuBLAS path).
func ltAligned(ptrs ...cuda.DevicePtr) bool {
	for _, p := range ptrs {
		if p%256 != 0 {
			return false
		}
	}
	return true
}

// ltMatmul returns the configured cuBLASLt matmul for p, made once per
// (shape, layout, dtypes, epilogue): the candidate algorithms (cuda.LtMatmul),
// of which the heuristic's first runs (with DRUTO_GEMM_TUNE=1 the fastest,
// timed here at the first use on scratch operands by ltTune), or, while a
// micro-benchmark forces one (ltExtra.force), that one. nil when cuBLASLt
// has no algorithm for it (the caller falls back). Nothing is configured
// during graph capture: the step runs once plainly first.
func (d *Device) ltMatmul(p cuda.LtParams) *cuda.LtMatmul {
	if launchHook != nil {
		return nil // no cuBLASLt in launch tests: the decomposed sequence runs
	}
	p.MaxWorkspace = WorkspaceBytes
	k := ltKey{p}
	e, ok := d.lts[k]
	if !ok {
		if d.capturing {
			d.fail(fmt.Errorf("gpu: matmul: a cuBLASLt algorithm would be chosen during graph capture (run the step once before capturing)"))
			return nil
		}
		e.m, e.err = d.lt.NewMatmul(p)
		e.note = "heuristic"
		if e.m != nil && d.tuning() {
			e.best, e.note = d.ltTune(p, e)
		}
		e.set = e.best
		d.lts[k] = e
	}
	if e.m == nil {
		return nil
	}
	want := e.best
	if f := d.ltx.force; f > 0 {
		if f > e.m.Algos() {
			d.ltx.missed++
			return nil // no such candidate: the caller's fallback runs
		}
		want = f - 1
	}
	if e.set != want { // a forced candidate, or back from one
		if err := e.m.UseAlgo(want); err != nil {
			d.fail(fmt.Errorf("gpu: matmul: %w", err))
			return nil
		}
		e.set = want
		d.lts[k] = e
	}
	if d.ltx.trace != nil {
		*d.ltx.trace = append(*d.ltx.trace, e.m)
	}
	return e.m
}

// LtChoices lists, sorted, every configured cuBLASLt matmul with the
// candidate it runs and how it was chosen (for the bench logs).
func (d *Device) LtChoices() []string {
	var out []string
	for k, e := range d.lts {
		if e.m != nil {
			out = append(out, fmt.Sprintf("M=%d N=%d K=%d transA=%v transB=%v types %d/%d epilogue %d: candidate %d of %d (%s): %s",
				k.p.M, k.p.N, k.p.K, k.p.TransA, k.p.TransB, k.p.AType, k.p.CType, k.p.Epilogue, e.best, e.m.Algos(), e.note, e.m.AlgoInfo(e.best)))
		}
	}
	sort.Strings(out)
	return out
}

// ltGemm runs a plain product g (no epilogue) on cuBLASLt, so that its
// algorithm is chosen and cached like the fused ones; false (nothing
// queued) where cuBLASLt has no algorithm or an operand is not 256-byte
// aligned: the caller runs cuBLAS.
func (d *Device) ltGemm(g cuda.Gemm) bool {
	if !d.fused || !ltAligned(g.A, g.B, g.C) {
		return false
	}
	p := cuda.LtParams{
		TransA: g.TransA, TransB: g.TransB, M: g.M, N: g.N, K: g.K,
		AType: g.AType, BType: g.BType, CType: g.CType, LDA: g.LDA, LDB: g.LDB, LDC: g.LDC,
		Compute: g.Compute, Epilogue: cuda.EpilogueDefault,
	}
	m := d.ltMatmul(p)
	if m == nil {
		return false
	}
	d.launches.Add(1)
	if err := m.Run(d.stream, cuda.LtArgs{Alpha: g.Alpha, Beta: g.Beta, A: g.A, B: g.B, C: g.C, D: g.C,
		Workspace: d.ws, WorkspaceBytes: WorkspaceBytes}); err != nil {
		d.fail(fmt.Errorf("gpu: matmul (cuBLASLt): %w", err))
	}
	return true
}

// Matmul computes out = inp·weightᵀ + bias (bias may be nil) with fp32
// accumulation, then the epilogue act (with GELU, pre receives the
// pre-activation).
// out (N,OC), pre (N,OC) or nil, inp (N,C), weight (OC,C), bias (OC) or nil
func (d *Device) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	const op = "matmul"
	if !d.check(&device.Ops.Matmul, []int{N, C, OC, int(act)}, out, pre, inp, weight, bias) {
		return
	}
	dt := out.DType
	ct, ok := dataType(dt)
	if !ok || inp.DType != dt || weight.DType != dt || (pre != nil && pre.DType != dt) || (bias != nil && bias.DType != dt) {
		dts := []tensor.DType{out.DType, inp.DType, weight.DType}
		if bias != nil {
			dts = append(dts, bias.DType)
		}
		d.unsupported(op+" (out, inp, weight[, bias] must share a float dtype)", dts...)
		return
	}
	if N == 0 {
		return
	}
	if d.fused && N <= rowsMax {
		d.matmulRows(out, pre, inp, weight, bias, N, C, OC, act)
		return
	}
	if d.fused && d.matmulLt(out, pre, inp, weight, bias, N, C, OC, act, ct) {
		return
	}
	d.matmulDecomposed(out, pre, inp, weight, bias, N, C, OC, act, ct, d.fused)
}

// matmulLt runs the fused form; it reports false (nothing queued) when
// cuBLASLt has no algorithm for the configuration.
func (d *Device) matmulLt(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation, ct cuda.DataType) bool {
	p := cuda.LtParams{
		TransA: true, M: OC, N: N, K: C,
		AType: ct, BType: ct, CType: ct, LDA: C, LDB: C, LDC: OC,
		Compute: cuda.Compute32F, Epilogue: cuda.EpilogueDefault,
	}
	// cuBLASLt's GELU is an approximation of the tanh form that differs
	// from it by up to ~1% where gelu is small (x below -3): invisible in
	// 16-bit outputs, not in fp32 ones. fp32 therefore stores pre through
	// the bias epilogue and runs gelu.cu's one-pass kernel after it.
	ltGELU := act == device.GELU && ct != cuda.R32F
	target := out
	switch {
	case ltGELU && bias != nil:
		p.Epilogue, p.AuxLD = cuda.EpilogueGELUAuxBias, OC
	case ltGELU:
		p.Epilogue, p.AuxLD = cuda.EpilogueGELUAux, OC
	case bias != nil:
		p.Epilogue = cuda.EpilogueBias
	}
	if act == device.GELU && !ltGELU {
		target = pre
	}
	if !ltAligned(d.ptr(weight), d.ptr(inp), d.ptr(out), d.ptr(bias), d.ptr(pre)) {
		return false
	}
	m := d.ltMatmul(p)
	if m == nil {
		return false
	}
	args := cuda.LtArgs{
		Alpha: 1, A: d.ptr(weight), B: d.ptr(inp), D: d.ptr(target),
		Bias: d.ptr(bias), Workspace: d.ws, WorkspaceBytes: WorkspaceBytes,
	}
	if ltGELU {
		args.Aux = d.ptr(pre)
	}
	d.launches.Add(1)
	if err := m.Run(d.stream, args); err != nil {
		d.fail(fmt.Errorf("gpu: matmul (cuBLASLt): %w", err))
		return true
	}
	if act == device.GELU && !ltGELU {
		d.geluForward(out, pre, N*OC)
	}
	return true
}

// matmulRows runs the fused form over at most rowsMax rows (a decode
// step's) as matmul.cu's matmul_rows: a pass over the weights with every
// SM busy, where a GEMM would leave most of them idle (see matmul.cu).
// ks, the warps sharing an output column, doubles while the doubled grid
// still fits one wave (4 blocks of rowsBlock threads an SM: the kernel's
// launch bounds) and a warp's chunk of C stays at least 256 elements: a
// lane loads up to ROWS_U vectors at once, so a wave with one warp a row
// (gpt2-124M's qkv and MLP) already has its whole share of W in flight,
// and a second, partial wave would add a memory latency.
func (d *Device) matmulRows(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	warps := rowsBlock / 32
	ks := 1
	for ks < warps && OC*2*ks <= 4*warps*d.sms() && C/(2*ks) >= 256 {
		ks *= 2
	}
	vec := 0
	if C%(16/out.DType.Size()) == 0 && d.ptr(inp)%16 == 0 && d.ptr(weight)%16 == 0 {
		vec = 1
	}
	gelu := 0
	if act == device.GELU {
		gelu = 1
	}
	d.run("matmul_rows", out.DType, grid1(blocks(OC, warps/ks)), cuda.D1(rowsBlock), 0,
		d.ptr(out), d.ptr(pre), d.ptr(inp), d.ptr(weight), d.ptr(bias), N, C, OC, gelu, ks, vec)
}

// matmulDecomposed: GEMM into target (out, or pre under GELU), then the
// bias-add kernel over target, then GELU from pre into out: eager PyTorch's
// eight elementwise passes, or (onePass: the fused form falling back where
// cuBLASLt has no algorithm) gelu.cu's one-pass kernel.
func (d *Device) matmulDecomposed(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation, ct cuda.DataType, onePass bool) {
	target := out
	if act == device.GELU {
		target = pre
	}
	g := cuda.Gemm{
		TransA: true, M: OC, N: N, K: C, Alpha: 1,
		A: d.ptr(weight), B: d.ptr(inp), C: d.ptr(target),
		AType: ct, BType: ct, CType: ct, LDA: C, LDB: C, LDC: OC, Compute: cuda.Compute32F,
	}
	if err := d.gemm(g); err != nil {
		d.fail(fmt.Errorf("gpu: matmul (cuBLAS): %w", err))
		return
	}
	if bias != nil && !d.biasAdd(target, bias, N, OC) {
		return
	}
	if act == device.GELU {
		if onePass {
			d.geluForward(out, pre, N*OC)
		} else {
			d.geluForwardDecomposed(out, pre, N*OC)
		}
	}
}

// MatmulBackward accumulates dinp += dout·weight (dinp may be nil),
// dweight += doutᵀ·inp and dbias += Σ_rows dout (dbias may be nil).
// dinp (N,C), dweight (OC,C), dbias (OC), dout (N,OC), inp (N,C), weight (OC,C)
func (d *Device) MatmulBackward(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	d.matmulBackward(&device.Ops.MatmulBackward, 1, dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

// MatmulBackwardStore is MatmulBackward with dinp stored (the dinp GEMM's
// β is 0), not added to: the caller need not zero dinp first
// (device.GradStorer). dweight and dbias still accumulate.
func (d *Device) MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	d.matmulBackward(&device.Ops.MatmulBackwardStore, 0, dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

// matmulBackward is MatmulBackward with the dinp GEMM's β (1: accumulate,
// 0: store) under contract c.
func (d *Device) matmulBackward(c *device.Contract, beta float32, dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	const op = "matmul backward"
	if !d.check(c, []int{N, C, OC}, dinp, dweight, dbias, dout, inp, weight) {
		return
	}
	h := weight.DType // the GEMM operand type
	ht, ok := dataType(h)
	_, okW := dataType(dweight.DType)
	okI := dinp == nil
	if dinp != nil {
		_, okI = dataType(dinp.DType)
	}
	_, okD := dataType(dout.DType)
	if !ok || !okW || !okI || !okD || inp.DType != h || (dout.DType != h && dout.DType != tensor.F32) ||
		(dbias != nil && dbias.DType != tensor.F32) {
		dts := []tensor.DType{dweight.DType, dout.DType, inp.DType, weight.DType}
		if dinp != nil {
			dts = append(dts, dinp.DType)
		}
		if dbias != nil {
			dts = append(dts, dbias.DType)
		}
		d.unsupported(op+" (dweight, dout, inp, weight[, dinp, dbias F32])", dts...)
		return
	}
	if N == 0 {
		return
	}
	g, dbias := d.gradOperand(dout, dbias, h, N, OC)
	if g == 0 {
		return
	}
	if dinp != nil {
		dt, _ := dataType(dinp.DType)
		e := cuda.Gemm{
			M: C, N: N, K: OC, Alpha: 1, Beta: beta,
			A: d.ptr(weight), B: g, C: d.ptr(dinp),
			AType: ht, BType: ht, CType: dt, LDA: C, LDB: OC, LDC: C, Compute: cuda.Compute32F,
		}
		if !d.ltGemm(e) {
			if err := d.gemm(e); err != nil {
				d.fail(fmt.Errorf("gpu: %s: dinp (cuBLAS): %w", op, err))
				return
			}
		}
	}
	d.weightGrad(op, dweight, dbias, dout, g, inp, N, C, OC, ht)
}

// gemmOperand returns dout as a GEMM operand of type h: dout itself, or
// (an fp32 residual gradient against 16-bit weights) its cast into a reused
// scratch buffer; 0 with the error recorded.
func (d *Device) gemmOperand(dout *tensor.Tensor, h tensor.DType, n int) cuda.DevicePtr {
	if dout.DType == h {
		return d.ptr(dout)
	}
	g := d.scratch("matmul.dout", n*h.Size())
	if g != 0 {
		d.Cast(tensor.OnDevice(h, uintptr(g), n), dout)
	}
	return g
}

// gradOperand returns a linear layer's output gradient dout (N,OC) as a
// GEMM operand of type h (gemmOperand) and the bias gradient the weight
// gradient still has to add: dbias, or nil where the fused form cast an
// fp32 dout and summed dbias in the same pass (castBiasGrad).
func (d *Device) gradOperand(dout, dbias *tensor.Tensor, h tensor.DType, N, OC int) (cuda.DevicePtr, *tensor.Tensor) {
	if d.fused && dbias != nil && dout.DType == tensor.F32 && h != tensor.F32 {
		return d.castBiasGrad(dbias, dout, h, N, OC), nil
	}
	return d.gemmOperand(dout, h, N*OC), dbias
}

// castBiasRows is cast_bias_grad's rows per chunk (16 a warp): 128
// chunks × 6 column strips at GPT-2's N 16384, OC 768.
const castBiasRows = 128

// castBiasGrad returns dout (N,OC) F32 cast to h in gemmOperand's scratch
// and queues dbias (OC) F32 += the column sums of the cast values, in one
// pass over dout (cast_bias_grad, per chunk of rows, then matmul_bias_grad
// adding the chunks in order: deterministic). 0 with the error recorded.
func (d *Device) castBiasGrad(dbias, dout *tensor.Tensor, h tensor.DType, N, OC int) cuda.DevicePtr {
	rows := castBiasRows
	if c := blocks(N, rows); c > maxGridYZ {
		rows = blocks(N, maxGridYZ)
	}
	chunks := blocks(N, rows)
	g := d.scratch("matmul.dout", N*OC*h.Size())
	part := d.scratch("matmul.dbias.part", chunks*OC*4)
	if g == 0 || part == 0 {
		return 0
	}
	vec := 0
	if OC%4 == 0 {
		vec = vec4(d.ptr(dout), 4, g, h.Size())
	}
	grid := cuda.Dim3{X: uint32(blocks(OC, 128)), Y: uint32(chunks), Z: 1}
	if !d.launch(kernCastBias, h, grid, cuda.D1(castBiasBlock), 0, g, part, d.ptr(dout), N, OC, rows, vec) {
		return 0
	}
	d.launch(kernBiasGrad, tensor.F32, grid1(blocks(OC, 32)), cuda.D1(biasGradBlock), 0, d.ptr(dbias), part, chunks, OC)
	return g
}

// weightGrad queues dweight += doutᵀ·inp and dbias += Σ_rows dout, with g
// dout as an operand of type ht (gemmOperand).
//
// Fused, with an fp32 dweight, the bias gradient comes from the GEMM's
// BGRADB epilogue over g: written into an fp32 scratch vector, then added
// into dbias by one small kernel (backward ops accumulate; the epilogue
// overwrites). Where dout is an fp32 residual gradient and g its 16-bit
// copy, dbias is thereby summed from the 16-bit values, as PyTorch's
// autocast does (the linear layer's output gradient is 16-bit there);
// otherwise, and where cuBLASLt has no algorithm, matmul.cu's column-sum
// kernel sums dout itself.
func (d *Device) weightGrad(op string, dweight, dbias, dout *tensor.Tensor, g cuda.DevicePtr, inp *tensor.Tensor, N, C, OC int, ht cuda.DataType) {
	wt, _ := dataType(dweight.DType)
	if d.fused && dbias != nil && dweight.DType == tensor.F32 && ltAligned(d.ptr(inp), g, d.ptr(dweight)) {
		p := cuda.LtParams{
			TransB: true, M: C, N: OC, K: N,
			AType: ht, BType: ht, CType: wt, LDA: C, LDB: OC, LDC: C,
			Compute: cuda.Compute32F, Epilogue: cuda.EpilogueBGradB,
		}
		if m := d.ltMatmul(p); m != nil {
			tmp := d.scratch("matmul.dbias", OC*4)
			if tmp == 0 {
				return
			}
			args := cuda.LtArgs{
				Alpha: 1, Beta: 1, A: d.ptr(inp), B: g, C: d.ptr(dweight), D: d.ptr(dweight),
				Bias: tmp, Workspace: d.ws, WorkspaceBytes: WorkspaceBytes,
			}
			d.launches.Add(1)
			if err := m.Run(d.stream, args); err != nil {
				d.fail(fmt.Errorf("gpu: %s: dweight+dbias (cuBLASLt): %w", op, err))
				return
			}
			d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(OC), 1), cuda.D1(addF32Block), 0, d.ptr(dbias), tmp, int64(OC))
			return
		}
	}
	e := cuda.Gemm{
		TransB: true, M: C, N: OC, K: N, Alpha: 1, Beta: 1,
		A: d.ptr(inp), B: g, C: d.ptr(dweight),
		AType: ht, BType: ht, CType: wt, LDA: C, LDB: OC, LDC: C, Compute: cuda.Compute32F,
	}
	if !d.ltGemm(e) {
		if err := d.gemm(e); err != nil {
			d.fail(fmt.Errorf("gpu: %s: dweight (cuBLAS): %w", op, err))
			return
		}
	}
	if dbias != nil {
		d.biasGrad(dbias, dout, N, OC)
	}
}

// biasGrad queues dbias (OC) F32 += Σ_rows dout (N,OC), deterministically:
// one block per 32 columns, each warp summing a fixed row subset, the warp
// partials added in a fixed order.
func (d *Device) biasGrad(dbias, dout *tensor.Tensor, N, OC int) {
	d.launch(kernBiasGrad, dout.DType, grid1(blocks(OC, 32)), cuda.D1(biasGradBlock), 0,
		d.ptr(dbias), d.ptr(dout), N, OC)
}
