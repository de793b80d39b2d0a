//go:build linux

package cuda

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// fakeDNN is a dnnAPI that records every descriptor, its attributes
// (raw bytes) and finalization, answers the heuristics with two engine
// configurations, fails the heuristics of mode failHeur and records what
// each execute's variant pack held.
type fakeDNN struct {
	ver       uint64
	next      uintptr
	kinds     map[uintptr]int
	attrs     map[uintptr]map[int][]byte
	order     []uintptr // descriptors in creation order
	final     map[uintptr]bool
	destroyed int
	failHeur  int32 // heuristics mode whose finalize fails (0: none)
	noConfigs bool  // the heuristics return no configuration
	ws        int64
	streams   []uintptr
	packs     []map[int][]byte
}

func newFakeDNN() *fakeDNN {
	return &fakeDNN{ver: 90800, next: 0x100, kinds: map[uintptr]int{}, attrs: map[uintptr]map[int][]byte{}, final: map[uintptr]bool{}, ws: 1000}
}

var dnnTypeSize = map[int]int64{dnnTypeHandle: 8, dnnTypeDataType: 4, dnnTypeBoolean: 1, dnnTypeInt64: 8, dnnTypeFloat: 4,
	dnnTypeVoidPtr: 8, dnnTypeHeurMode: 4, dnnTypePointwise: 4, dnnTypeDescriptor: 8, dnnTypeReduction: 4}

func (f *fakeDNN) version() uint64          { return f.ver }
func (f *fakeDNN) create() (uintptr, error) { return 1, nil }
func (f *fakeDNN) destroy(uintptr) error    { return nil }
func (f *fakeDNN) setStream(_, s uintptr) error {
	f.streams = append(f.streams, s)
	return nil
}
func (f *fakeDNN) createDescriptor(kind int) (uintptr, error) {
	f.next++
	f.kinds[f.next] = kind
	f.attrs[f.next] = map[int][]byte{}
	f.order = append(f.order, f.next)
	return f.next, nil
}
func (f *fakeDNN) destroyDescriptor(d uintptr) error {
	if _, ok := f.kinds[d]; !ok {
		return Error{Call: "cudnnBackendDestroyDescriptor", Code: 2000, Name: "CUDNN_STATUS_BAD_PARAM"}
	}
	f.destroyed++
	return nil
}
func (f *fakeDNN) finalize(d uintptr) error {
	if f.kinds[d] == dnnEngineHeurDesc && f.failHeur != 0 && f.i32(d, dnnAttrHeurMode) == f.failHeur {
		return dnnError(Error{Call: "cudnnBackendFinalize", Code: 3000, Name: "CUDNN_STATUS_NOT_SUPPORTED"}, "fake: no engine for mode A")
	}
	f.final[d] = true
	return nil
}
func (f *fakeDNN) setAttribute(d uintptr, name, typ int, n int64, v unsafe.Pointer) error {
	sz, ok := dnnTypeSize[typ]
	if !ok {
		return Error{Call: "cudnnBackendSetAttribute", Code: 2000, Name: "CUDNN_STATUS_BAD_PARAM"}
	}
	f.attrs[d][name] = append([]byte(nil), unsafe.Slice((*byte)(v), n*sz)...)
	return nil
}
func (f *fakeDNN) getAttribute(d uintptr, name, typ int, req int64, v unsafe.Pointer) (int64, error) {
	switch {
	case name == dnnAttrHeurResults:
		if f.noConfigs {
			return 0, nil
		}
		return 2, nil
	case name == dnnAttrPlanWorkspaceSize:
		*(*int64)(v) = f.ws
		return 1, nil
	}
	return 0, Error{Call: "cudnnBackendGetAttribute", Code: 2000, Name: "CUDNN_STATUS_BAD_PARAM"}
}
func (f *fakeDNN) execute(h, plan, pack uintptr) error {
	f.packs = append(f.packs, f.attrs[pack])
	return nil
}

func (f *fakeDNN) i32(d uintptr, name int) int32 {
	b := f.attrs[d][name]
	if len(b) < 4 {
		return -1
	}
	return int32(binary.LittleEndian.Uint32(b))
}

func (f *fakeDNN) i64s(d uintptr, name int) []int64 {
	b := f.attrs[d][name]
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// tensor returns the descriptor of the tensor with uid.
func (f *fakeDNN) tensor(t *testing.T, uid int64) uintptr {
	t.Helper()
	for _, d := range f.order {
		if f.kinds[d] == dnnTensorDesc && len(f.i64s(d, dnnAttrTensorUID)) == 1 && f.i64s(d, dnnAttrTensorUID)[0] == uid {
			return d
		}
	}
	t.Fatalf("no tensor %d", uid)
	return 0
}

// ops returns the graph's operations as names: "matmul", "reshape",
// "reduce:<op>" or "pw:<mode>".
func (f *fakeDNN) ops() []string {
	var out []string
	for _, d := range f.order {
		switch f.kinds[d] {
		case dnnOpMatmulDesc:
			out = append(out, "matmul")
		case dnnOpReshapeDesc:
			out = append(out, "reshape")
		case dnnOpReductionDesc:
			r := uintptr(binary.LittleEndian.Uint64(f.attrs[d][dnnAttrOpReductionDesc]))
			out = append(out, map[int32]string{0: "reduce:add", 3: "reduce:max"}[f.i32(r, dnnAttrReductionOperator)])
		case dnnOpPointwiseDesc:
			pw := uintptr(binary.LittleEndian.Uint64(f.attrs[d][dnnAttrOpPointwiseDesc]))
			out = append(out, "pw:"+map[int32]string{0: "add", 1: "mul", 6: "div", 9: "sub", 13: "exp", 15: "log", 21: "identity",
				303: "ge", 501: "index", 601: "select"}[f.i32(pw, dnnAttrPointwiseMode)])
		}
	}
	return out
}

// TestDNNNotFound: an absent libcudnn is ErrLibraryNotFound naming the
// soname and what to set.
func TestDNNNotFound(t *testing.T) {
	_, err := LoadDNN(LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true, Loader: &fakeLoader{}})
	if !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), "libcudnn.so.9") || !strings.Contains(err.Error(), EnvLibDir) {
		t.Fatalf("err = %v", err)
	}
	ld := &fakeLoader{libs: map[string][]string{"/d/libcudnn.so.9": {"cudnnGetVersion"}}}
	_, err = LoadDNN(LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
	if systemLoader == nil {
		if !errors.Is(err, ErrNoGPUSupport) {
			t.Fatalf("err = %v, want ErrNoGPUSupport without cgo", err)
		}
		return
	}
	if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), "cudnnBackendExecute") || strings.Contains(err.Error(), "cudnnGetLastErrorString") {
		t.Fatalf("err = %v, want ErrSymbol naming cudnnBackendExecute (not the optional cudnnGetLastErrorString)", err)
	}
}

// TestDNNVersion: 9.x is formatted and accepted, 8.9 refused.
func TestDNNVersion(t *testing.T) {
	f := newFakeDNN()
	l, err := newDNN(f, LibInfo{Name: "cudnn", Path: "/x/libcudnn.so.9"})
	if err != nil || l.Info().Version != "9.8.0" || l.Version() != 90800 {
		t.Fatalf("newDNN = %+v, %v", l, err)
	}
	f.ver = 8907
	if _, err := newDNN(f, LibInfo{Name: "cudnn"}); err == nil || !strings.Contains(err.Error(), "older than 9.0.0") {
		t.Fatalf("cuDNN 8.9.7 accepted: %v", err)
	}
}

// TestDNNTensorValidate: bad descriptions fail before any cuDNN call.
func TestDNNTensorValidate(t *testing.T) {
	ok := DNNTensor{UID: 1, Dims: []int64{2, 3}, Strides: []int64{3, 1}, DType: DNNFloat}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]DNNTensor{
		"uid 0":           {Dims: []int64{1}, Strides: []int64{1}, DType: DNNFloat},
		"strides short":   {UID: 1, Dims: []int64{2, 3}, Strides: []int64{1}, DType: DNNFloat},
		"no dims":         {UID: 1, DType: DNNFloat},
		"zero dim":        {UID: 1, Dims: []int64{0}, Strides: []int64{1}, DType: DNNFloat},
		"bad type":        {UID: 1, Dims: []int64{1}, Strides: []int64{1}, DType: 77},
		"virtual+byvalue": {UID: 1, Dims: []int64{1}, Strides: []int64{1}, DType: DNNFloat, Virtual: true, ByValue: true},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	g := newDNNGraph(newFakeDNN())
	g.tensor(DNNTensor{UID: 1, DType: DNNFloat})
	if g.err == nil {
		t.Fatal("a bad tensor accepted")
	}
	if plan, _ := g.plan(1); plan != 0 {
		t.Fatal("a graph with a bad tensor planned")
	}
}

// TestSDPAParams: shapes and types cuDNN's SDPA cannot take are refused
// with one line.
func TestSDPAParams(t *testing.T) {
	good := SDPAParams{B: 2, NH: 3, T: 17, HS: 64, DType: R16BF}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []SDPAParams{
		{B: 0, NH: 3, T: 17, HS: 64, DType: R16BF},
		{B: 1, NH: 3, T: 17, HS: 64, DType: R32F},
		{B: 1, NH: 3, T: 17, HS: 60, DType: R16F},
		{B: 1, NH: 3, T: 17, HS: 512, DType: R16F},
	} {
		if err := p.validate(); err == nil {
			t.Errorf("%v accepted", p)
		}
	}
	if s := good.String(); s != "forward B=2 NH=3 T=17 hs=64 bf16" {
		t.Errorf("String = %q", s)
	}
}

// fakeDNNHandle returns a handle over f in a fake context.
func fakeDNNHandle(t *testing.T, f *fakeDNN) (*DNNHandle, *Stream) {
	t.Helper()
	h, s, _ := fakeDNNHandleDriver(t, f)
	return h, s
}

// fakeDNNHandleDriver is fakeDNNHandle that also returns the fake driver.
func fakeDNNHandleDriver(t *testing.T, f *fakeDNN) (*DNNHandle, *Stream, *fakeDriver) {
	t.Helper()
	drv := newFakeDriver()
	c, s := fakeStream(t, drv)
	l, err := newDNN(f, LibInfo{Name: "cudnn"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHandle(c)
	if err != nil {
		t.Fatal(err)
	}
	return h, s, drv
}

// TestSDPAForwardGraph: the forward graph's operations in cudnn-frontend's
// order, druto's strides for Q, Kᵀ, V, O and Stats, the heuristics' fall
// back from mode A to FALLBACK, and the variant pack of a run.
func TestSDPAForwardGraph(t *testing.T) {
	f := newFakeDNN()
	f.failHeur = dnnHeurA
	h, st := fakeDNNHandle(t, f)
	const B, NH, T, HS = 2, 3, 17, 64
	const C = NH * HS
	p, err := h.NewSDPA(SDPAParams{B: B, NH: NH, T: T, HS: HS, DType: R16BF})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"matmul", "pw:mul", "pw:index", "pw:index", "pw:ge", "pw:select", "reduce:max", "pw:sub", "pw:exp",
		"reduce:add", "pw:log", "pw:add", "pw:div", "matmul"}
	if got := f.ops(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ops\n%v\nwant\n%v", got, want)
	}
	for _, c := range []struct {
		uid           int64
		dims, strides []int64
		dt            DNNDataType
	}{
		{sdpaQ, []int64{B, NH, T, HS}, []int64{T * 3 * C, HS, 3 * C, 1}, DNNBFloat16},
		{sdpaK, []int64{B, NH, HS, T}, []int64{T * 3 * C, HS, 1, 3 * C}, DNNBFloat16},
		{sdpaV, []int64{B, NH, T, HS}, []int64{T * 3 * C, HS, 3 * C, 1}, DNNBFloat16},
		{sdpaO, []int64{B, NH, T, HS}, []int64{T * C, HS, C, 1}, DNNBFloat16},
		{sdpaStats, []int64{B, NH, T, 1}, []int64{NH * T, T, 1, 1}, DNNFloat},
		{sdpaScale, []int64{1, 1, 1, 1}, []int64{1, 1, 1, 1}, DNNFloat},
	} {
		d := f.tensor(t, c.uid)
		if !slices.Equal(f.i64s(d, dnnAttrTensorDims), c.dims) || !slices.Equal(f.i64s(d, dnnAttrTensorStrides), c.strides) ||
			DNNDataType(f.i32(d, dnnAttrTensorDataType)) != c.dt || len(f.attrs[d][dnnAttrTensorVirtual]) != 0 {
			t.Errorf("tensor %d: dims %v strides %v type %d virtual %v", c.uid, f.i64s(d, dnnAttrTensorDims),
				f.i64s(d, dnnAttrTensorStrides), f.i32(d, dnnAttrTensorDataType), f.attrs[d][dnnAttrTensorVirtual])
		}
	}
	if b := f.attrs[f.tensor(t, sdpaScale)][dnnAttrTensorByValue]; len(b) != 1 || b[0] != 1 {
		t.Errorf("attn_scale is not by value: %v", b)
	}
	var modes []int32
	for _, d := range f.order {
		if f.kinds[d] == dnnEngineHeurDesc {
			modes = append(modes, f.i32(d, dnnAttrHeurMode))
		}
	}
	if len(modes) != 2 || modes[0] != dnnHeurA || modes[1] != dnnHeurFallback {
		t.Errorf("heuristics modes %v, want A then FALLBACK", modes)
	}
	if p.WorkspaceBytes != 1000 {
		t.Errorf("workspace %d, want the plan's 1000", p.WorkspaceBytes)
	}
	if err := p.Run(st, SDPAArgs{QKV: 0x10000, Out: 0x20000, Stats: 0x30000}); err == nil {
		t.Fatal("run without workspace accepted")
	}
	if err := p.Run(st, SDPAArgs{QKV: 0x10000, Out: 0x20000, Stats: 0x30000, Workspace: 0x40000, WorkspaceBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	if len(f.packs) != 1 || len(f.streams) != 1 || f.streams[0] != st.h {
		t.Fatalf("packs %d, streams %v", len(f.packs), f.streams)
	}
	pack := f.packs[0]
	uids := bytesI64(pack[dnnAttrPackUIDs])
	ptrs := bytesI64(pack[dnnAttrPackPointers])
	byUID := map[int64]int64{}
	for i := range uids {
		byUID[uids[i]] = ptrs[i]
	}
	if byUID[sdpaQ] != 0x10000 || byUID[sdpaK] != 0x10000+2*C || byUID[sdpaV] != 0x10000+4*C || byUID[sdpaO] != 0x20000 || byUID[sdpaStats] != 0x30000 {
		t.Errorf("variant pack %v", byUID)
	}
	if ws := bytesI64(pack[dnnAttrPackWorkspace]); len(ws) != 1 || ws[0] != 0x40000 {
		t.Errorf("workspace %v", ws)
	}
	if byUID[sdpaScale] != int64(uintptr(unsafe.Pointer(&p.scalars[0]))) || byUID[sdpaNegInf] != byUID[sdpaScale]+4 {
		t.Errorf("by-value scalars at %#x, %#x, want the plan's %p", byUID[sdpaScale], byUID[sdpaNegInf], p.scalars)
	}
	if v := p.scalars[0]; math.Abs(float64(v)-0.125) > 1e-7 {
		t.Errorf("attn_scale %g, want 1/√64", v)
	}
	if v := p.scalars[1]; v != -math.MaxFloat32 {
		t.Errorf("mask value %g before cuDNN 9.10, want the lowest float", v)
	}
	n := len(f.order)
	if err := p.Destroy(); err != nil || f.destroyed < n {
		t.Errorf("destroy: %v, %d of %d descriptors", err, f.destroyed, n)
	}
}

func bytesI64(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// TestSDPABackwardGraph: the backward graph's operations in
// cudnn-frontend's order, the fp32 workspace tensors after cuDNN's own
// workspace, and dq, dk, dv at offsets 0, C, 2C of dqkv.
func TestSDPABackwardGraph(t *testing.T) {
	f := newFakeDNN()
	h, st := fakeDNNHandle(t, f)
	const B, NH, T, HS = 1, 2, 5, 32
	const C = NH * HS
	p, err := h.NewSDPA(SDPAParams{B: B, NH: NH, T: T, HS: HS, DType: R16F, Backward: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pw:mul", "reduce:add", "pw:mul", "matmul", "pw:mul", "pw:sub", "pw:index", "pw:index", "pw:ge", "pw:select",
		"pw:exp", "reshape", "matmul", "matmul", "pw:sub", "pw:mul", "pw:mul", "reshape", "matmul", "reshape", "matmul", "pw:identity"}
	if got := f.ops(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ops\n%v\nwant\n%v", got, want)
	}
	if d := f.tensor(t, sdpaV); !slices.Equal(f.i64s(d, dnnAttrTensorDims), []int64{B, NH, HS, T}) || DNNDataType(f.i32(d, dnnAttrTensorDataType)) != DNNHalf {
		t.Errorf("V is not the f16 transposed view: %v", f.i64s(d, dnnAttrTensorDims))
	}
	wantWS := uint64(1024 + 256 + B*NH*T*HS*4) // plan 1000 → 1024, row sums 40 B → 256
	if p.WorkspaceBytes != wantWS {
		t.Errorf("workspace %d, want %d", p.WorkspaceBytes, wantWS)
	}
	a := SDPAArgs{QKV: 0x10000, Out: 0x20000, Stats: 0x30000, DOut: 0x50000, DQKV: 0x60000, Workspace: 0x100000, WorkspaceBytes: wantWS}
	if err := p.Run(st, a); err != nil {
		t.Fatal(err)
	}
	pack := f.packs[0]
	uids, ptrs := bytesI64(pack[dnnAttrPackUIDs]), bytesI64(pack[dnnAttrPackPointers])
	byUID := map[int64]int64{}
	for i := range uids {
		byUID[uids[i]] = ptrs[i]
	}
	if byUID[sdpaDQ] != 0x60000 || byUID[sdpaDK] != 0x60000+2*C || byUID[sdpaDV] != 0x60000+4*C || byUID[sdpaDO] != 0x50000 ||
		byUID[sdpaDotSum] != 0x100000+1024 || byUID[sdpaDQAcc] != 0x100000+1024+256 {
		t.Errorf("variant pack %v", byUID)
	}
	a.DQKV = 0
	if err := p.Run(st, a); err == nil {
		t.Error("backward without dqkv accepted")
	}
}

// TestSDPANoPlan: heuristics without a configuration are an error that
// says so, and cuDNN's last error string reaches the message.
func TestSDPANoPlan(t *testing.T) {
	f := newFakeDNN()
	f.noConfigs = true
	f.failHeur = dnnHeurA
	h, _ := fakeDNNHandle(t, f)
	_, err := h.NewSDPA(SDPAParams{B: 1, NH: 1, T: 1, HS: 64, DType: R16BF})
	if err == nil || !strings.Contains(err.Error(), "no execution plan") || !strings.Contains(err.Error(), "fake: no engine for mode A") ||
		!strings.Contains(err.Error(), "no engine configurations") {
		t.Fatalf("err = %v", err)
	}
}

// TestDNNDebug: DRUTO_CUDNN_DEBUG=1 leaves the error as it is (and prints it).
func TestDNNDebug(t *testing.T) {
	t.Setenv(EnvDNNDebug, "1")
	err := dnnError(Error{Call: "cudnnBackendFinalize", Code: 3000, Name: "CUDNN_STATUS_NOT_SUPPORTED"}, " why \n")
	var e Error
	if !errors.As(err, &e) || e.Code != 3000 || !strings.HasSuffix(err.Error(), ": why") {
		t.Fatalf("err = %v", err)
	}
}

// TestSDPAZeroAccumulator: before cuDNN 9.6 the backward's run zeroes the
// dQ accumulator first (cudnn-frontend's memset); from 9.6 on it does not.
func TestSDPAZeroAccumulator(t *testing.T) {
	for _, c := range []struct {
		ver  uint64
		want int
	}{{90500, 1}, {91400, 0}} {
		f := newFakeDNN()
		f.ver = c.ver
		h, st, drv := fakeDNNHandleDriver(t, f)
		p, err := h.NewSDPA(SDPAParams{B: 1, NH: 1, T: 3, HS: 64, DType: R16BF, Backward: true})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Run(st, SDPAArgs{QKV: 0x10000, Out: 0x20000, Stats: 0x30000, DOut: 0x50000, DQKV: 0x60000, Workspace: 0x100000, WorkspaceBytes: p.WorkspaceBytes})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		drv.mu.Lock()
		for _, call := range drv.calls {
			if call == "cuMemsetD32Async" {
				n++
			}
		}
		drv.mu.Unlock()
		if n != c.want {
			t.Errorf("cuDNN %d: %d memsets, want %d", c.ver, n, c.want)
		}
		if err := p.Destroy(); err != nil {
			t.Error(err)
		}
	}
}
