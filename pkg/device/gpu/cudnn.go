package gpu

// cudnn.go: cuDNN's fused flash attention (cuda.SDPAPlan) as the second
// backend of fused 16-bit causal attention, beside druto's own flash
// kernels. It runs where the own flash kernels would (flashFor: the state
// is the same log-sum-exp, (B,NH,T) F32, natural log of each row's scaled
// scores, so either backend's forward feeds either backend's backward):
//
//   - Attention: cuDNN's forward writes out and the log-sum-exp (Stats);
//   - AttentionBackwardStore: cuDNN's backward stores dq, dk and dv;
//   - AttentionBackward (accumulating into dqkv) keeps the own kernels:
//     cuDNN's graph stores, and an extra add pass would cost what cuDNN
//     saves; the model's step uses the store form.
//
// DRUTO_ATTENTION picks the backend: own (today's kernels), cudnn, or auto
// (the default): cuDNN where libcudnn.so.9 loads on an sm_80+ GPU, its
// plan builds for the shape and, for each head size and dtype, a check
// against the own kernels passes; the own kernels otherwise. A cuDNN
// failure never gives a wrong result: a plan that does not build or run
// leaves that shape to the own kernels and one line in AttentionNotes.
//
// Plans (graph, execution plan, workspace size) are cached per (B, NH, T,
// hs, dtype, direction); the workspace is the scratch "attn.cudnn", so a
// step that has run once allocates nothing, and SDPAPlan.Run only sets the
// stream, queues a memset (backward) and calls cudnnBackendExecute: it can
// be captured in a CUDA graph. During capture a shape without a plan takes
// the own kernels (a plan is never built while capturing).

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// AttentionEnv selects fused 16-bit attention's backend: "own", "cudnn" or
// "auto" (or unset: auto).
const AttentionEnv = "DRUTO_ATTENTION"

// Attention backends.
const (
	AttentionAuto  = "auto"
	AttentionOwn   = "own"
	AttentionCuDNN = "cudnn"
)

// attentionEnv reads DRUTO_ATTENTION.
func attentionEnv() (string, error) {
	switch v := os.Getenv(AttentionEnv); v {
	case "", AttentionAuto:
		return AttentionAuto, nil
	case AttentionOwn, AttentionCuDNN:
		return v, nil
	default:
		return "", fmt.Errorf("gpu: %s=%q: want own, cudnn or auto (fused 16-bit attention's backend) or unset", AttentionEnv, v)
	}
}

// dnnKey names one cached plan.
type dnnKey struct {
	B, T, NH, hs int
	dt           tensor.DType
	bwd          bool
}

// dnnEntry is a cached plan, or why the shape has none.
type dnnEntry struct {
	plan *cuda.SDPAPlan
	err  error
}

// dnnState is the device's cuDNN attention backend.
type dnnState struct {
	mode    string // AttentionEnv's value (auto, own, cudnn)
	lib     *cuda.DNN
	h       *cuda.DNNHandle
	off     string // why cuDNN does not run at all ("" where it may)
	on      bool   // the switch the ops read (SelfTest and the benchmarks flip it)
	plans   map[dnnKey]dnnEntry
	checked map[kernelKey]error // auto: the check of each (head size, dtype) against the own kernels
	notes   []string
	runs    int64 // plans queued (tests: cuDNN ran, and was captured)
}

// initDNN sets up the attention backend after the kernels are built.
func (d *Device) initDNN(cfg Config, mode string) {
	d.dnn = dnnState{mode: mode, plans: map[dnnKey]dnnEntry{}, checked: map[kernelKey]error{}}
	switch {
	case mode == AttentionOwn:
		d.dnn.off = AttentionEnv + "=own"
		return
	case !d.fused:
		d.dnn.off = "the decomposed form has no flash attention"
		return
	case d.ctx.Device.Major < 8:
		d.dnn.off = fmt.Sprintf("cuDNN's fused attention needs sm_80 or newer (this GPU is %s)", d.ctx.Device.Arch())
		return
	}
	lib, err := cuda.LoadDNN(cfg.Load)
	if err != nil {
		d.dnnOff(fmt.Sprintf("cuDNN did not load: %v", err))
		return
	}
	h, err := lib.NewHandle(d.ctx)
	if err != nil {
		d.dnnOff(fmt.Sprintf("cudnnCreate: %v", err))
		return
	}
	d.dnn.lib, d.dnn.h, d.dnn.on = lib, h, true
}

// dnnOff turns cuDNN attention off with one line saying why.
func (d *Device) dnnOff(why string) {
	d.dnn.off, d.dnn.on = why, false
	d.dnn.notes = append(d.dnn.notes, "cudnn attention off, own flash kernels run: "+why)
}

// closeDNN frees the plans and the handle.
func (d *Device) closeDNN() error {
	var errs []error
	for _, e := range d.dnn.plans {
		if e.plan != nil {
			errs = append(errs, e.plan.Destroy())
		}
	}
	d.dnn.plans = map[dnnKey]dnnEntry{}
	if d.dnn.h != nil {
		errs = append(errs, d.dnn.h.Destroy())
		d.dnn.h = nil
	}
	d.dnn.on = false
	return errors.Join(errs...)
}

// AttentionBackend says which backend fused 16-bit flash attention runs:
// "cudnn <version>" or "own", with the reason where cuDNN does not run.
func (d *Device) AttentionBackend() string {
	switch {
	case d.dnn.on && d.dnn.lib != nil:
		return fmt.Sprintf("cudnn %s (fused SDPA forward and store-form backward; %s=%s)", d.dnn.lib.Info().Version, AttentionEnv, d.dnn.mode)
	case d.dnn.off != "":
		return "own (" + d.dnn.off + ")"
	}
	return "own"
}

// AttentionNotes are the lines the cuDNN backend wrote: why it is off, or
// which shapes fell back to the own kernels and why.
func (d *Device) AttentionNotes() []string { return append([]string(nil), d.dnn.notes...) }

// dnnPlan returns the cuDNN plan for an attention call of shape s
// (forward, or the store-form backward), or nil where the own kernels run.
func (d *Device) dnnPlan(s attnShape, bwd bool) *cuda.SDPAPlan {
	if !d.dnn.on || d.dnn.h == nil || !s.flash || launchHook != nil {
		return nil
	}
	k := dnnKey{B: s.B, T: s.T, NH: s.NH, hs: s.hs, dt: s.dt, bwd: bwd}
	if e, ok := d.dnn.plans[k]; ok {
		return e.plan
	}
	if d.capturing || d.failed() {
		// no plan is built while capturing, nor over an error the caller's
		// Sync must see: the own kernels run this call
		return nil
	}
	if d.dnn.mode == AttentionAuto {
		if err := d.dnnCheck(s.dt, s.hs); err != nil {
			d.dnn.plans[k] = dnnEntry{err: err}
			return nil
		}
	}
	p, err := d.newDNNPlan(k)
	d.dnn.plans[k] = dnnEntry{plan: p, err: err}
	if err != nil {
		d.dnn.notes = append(d.dnn.notes, fmt.Sprintf("cudnn attention: own flash kernels run for %s B=%d T=%d NH=%d hs=%d (%s): %v",
			s.dt, s.B, s.T, s.NH, s.hs, map[bool]string{false: "forward", true: "backward"}[bwd], err))
		return nil
	}
	return p
}

// newDNNPlan builds the plan of k.
func (d *Device) newDNNPlan(k dnnKey) (*cuda.SDPAPlan, error) {
	ct, ok := dataType(k.dt)
	if !ok || (k.dt != tensor.BF16 && k.dt != tensor.F16) {
		return nil, fmt.Errorf("gpu: cudnn attention: dtype %s", k.dt)
	}
	return d.dnn.h.NewSDPA(cuda.SDPAParams{B: k.B, NH: k.NH, T: k.T, HS: k.hs, DType: ct, Backward: k.bwd})
}

// dnnRun queues plan p; false (after a note, with the plan dropped) where
// cuDNN refused to run it, and the caller runs the own kernels.
func (d *Device) dnnRun(s attnShape, bwd bool, p *cuda.SDPAPlan, a cuda.SDPAArgs) bool {
	ws := d.scratch("attn.cudnn", int(p.WorkspaceBytes))
	if ws == 0 {
		return true // the scratch error is recorded
	}
	a.Workspace, a.WorkspaceBytes = ws, p.WorkspaceBytes
	d.launches.Add(1)
	d.dnn.runs++
	if err := p.Run(d.stream, a); err != nil {
		k := dnnKey{B: s.B, T: s.T, NH: s.NH, hs: s.hs, dt: s.dt, bwd: bwd}
		d.dnn.plans[k] = dnnEntry{err: err}
		d.dnn.notes = append(d.dnn.notes, fmt.Sprintf("cudnn attention: execute failed, own flash kernels run: %v", err))
		_ = p.Destroy()
		return false
	}
	return true
}

// dnnCheckShape is the shape of auto mode's check: two heads, a tail of
// 3 after a whole number of 64-row tiles.
const dnnCheckB, dnnCheckNH, dnnCheckT = 1, 2, 131

// dnnCheck (auto mode) compares, once per head size and dtype, cuDNN's
// forward (out, log-sum-exp) and store-form backward (dqkv) with the own
// flash kernels on random inputs; a mismatch or error turns cuDNN off for
// that pair. Outside capture only (it synchronises).
func (d *Device) dnnCheck(dt tensor.DType, hs int) error {
	key := kernelKey{fmt.Sprintf("hs%d", hs), dt}
	if err, ok := d.dnn.checked[key]; ok {
		return err
	}
	trace := d.trace // SelfTest's record of the kernels a case launched: not the check's
	d.trace = nil
	err := d.dnnCompare(dt, hs)
	d.trace = trace
	if err != nil {
		err = fmt.Errorf("gpu: cudnn attention check (%s hs=%d against the own kernels): %w", dt, hs, err)
		d.dnn.notes = append(d.dnn.notes, fmt.Sprintf("cudnn attention: own flash kernels run for %s hs=%d: %v", dt, hs, err))
	}
	d.dnn.checked[key] = err
	return err
}

// dnnCompare runs the check of dnnCheck.
func (d *Device) dnnCompare(dt tensor.DType, hs int) error {
	const B, NH, T = dnnCheckB, dnnCheckNH, dnnCheckT
	C := NH * hs
	rng := tensor.NewRNG(0x5eed)
	host := func(n int, shape ...int) (*tensor.Tensor, error) {
		h := tensor.New(dt, shape...)
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.Norm())
		}
		return h, h.SetF32(v)
	}
	var allocs []*tensor.Tensor
	defer func() {
		for _, t := range allocs {
			d.Free(t)
		}
	}()
	up := func(n int, shape ...int) (*tensor.Tensor, error) {
		h, err := host(n, shape...)
		if err != nil {
			return nil, err
		}
		g, err := d.Alloc(dt, shape...)
		if err != nil {
			return nil, err
		}
		allocs = append(allocs, g)
		d.Upload(g, h)
		return g, nil
	}
	alloc := func(t tensor.DType, shape ...int) (*tensor.Tensor, error) {
		g, err := d.Alloc(t, shape...)
		if err == nil {
			allocs = append(allocs, g)
		}
		return g, err
	}
	qkv, err := up(B*T*3*C, B, T, 3*C)
	if err != nil {
		return err
	}
	dout, err := up(B*T*C, B, T, C)
	if err != nil {
		return err
	}
	var res [2][3][]float32 // [own, cudnn][out, lse, dqkv]
	for i, useDNN := range []bool{false, true} {
		out, err := alloc(dt, B, T, C)
		if err != nil {
			return err
		}
		lse, err := alloc(tensor.F32, B, NH, T)
		if err != nil {
			return err
		}
		dqkv, err := alloc(dt, B, T, 3*C)
		if err != nil {
			return err
		}
		if useDNN {
			k := dnnKey{B: B, T: T, NH: NH, hs: hs, dt: dt}
			for _, bwd := range []bool{false, true} {
				k.bwd = bwd
				p, err := d.newDNNPlan(k)
				if err != nil {
					return err
				}
				defer p.Destroy()
				a := cuda.SDPAArgs{QKV: d.ptr(qkv), Out: d.ptr(out), Stats: d.ptr(lse), DOut: d.ptr(dout), DQKV: d.ptr(dqkv)}
				ws := d.scratch("attn.cudnn", int(p.WorkspaceBytes))
				if ws == 0 {
					return d.Sync()
				}
				a.Workspace, a.WorkspaceBytes = ws, p.WorkspaceBytes
				if err := p.Run(d.stream, a); err != nil {
					return err
				}
			}
		} else {
			on := d.dnn.on
			d.dnn.on = false
			d.Attention(out, lse, qkv, B, T, C, NH)
			d.AttentionBackwardStore(dqkv, dout, qkv, out, lse, B, T, C, NH)
			d.dnn.on = on
		}
		if err := d.Sync(); err != nil {
			return err
		}
		for j, t := range []*tensor.Tensor{out, lse, dqkv} {
			h := tensor.New(t.DType, t.Shape...)
			d.Download(h, t)
			if err := d.Sync(); err != nil {
				return err
			}
			res[i][j] = h.ToF32()
		}
	}
	for j, name := range []string{"out", "log-sum-exp", "dqkv"} {
		tdt := dt
		if j == 1 {
			tdt = tensor.F32
		}
		for _, v := range res[1][j] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%s: not finite", name)
			}
		}
		if err := tensor.CloseF32(res[1][j], res[0][j], tdt, 16); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
