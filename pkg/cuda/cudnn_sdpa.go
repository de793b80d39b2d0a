package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// cudnn_sdpa.go: cuDNN's fused flash attention (causal scaled dot-product
// attention, forward and backward) as backend-API graphs, built operation
// for operation as cudnn-frontend's SDPA nodes lower them (its
// scaled_dot_product_flash_attention.h, softmax.h and the diagonal band
// mask), since cuDNN's runtime fusion engine recognises the pattern:
//
// forward  S = Q·Kᵀ (fp32), S·scale, causal mask (GEN_INDEX row and col,
//          row ≥ col, BINARY_SELECT with -inf), M = max S, E = exp(S−M),
//          Z = ΣE, Stats = M + log Z (the log-sum-exp, fp32 [B,NH,T,1]),
//          P = E/Z in the I/O type, O = P·V;
// backward D = Σ dO∘O (·1, fp32 [B,NH,T,1] in the workspace), S = Q·Kᵀ·scale
//          − Stats, causal mask, P = exp S, dV = Pᵀ·dO, dP = dO·Vᵀ,
//          dS = (dP − D)∘P·scale, dK = dSᵀ·Q, dQacc = dS·K (fp32 in the
//          workspace), dQ = identity(dQacc).
//
// Layout (druto's): qkv is (B,T,3,NH,hs), out and dout (B,T,NH,hs); Q, K
// and V are [B,NH,T,hs] views with strides [T·3C, hs, 3C, 1] at element
// offsets 0, C and 2C (K and V are passed as their transposes [B,NH,hs,T],
// as the backend wants Kᵀ and Vᵀ), O and dO [B,NH,T,hs] with strides
// [T·C, hs, C, 1]; dQ, dK and dV like Q, K and V in dqkv. Stats is
// (B,NH,T) fp32: the natural log-sum-exp of each row's scaled scores.

// SDPAParams describe one causal attention shape.
type SDPAParams struct {
	B, NH, T, HS int
	DType        DataType // R16BF or R16F
	Backward     bool
}

// validate checks the shape without calling cuDNN.
func (p SDPAParams) validate() error {
	if p.B <= 0 || p.NH <= 0 || p.T <= 0 || p.HS <= 0 {
		return fmt.Errorf("cuda: cudnn sdpa: B=%d NH=%d T=%d hs=%d must be positive", p.B, p.NH, p.T, p.HS)
	}
	if p.DType != R16BF && p.DType != R16F {
		return fmt.Errorf("cuda: cudnn sdpa: data type %d: only bf16 (%d) and f16 (%d)", p.DType, R16BF, R16F)
	}
	if p.HS%8 != 0 || p.HS > 256 {
		return fmt.Errorf("cuda: cudnn sdpa: head size %d: a multiple of 8 up to 256", p.HS)
	}
	if int64(p.B)*int64(p.T)*int64(3*p.NH*p.HS) > math.MaxInt32*int64(16) {
		return fmt.Errorf("cuda: cudnn sdpa: B=%d T=%d C=%d too large", p.B, p.T, p.NH*p.HS)
	}
	return nil
}

// String names the shape, e.g. "forward B=16 NH=12 T=1024 hs=64 bf16".
func (p SDPAParams) String() string {
	dir := "forward"
	if p.Backward {
		dir = "backward"
	}
	dt := "bf16"
	if p.DType == R16F {
		dt = "f16"
	}
	return fmt.Sprintf("%s B=%d NH=%d T=%d hs=%d %s", dir, p.B, p.NH, p.T, p.HS, dt)
}

// Tensor uids of the SDPA graphs.
const (
	sdpaQ = iota + 1
	sdpaK
	sdpaV
	sdpaO
	sdpaStats
	sdpaDO
	sdpaDQ
	sdpaDK
	sdpaDV
	sdpaScale
	sdpaNegInf
	sdpaOne
	sdpaDotSum  // backward: Σ dO∘O, fp32 in the workspace
	sdpaDQAcc   // backward: dQ accumulator, fp32 in the workspace
	sdpaVirtual = 100
)

// SDPAPlan is one built attention graph and its execution plan, made once
// per shape and run many times.
type SDPAPlan struct {
	h      *DNNHandle
	p      SDPAParams
	g      *dnnGraph
	plan   uintptr
	planWS uint64 // cuDNN's workspace bytes
	// scalars holds the by-value scalars (scale, mask value, 1) that the
	// variant pack points to: heap memory (Go's collector does not move
	// it), kept alive by the plan through every execute; cuDNN copies the
	// values into the kernels' parameters when it queues them.
	scalars *[3]float32
	// WorkspaceBytes is what Run needs: cuDNN's workspace and, backward,
	// the row sums and the fp32 dQ accumulator after it (256-byte aligned).
	WorkspaceBytes uint64
}

// NewSDPA builds the forward or backward graph for p and its plan.
func (h *DNNHandle) NewSDPA(p SDPAParams) (*SDPAPlan, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	s := &SDPAPlan{h: h, p: p, scalars: &[3]float32{float32(1 / math.Sqrt(float64(p.HS))), dnnNegInf(h.l.ver), 1}}
	err := h.c.Do(func() error {
		s.g = newDNNGraph(h.l.api)
		if p.Backward {
			s.g.sdpaBackward(p)
		} else {
			s.g.sdpaForward(p)
		}
		plan, ws := s.g.plan(h.h)
		if s.g.err != nil {
			return s.g.err
		}
		s.plan, s.planWS = plan, uint64(ws)
		return nil
	})
	if err != nil {
		s.Destroy()
		return nil, fmt.Errorf("cuda: cudnn sdpa %v: %w", p, err)
	}
	s.WorkspaceBytes = s.planWS
	if p.Backward {
		s.WorkspaceBytes = s.dqAccOffset() + uint64(p.B*p.NH*p.T*p.HS)*4
	}
	return s, nil
}

// dnnZeroesDQAcc is the first cuDNN version that zeroes the backward's fp32
// dQ accumulator itself (9.6.0, as cudnn-frontend's SDPA backward node
// assumes); before it Run queues a memset of it.
const dnnZeroesDQAcc = 90600

func align256(n uint64) uint64 { return (n + 255) &^ 255 }

func (s *SDPAPlan) dotSumOffset() uint64 { return align256(s.planWS) }
func (s *SDPAPlan) dqAccOffset() uint64 {
	return align256(s.dotSumOffset() + uint64(s.p.B*s.p.NH*s.p.T)*4)
}

// Params returns the shape the plan was built for.
func (s *SDPAPlan) Params() SDPAParams { return s.p }

// SDPAArgs are the operands of one run: forward reads QKV and writes Out
// and Stats; backward reads QKV, Out, DOut and Stats and stores DQKV.
// Workspace is device memory of at least the plan's WorkspaceBytes.
type SDPAArgs struct {
	QKV, Out, Stats, DOut, DQKV DevicePtr
	Workspace                   DevicePtr
	WorkspaceBytes              uint64
}

// Run queues the attention on s: cudnnSetStream, then (backward, before
// cuDNN 9.6) a memset of the dQ accumulator and cudnnBackendExecute,
// nothing else: no allocation and no synchronisation, so it can be
// captured in a CUDA graph.
func (s *SDPAPlan) Run(st *Stream, a SDPAArgs) error {
	p := s.p
	need := []DevicePtr{a.QKV, a.Out, a.Stats}
	if p.Backward {
		need = append(need, a.DOut, a.DQKV)
	}
	for _, x := range need {
		if x == 0 {
			return fmt.Errorf("cuda: cudnn sdpa %v: a nil operand", p)
		}
	}
	if s.WorkspaceBytes > 0 && (a.Workspace == 0 || a.WorkspaceBytes < s.WorkspaceBytes) {
		return fmt.Errorf("cuda: cudnn sdpa %v: needs %d workspace bytes, got %d", p, s.WorkspaceBytes, a.WorkspaceBytes)
	}
	C := uint64(p.NH * p.HS)
	es := uint64(2)
	q, k, v := uintptr(a.QKV), uintptr(a.QKV)+uintptr(C*es), uintptr(a.QKV)+uintptr(2*C*es)
	sc := uintptr(unsafe.Pointer(&s.scalars[0]))
	var uids []int64
	var ptrs []uintptr
	if !p.Backward {
		uids = []int64{sdpaQ, sdpaK, sdpaV, sdpaO, sdpaStats, sdpaScale, sdpaNegInf}
		ptrs = []uintptr{q, k, v, uintptr(a.Out), uintptr(a.Stats), sc, sc + 4}
	} else {
		dq, dk, dv := uintptr(a.DQKV), uintptr(a.DQKV)+uintptr(C*es), uintptr(a.DQKV)+uintptr(2*C*es)
		uids = []int64{sdpaQ, sdpaK, sdpaV, sdpaO, sdpaStats, sdpaDO, sdpaDQ, sdpaDK, sdpaDV,
			sdpaScale, sdpaNegInf, sdpaOne, sdpaDotSum, sdpaDQAcc}
		ptrs = []uintptr{q, k, v, uintptr(a.Out), uintptr(a.Stats), uintptr(a.DOut), dq, dk, dv,
			sc, sc + 4, sc + 8, uintptr(a.Workspace) + uintptr(s.dotSumOffset()), uintptr(a.Workspace) + uintptr(s.dqAccOffset())}
	}
	api := s.h.l.api
	return s.h.c.Do(func() error {
		if err := api.setStream(s.h.h, st.h); err != nil {
			return err
		}
		if p.Backward && s.h.l.ver < dnnZeroesDQAcc {
			// cuDNN before 9.6 wants the accumulator zeroed (cudnn-frontend
			// memsets it there; from 9.6 on it only hands cuDNN the memory)
			acc := a.Workspace + DevicePtr(s.dqAccOffset())
			if err := s.h.c.api.memsetD32(acc, 0, uint64(p.B*p.NH*p.T*p.HS), st.h); err != nil {
				return err
			}
		}
		err := dnnExecute(api, s.h.h, s.plan, uids, ptrs, a.Workspace)
		runtime.KeepAlive(s.scalars)
		if err != nil {
			return fmt.Errorf("cuda: cudnn sdpa %v: %w", p, err)
		}
		return nil
	})
}

// Destroy frees the plan's descriptors.
func (s *SDPAPlan) Destroy() error {
	if s.g == nil {
		return nil
	}
	return s.h.c.Do(func() error { return s.g.destroy() })
}

// sdpaTensors returns the I/O tensor descriptions shared by both graphs.
type sdpaDims struct {
	b, h, t, d int64
	dt         DNNDataType
	vid        int64 // next virtual uid
}

func newSDPADims(p SDPAParams) *sdpaDims {
	dt := DNNBFloat16
	if p.DType == R16F {
		dt = DNNHalf
	}
	return &sdpaDims{b: int64(p.B), h: int64(p.NH), t: int64(p.T), d: int64(p.HS), dt: dt, vid: sdpaVirtual}
}

// qkv is Q, K or V (or dQ, dK, dV) as [B,NH,T,hs] in the packed qkv;
// transposed gives the [B,NH,hs,T] view.
func (s *sdpaDims) qkv(uid int64, transposed bool) DNNTensor {
	C := s.h * s.d
	t := DNNTensor{UID: uid, Dims: []int64{s.b, s.h, s.t, s.d}, Strides: []int64{s.t * 3 * C, s.d, 3 * C, 1}, DType: s.dt}
	if transposed {
		t.Dims[2], t.Dims[3] = t.Dims[3], t.Dims[2]
		t.Strides[2], t.Strides[3] = t.Strides[3], t.Strides[2]
	}
	return t
}

// act is O or dO: [B,NH,T,hs] in (B,T,C).
func (s *sdpaDims) act(uid int64) DNNTensor {
	C := s.h * s.d
	return DNNTensor{UID: uid, Dims: []int64{s.b, s.h, s.t, s.d}, Strides: []int64{s.t * C, s.d, C, 1}, DType: s.dt}
}

// rows is a [B,NH,T,1] fp32 tensor (Stats and row sums).
func (s *sdpaDims) rows(uid int64, virtual bool) DNNTensor {
	return DNNTensor{UID: uid, Dims: []int64{s.b, s.h, s.t, 1}, Strides: []int64{s.h * s.t, s.t, 1, 1}, DType: DNNFloat, Virtual: virtual}
}

// scores is a virtual [B,NH,T,T] tensor of type dt; transposed gives the
// [B,NH,T(kv),T(q)] view of the same memory order.
func (s *sdpaDims) scores(dt DNNDataType, transposed bool) DNNTensor {
	s.vid++
	t := DNNTensor{UID: s.vid, Dims: []int64{s.b, s.h, s.t, s.t}, Strides: []int64{s.h * s.t * s.t, s.t * s.t, s.t, 1}, DType: dt, Virtual: true}
	if transposed {
		t.Strides[2], t.Strides[3] = 1, s.t
	}
	return t
}

// virtualRows is a virtual [B,NH,T,1] fp32 tensor.
func (s *sdpaDims) virtualRows() DNNTensor {
	s.vid++
	return s.rows(s.vid, true)
}

// scalar is a by-value fp32 [1,1,1,1] tensor.
func scalar(uid int64) DNNTensor {
	return DNNTensor{UID: uid, Dims: []int64{1, 1, 1, 1}, Strides: []int64{1, 1, 1, 1}, DType: DNNFloat, ByValue: true}
}

// causalMask adds the causal mask to the fp32 scores x (row ≥ col keeps
// the score, else negInf) and returns the masked scores.
func (g *dnnGraph) causalMask(s *sdpaDims, x, negInf uintptr) uintptr {
	idx := func() uintptr {
		t := s.scores(DNNInt32, false)
		return g.tensor(t)
	}
	row, col := idx(), idx()
	g.pointwise("gen_row_index", DNNGenIndex, DNNFloat, 2, row, x)
	g.pointwise("gen_col_index", DNNGenIndex, DNNFloat, 3, col, x)
	mask := g.tensor(s.scores(DNNBoolean, false))
	g.pointwise("row>=col", DNNCmpGE, DNNBoolean, -1, mask, row, col)
	y := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("binary_select", DNNBinarySelect, DNNFloat, -1, y, x, negInf, mask)
	return y
}

// sdpaForward adds the forward graph.
func (g *dnnGraph) sdpaForward(p SDPAParams) {
	s := newSDPADims(p)
	q, k, v := g.tensor(s.qkv(sdpaQ, false)), g.tensor(s.qkv(sdpaK, true)), g.tensor(s.qkv(sdpaV, false))
	o := g.tensor(s.act(sdpaO))
	stats := g.tensor(s.rows(sdpaStats, false))
	scale, negInf := g.tensor(scalar(sdpaScale)), g.tensor(scalar(sdpaNegInf))

	s1 := g.tensor(s.scores(DNNFloat, false))
	g.matmul("bmm1", s1, q, k)
	s2 := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("attn_scale", DNNMul, DNNFloat, -1, s2, s1, scale)
	s3 := g.causalMask(s, s2, negInf)
	mx := g.tensor(s.virtualRows())
	g.reduction("max", DNNReduceMax, mx, s3)
	sub := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("sub", DNNSub, DNNFloat, -1, sub, s3, mx)
	e := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("exp", DNNExp, DNNFloat, -1, e, sub)
	sum := g.tensor(s.virtualRows())
	g.reduction("sum", DNNReduceAdd, sum, e)
	lg := g.tensor(s.virtualRows())
	g.pointwise("log", DNNLog, DNNFloat, -1, lg, sum)
	g.pointwise("stats", DNNAdd, DNNFloat, -1, stats, mx, lg)
	pr := g.tensor(s.scores(s.dt, false))
	g.pointwise("div", DNNDiv, DNNFloat, -1, pr, e, sum)
	g.matmul("bmm2", o, pr, v)
}

// sdpaBackward adds the backward graph.
func (g *dnnGraph) sdpaBackward(p SDPAParams) {
	s := newSDPADims(p)
	q, k, v := g.tensor(s.qkv(sdpaQ, false)), g.tensor(s.qkv(sdpaK, true)), g.tensor(s.qkv(sdpaV, true))
	o, do := g.tensor(s.act(sdpaO)), g.tensor(s.act(sdpaDO))
	stats := g.tensor(s.rows(sdpaStats, false))
	dq, dk, dv := g.tensor(s.qkv(sdpaDQ, false)), g.tensor(s.qkv(sdpaDK, false)), g.tensor(s.qkv(sdpaDV, false))
	scale, negInf, one := g.tensor(scalar(sdpaScale)), g.tensor(scalar(sdpaNegInf)), g.tensor(scalar(sdpaOne))

	// D = Σ dO∘O (·1), fp32 rows in the workspace
	s.vid++
	prod := g.tensor(DNNTensor{UID: s.vid, Dims: []int64{s.b, s.h, s.t, s.d},
		Strides: []int64{s.h * s.t * s.d, s.t * s.d, s.h * s.d, 1}, DType: DNNFloat, Virtual: true})
	g.pointwise("mul_dO_O", DNNMul, DNNFloat, -1, prod, do, o)
	red := g.tensor(s.virtualRows())
	g.reduction("reduce_dO_O", DNNReduceAdd, red, prod)
	dsum := g.tensor(s.rows(sdpaDotSum, false))
	g.pointwise("scale_dropout_inv", DNNMul, DNNFloat, -1, dsum, red, one)

	// P = exp(Q·Kᵀ·scale − Stats), causal
	s1 := g.tensor(s.scores(DNNFloat, false))
	g.matmul("matmul_Q_KT", s1, q, k)
	s2 := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("mul_s_attn_scale", DNNMul, DNNFloat, -1, s2, s1, scale)
	s3 := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("sub_s_m", DNNSub, DNNFloat, -1, s3, s2, stats)
	s4 := g.causalMask(s, s3, negInf)
	pe := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("exp_s", DNNExp, DNNFloat, -1, pe, s4)

	// dV = Pᵀ·dO
	pt := g.tensor(s.scores(s.dt, true))
	g.reshape("reshape_p", pt, pe)
	g.matmul("matmul_pT_dO", dv, pt, do)

	// dS = (dO·Vᵀ − D)∘P·scale
	dp := g.tensor(s.scores(DNNFloat, false))
	g.matmul("matmul_dO_VT", dp, do, v)
	d1 := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("sub_dP_softmax_sum", DNNSub, DNNFloat, -1, d1, dp, dsum)
	d2 := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("mul_dP_exp_s", DNNMul, DNNFloat, -1, d2, d1, pe)
	ds := g.tensor(s.scores(DNNFloat, false))
	g.pointwise("mul_dS_attn_scale", DNNMul, DNNFloat, -1, ds, d2, scale)

	// dK = dSᵀ·Q
	dst := g.tensor(s.scores(s.dt, true))
	g.reshape("reshape_dS", dst, ds)
	g.matmul("matmul_dST_Q", dk, dst, q)

	// dQ = identity(dS·K), accumulated in fp32
	s.vid++
	kn := s.qkv(sdpaK, false)
	kn.UID, kn.Virtual = s.vid, true
	kv := g.tensor(kn)
	g.reshape("reshape_k", kv, k)
	acc := g.tensor(DNNTensor{UID: sdpaDQAcc, Dims: []int64{s.b, s.h, s.t, s.d},
		Strides: []int64{s.h * s.t * s.d, s.t * s.d, s.d, 1}, DType: DNNFloat})
	g.matmul("matmul_dS_K", acc, ds, kv)
	g.pointwise("identity_dQ", DNNIdentity, DNNFloat, -1, dq, acc)
}
