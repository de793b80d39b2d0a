package gpu

// decode_token.go: a decode step's transformer blocks for one sequence as
// one persistent kernel (device.TokenDecoder, kernels/decode_token.cu).
// At one sequence the step is a chain of small products whose launches and
// synchronisation, not their bytes, set a token's time; decode_token runs
// the chain in one launch of one block an SM, its links counters in global
// memory, each block's weights copied into shared memory ahead of use.

import (
	"fmt"
	"os"
	"strconv"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.TokenDecoder = (*Device)(nil)

const kernToken = "decode_token"

var (
	tokThreads = kernels.MustBlock("decode_token.cu", "DT_THREADS")
	tokHS      = kernels.MustDefine("decode_token.cu", "DT_HS")
	tokMarks   = kernels.MustDefine("decode_token.cu", "DT_MARKS")
)

// TokenEnv turns decode_token on ("on") or off ("off", the default until
// it is measured faster); "cap=N" turns it on with at most N cached
// positions a head in shared memory (the rest read from the cache), which
// the tests use to reach that path at small sizes.
const TokenEnv = "DRUTO_DECODE_TOKEN"

// tokenEnv reads TokenEnv: whether decode_token is on, and the cap on its
// positions in shared memory (0: what the shared memory holds).
func tokenEnv() (on bool, capPos int, err error) {
	switch v := os.Getenv(TokenEnv); {
	case v == "" || v == "off":
		return false, 0, nil
	case v == "on":
		return true, 0, nil
	case len(v) > 4 && v[:4] == "cap=":
		n, err := strconv.Atoi(v[4:])
		if err != nil || n < 0 {
			return false, 0, fmt.Errorf("gpu: %s=%q: want on, off or cap=N (N >= 0)", TokenEnv, v)
		}
		return true, n, nil
	default:
		return false, 0, fmt.Errorf("gpu: %s=%q: want on, off or cap=N (N >= 0)", TokenEnv, v)
	}
}

// tokenGrid is decode_token's grid for NH heads on sms multiprocessors: a
// block a head and the rest of the SMs as workers (one block an SM, all
// resident at once: the blocks wait for each other).
func tokenGrid(NH, sms int) (G, NW int) { return sms, sms - NH }

// tokenWorkerSmem is a worker's shared memory (dt_worker_smem): its rows of
// Wqkv, Wfc and Wfp in T (es bytes an element), then fp32 x, x2, the
// normalised row, h (4C), the rows' sums, the warps' parts, a layernorm's
// weight and bias, the attention projection's bias and the rows' biases.
func tokenWorkerSmem(C, NW, es int) int {
	rq, rf, rp := 2*blocks(3*C/2, NW), 2*blocks(2*C, NW), blocks(C, NW) // qkv's and h's rows in pairs
	return (rq+rf+4*rp)*C*es + (3*C+4*C+rf+max(rf, tokThreads/32)+3*C+rf)*4
}

// tokenHeadSmem is a head block's (dt_head_smem) at capPos cached
// positions: Wp's hs columns, the keys and values, the newest key and
// value, then fp32 q, the scores (S), the output, the p·V groups' sums and
// the warps' maxima and sums.
func tokenHeadSmem(C, S, capPos, es int) int {
	hs := tokHS
	return (C*hs+2*capPos*hs+2*hs)*es + (hs+S+hs+tokThreads+2*(tokThreads/32))*4
}

// tokenCap is the cached positions a head block holds in shared memory
// (bytes of it at most): what is left after the rest, at most S, a multiple
// of 8; -1 when even none fit.
func tokenCap(C, S, es, bytes int) int {
	left := bytes - tokenHeadSmem(C, S, 0, es)
	if left < 0 {
		return -1
	}
	return min(S, left/(2*tokHS*es)) / 8 * 8
}

// TokenReady returns nil when DecodeToken takes s on this device.
func (d *Device) TokenReady(s *device.TokenStep) error {
	on, _, err := tokenEnv()
	if err != nil {
		return err
	}
	if !on {
		return fmt.Errorf("gpu: %s is off", TokenEnv)
	}
	_, err = d.tokenPlan(s)
	return err
}

// tokenPlan checks s and returns the kernel's layout: the layers' strides
// and the shared memory.
type tokenLaunch struct {
	ls, kvs   int64 // elements from layer l's parameter (cache) to layer l+1's
	smem, cap int
	G         int
}

func (d *Device) tokenPlan(s *device.TokenStep) (tokenLaunch, error) {
	var p tokenLaunch
	if s == nil || s.Out == nil || s.X == nil || s.Pos == nil || s.LnfW == nil || s.LnfB == nil || len(s.Layers) == 0 {
		return p, fmt.Errorf("gpu: decode_token: a tensor of the step is missing: %w", tensor.ErrShape)
	}
	C, NH, S, L := s.C, s.NH, s.S, len(s.Layers)
	dt := s.Out.DType
	if dt != tensor.BF16 && dt != tensor.F16 {
		return p, fmt.Errorf("gpu: decode_token takes bf16 and f16, not %s: %w", dt, device.ErrUnsupported)
	}
	if launchHook == nil && d.tmaSmem[kernelKey{kernToken, dt}] == 0 {
		return p, fmt.Errorf("gpu: decode_token/%s is not built on this device (sm_90 and NVRTC 12+): %w", dt, device.ErrUnsupported)
	}
	if NH < 1 || C != NH*tokHS || C > 1024 {
		return p, fmt.Errorf("gpu: decode_token takes heads of %d and at most 1024 channels, not C %d over %d heads: %w", tokHS, C, NH, device.ErrUnsupported)
	}
	G, NW := tokenGrid(NH, d.sms())
	if NW < 1 {
		return p, fmt.Errorf("gpu: decode_token needs more SMs (%d) than heads (%d): %w", d.sms(), NH, device.ErrUnsupported)
	}
	if s.X.DType != tensor.F32 {
		return p, fmt.Errorf("gpu: decode_token takes an fp32 residual stream, not %s: %w", s.X.DType, device.ErrUnsupported)
	}
	if len(s.K) != L || len(s.V) != L {
		return p, fmt.Errorf("gpu: decode_token: %d layers but %d and %d caches: %w", L, len(s.K), len(s.V), tensor.ErrShape)
	}
	es := dt.Size()
	// Every tensor in the step's dtype, at its size, and the layers at one
	// stride from each other (one flat parameter buffer; one cache buffer).
	want := func(t *tensor.Tensor, n int, what string) error {
		if t == nil || t.Numel() != n || t.DType != dt || t.Dev == 0 {
			return fmt.Errorf("gpu: decode_token: %s must be a device tensor of %d %s values: %w", what, n, dt, tensor.ErrShape)
		}
		return nil
	}
	if err := want(s.Out, C, "out"); err != nil {
		return p, err
	}
	if s.X.Numel() != C || s.Pos.Numel() != 1 || s.Pos.DType != tensor.I32 {
		return p, fmt.Errorf("gpu: decode_token: x (%d) and pos (1, I32) are one sequence's: %w", C, tensor.ErrShape)
	}
	if err := want(s.LnfW, C, "lnf weight"); err != nil {
		return p, err
	}
	if err := want(s.LnfB, C, "lnf bias"); err != nil {
		return p, err
	}
	field := func(l *device.TokenLayer) []*tensor.Tensor {
		return []*tensor.Tensor{l.Ln1W, l.Ln1B, l.QKVW, l.QKVB, l.ProjW, l.ProjB, l.Ln2W, l.Ln2B, l.FCW, l.FCB, l.FCProjW, l.FCProjB}
	}
	sizes := []int{C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C}
	stride := func(a, b *tensor.Tensor) int64 { return (int64(b.Dev) - int64(a.Dev)) / int64(es) }
	for l := range s.Layers {
		for i, t := range field(&s.Layers[l]) {
			if err := want(t, sizes[i], fmt.Sprintf("layer %d parameter %d", l, i)); err != nil {
				return p, err
			}
		}
		for _, t := range []*tensor.Tensor{s.K[l], s.V[l]} {
			if err := want(t, NH*S*tokHS, fmt.Sprintf("layer %d cache", l)); err != nil {
				return p, err
			}
		}
	}
	if L > 1 {
		p.ls = stride(s.Layers[0].Ln1W, s.Layers[1].Ln1W)
		p.kvs = stride(s.K[0], s.K[1])
		if stride(s.K[0], s.V[0]) == 0 || p.ls <= 0 || p.kvs <= 0 {
			return p, fmt.Errorf("gpu: decode_token: the layers' parameters or caches overlap: %w", device.ErrUnsupported)
		}
	}
	for l := range s.Layers {
		f0, fl := field(&s.Layers[0]), field(&s.Layers[l])
		for i := range fl {
			if stride(f0[i], fl[i]) != int64(l)*p.ls || fl[i].Dev%16 != 0 && (i == 2 || i == 4 || i == 8 || i == 10) {
				return p, fmt.Errorf("gpu: decode_token: layer %d's parameters are not at one stride from layer 0's, 16-byte aligned: %w", l, device.ErrUnsupported)
			}
		}
		if stride(s.K[0], s.K[l]) != int64(l)*p.kvs || stride(s.V[0], s.V[l]) != int64(l)*p.kvs || s.K[l].Dev%16 != 0 || s.V[l].Dev%16 != 0 {
			return p, fmt.Errorf("gpu: decode_token: layer %d's caches are not at one stride from layer 0's, 16-byte aligned: %w", l, device.ErrUnsupported)
		}
	}
	// Shared memory: what the device gives a block (the limit New raised).
	limit := d.tmaSmem[kernelKey{kernToken, dt}]
	if launchHook != nil && limit == 0 {
		limit = 227 << 10 // the launch tests: an sm_90 block's
	}
	capPos := tokenCap(C, S, es, limit)
	if _, c, _ := tokenEnv(); c > 0 {
		capPos = min(capPos, c/8*8)
	}
	if capPos < 0 || tokenWorkerSmem(C, NW, es) > limit {
		return p, fmt.Errorf("gpu: decode_token needs %d bytes of shared memory a block at C %d, the device gives %d: %w",
			max(tokenHeadSmem(C, S, 0, es), tokenWorkerSmem(C, NW, es)), C, limit, device.ErrUnsupported)
	}
	p.cap, p.G = capPos, G
	p.smem = max(tokenHeadSmem(C, S, capPos, es), tokenWorkerSmem(C, NW, es))
	return p, nil
}

// DecodeToken queues decode_token for the step s (TokenReady must allow it).
func (d *Device) DecodeToken(s *device.TokenStep) {
	p, err := d.tokenPlan(s)
	if err != nil {
		d.fail(err)
		return
	}
	C, NH, S, L := s.C, s.NH, s.S, len(s.Layers)
	dt := s.Out.DType
	// The links' words (kernels/decode_token.cu: a value and its flag in 8
	// bytes), zero when first made; seq, one for the device, keeps every
	// launch's flags above those its words may hold from earlier launches.
	xs := d.zeroScratch("token.xs", 2*C*8)
	qkv := d.zeroScratch("token.qkv", 3*C/2*8)
	yp := d.zeroScratch("token.ypart", NH*C*8)
	hb := d.zeroScratch("token.h", 2*C*8)
	seq := d.zeroScratch("token.seq", 128)
	if xs == 0 || qkv == 0 || yp == 0 || hb == 0 || seq == 0 {
		return
	}
	var trace cuda.DevicePtr
	if os.Getenv(TokenTraceEnv) != "" {
		if trace = d.zeroScratch(fmt.Sprintf("token.trace%d", L), 2*L*tokMarks*8); trace == 0 {
			return
		}
	}
	l0 := &s.Layers[0]
	d.launch(kernToken, dt, cuda.D1(p.G), cuda.D1(tokThreads), p.smem,
		d.ptr(s.Out), d.ptr(s.X), xs, qkv, yp, hb, seq,
		d.ptr(l0.Ln1W), d.ptr(l0.Ln1B), d.ptr(l0.QKVW), d.ptr(l0.QKVB), d.ptr(l0.ProjW), d.ptr(l0.ProjB),
		d.ptr(l0.Ln2W), d.ptr(l0.Ln2B), d.ptr(l0.FCW), d.ptr(l0.FCB), d.ptr(l0.FCProjW), d.ptr(l0.FCProjB),
		d.ptr(s.LnfW), d.ptr(s.LnfB), d.ptr(s.K[0]), d.ptr(s.V[0]), d.ptr(s.Pos),
		C, NH, S, L, p.cap, p.ls, p.kvs, trace)
}

// TokenTraceEnv, set, has decode_token record its phases' marks (dt_mark in
// kernels/decode_token.cu), read back by TokenTrace: the profile of its
// chain.
const TokenTraceEnv = "DRUTO_DECODE_TOKEN_TRACE"

// TokenTrace returns the marks of the last decode_token launch of L layers
// under TokenTraceEnv: (2L, tokMarks) values, the layers' globaltimer
// marks (ns), then their clock64 marks (the recording block's cycles).
func (d *Device) TokenTrace(L int) ([]uint64, error) {
	p := d.scratch(fmt.Sprintf("token.trace%d", L), 2*L*tokMarks*8)
	if p == 0 {
		return nil, fmt.Errorf("gpu: no decode_token trace of %d layers", L)
	}
	host := tensor.New(tensor.I32, 2*2*L*tokMarks)
	d.Download(host, tensor.OnDevice(tensor.I32, uintptr(p), 2*2*L*tokMarks))
	if err := d.Sync(); err != nil {
		return nil, err
	}
	v := host.I32()
	out := make([]uint64, 2*L*tokMarks)
	for i := range out {
		out[i] = uint64(uint32(v[2*i])) | uint64(uint32(v[2*i+1]))<<32
	}
	return out, nil
}
