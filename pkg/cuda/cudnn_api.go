package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"
)

// cudnn_api.go: cuDNN 9 (libcudnn.so.9), loaded at run time like cuBLASLt,
// and a small builder over its backend (graph) API: tensors, pointwise,
// reduction, matmul and reshape operations, an operation graph, the
// engine heuristics, an execution plan and its variant pack. cudnn.go
// implements the primitive calls over dlsym'd function pointers; the build
// without cgo has none (cudnn_nocgo.go). cudnn_sdpa.go builds the fused
// attention graphs on it. cuDNN is not loaded by Load: the GPU device
// loads it itself when it picks an attention backend.

// dnnAPI is libcudnn; every call except version runs on the owning
// Context's thread.
type dnnAPI interface {
	version() uint64
	create() (uintptr, error)
	destroy(h uintptr) error
	setStream(h, s uintptr) error
	createDescriptor(kind int) (uintptr, error)
	destroyDescriptor(d uintptr) error
	finalize(d uintptr) error
	setAttribute(d uintptr, name, typ int, n int64, v unsafe.Pointer) error
	// getAttribute reads up to req elements into v and returns how many
	// the attribute holds.
	getAttribute(d uintptr, name, typ int, req int64, v unsafe.Pointer) (int64, error)
	execute(h, plan, pack uintptr) error
}

var specDNN = libSpec{"cudnn", []string{"libcudnn.so.9"}, ErrLibraryNotFound}

// EnvDNNDebug ("1") makes every failing cuDNN call print its status and
// cuDNN's last error string (cudnnGetLastErrorString) to stderr as it
// fails. cuDNN's own log: CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr.
const EnvDNNDebug = "DRUTO_CUDNN_DEBUG"

// dnnError adds cuDNN's last error string to a failed call's Error, and
// prints it under DRUTO_CUDNN_DEBUG=1.
func dnnError(e Error, last string) error {
	var err error = e
	if last = strings.TrimSpace(last); last != "" {
		err = fmt.Errorf("%w: %s", e, last)
	}
	if v := os.Getenv(EnvDNNDebug); v != "" && v != "0" && v != "false" {
		fmt.Fprintf(os.Stderr, "druto cudnn debug: %v\n", err)
	}
	return err
}

// DNN is the loaded cuDNN library.
type DNN struct {
	api  dnnAPI
	info LibInfo
	ver  uint64 // cudnnGetVersion: major·10000 + minor·100 + patch (cuDNN 9)
}

// MinDNNVersion is the oldest cuDNN druto uses: 9.0.0 (the backend API's
// attribute set and cudnnGetLastErrorString of cuDNN 9).
const MinDNNVersion = 90000

// LoadDNN finds and loads libcudnn.so.9. An absent library is an error
// wrapping ErrLibraryNotFound; one older than 9.0 is an error too.
func LoadDNN(o LoadOptions) (*DNN, error) {
	lib, info, err := find(specDNN, o)
	if err != nil {
		return nil, err
	}
	api, err := newDNNAPI(lib)
	if err != nil {
		return nil, err
	}
	return newDNN(api, info)
}

func newDNN(api dnnAPI, info LibInfo) (*DNN, error) {
	v := api.version()
	info.Version = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	if v < MinDNNVersion {
		return nil, fmt.Errorf("%w: cudnn %s at %s is older than 9.0.0", ErrLibraryNotFound, info.Version, info.Path)
	}
	return &DNN{api: api, info: info, ver: v}, nil
}

// Info describes where cuDNN was found and its version.
func (l *DNN) Info() LibInfo { return l.info }

// Version returns cudnnGetVersion (major·10000 + minor·100 + patch).
func (l *DNN) Version() uint64 { return l.ver }

// DNNHandle is a cuDNN handle in one context.
type DNNHandle struct {
	l *DNN
	c *Context
	h uintptr
}

// NewHandle creates a cuDNN handle in context c.
func (l *DNN) NewHandle(c *Context) (*DNNHandle, error) {
	h := &DNNHandle{l: l, c: c}
	if err := c.Do(func() error {
		var err error
		h.h, err = l.api.create()
		return err
	}); err != nil {
		return nil, err
	}
	return h, nil
}

// Destroy destroys the handle.
func (h *DNNHandle) Destroy() error {
	return h.c.Do(func() error { return h.l.api.destroy(h.h) })
}

// Numeric values of the backend API, from cuDNN 9's cudnn_graph.h (in 8.x:
// cudnn_backend.h): every one below checked against the cudnn_graph.h of
// cuDNN 9.14.0 (the H200 machine's), and against a bindgen-generated Rust
// copy of a cuDNN 9 header and a C copy of the 8.9/9.0 enums.

// cudnnBackendDescriptorType_t
const (
	dnnPointwiseDesc   = 0
	dnnEngineCfgDesc   = 3
	dnnEngineHeurDesc  = 4
	dnnPlanDesc        = 5
	dnnOpPointwiseDesc = 13
	dnnOpGraphDesc     = 15
	dnnVariantPackDesc = 16
	dnnTensorDesc      = 17
	dnnMatmulDesc      = 18
	dnnOpMatmulDesc    = 19
	dnnReductionDesc   = 21
	dnnOpReductionDesc = 22
	dnnOpReshapeDesc   = 31
)

// cudnnBackendAttributeType_t
const (
	dnnTypeHandle     = 0
	dnnTypeDataType   = 1
	dnnTypeBoolean    = 2
	dnnTypeInt64      = 3
	dnnTypeFloat      = 4
	dnnTypeVoidPtr    = 6
	dnnTypeHeurMode   = 8
	dnnTypePointwise  = 14
	dnnTypeDescriptor = 15
	dnnTypeReduction  = 18
)

// cudnnBackendAttributeName_t
const (
	dnnAttrPointwiseMode     = 0
	dnnAttrPointwiseMathPrec = 1
	dnnAttrPointwiseAxis     = 9
	dnnAttrHeurMode          = 200
	dnnAttrHeurOpGraph       = 201
	dnnAttrHeurResults       = 202
	dnnAttrPlanHandle        = 400
	dnnAttrPlanEngineCfg     = 401
	dnnAttrPlanWorkspaceSize = 402
	dnnAttrOpPointwiseDesc   = 750
	dnnAttrOpPointwiseX      = 751
	dnnAttrOpPointwiseB      = 752
	dnnAttrOpPointwiseY      = 753
	dnnAttrOpPointwiseAlpha1 = 754
	dnnAttrOpPointwiseAlpha2 = 755
	dnnAttrOpPointwiseT      = 758
	dnnAttrOpGraphHandle     = 800
	dnnAttrOpGraphOps        = 801
	dnnAttrTensorAlignment   = 900
	dnnAttrTensorDataType    = 901
	dnnAttrTensorDims        = 902
	dnnAttrTensorStrides     = 903
	dnnAttrTensorUID         = 906
	dnnAttrTensorVirtual     = 907
	dnnAttrTensorByValue     = 908
	dnnAttrPackUIDs          = 1000
	dnnAttrPackPointers      = 1001
	dnnAttrPackWorkspace     = 1003
	dnnAttrMatmulCompType    = 1500
	dnnAttrOpMatmulA         = 1520
	dnnAttrOpMatmulB         = 1521
	dnnAttrOpMatmulC         = 1522
	dnnAttrOpMatmulDesc      = 1523
	dnnAttrReductionOperator = 1600
	dnnAttrReductionCompType = 1601
	dnnAttrOpReductionX      = 1610
	dnnAttrOpReductionY      = 1611
	dnnAttrOpReductionDesc   = 1612
	dnnAttrOpReshapeX        = 2200
	dnnAttrOpReshapeY        = 2201
)

// cudnnBackendHeurMode_t
const (
	dnnHeurFallback = 2
	dnnHeurA        = 3
)

// DNNDataType is a cudnnDataType_t.
type DNNDataType int32

// Element types of cuDNN tensors (cudnnDataType_t).
const (
	DNNFloat    DNNDataType = 0  // CUDNN_DATA_FLOAT
	DNNHalf     DNNDataType = 2  // CUDNN_DATA_HALF
	DNNInt32    DNNDataType = 4  // CUDNN_DATA_INT32
	DNNBFloat16 DNNDataType = 9  // CUDNN_DATA_BFLOAT16
	DNNBoolean  DNNDataType = 11 // CUDNN_DATA_BOOLEAN
)

func (t DNNDataType) size() int64 {
	switch t {
	case DNNHalf, DNNBFloat16:
		return 2
	case DNNFloat, DNNInt32:
		return 4
	case DNNBoolean:
		return 1
	}
	return 0
}

// DNNPointwise is a cudnnPointwiseMode_t.
type DNNPointwise int32

// Pointwise modes.
const (
	DNNAdd          DNNPointwise = 0
	DNNMul          DNNPointwise = 1
	DNNDiv          DNNPointwise = 6
	DNNSub          DNNPointwise = 9
	DNNExp          DNNPointwise = 13
	DNNLog          DNNPointwise = 15
	DNNIdentity     DNNPointwise = 21
	DNNCmpGE        DNNPointwise = 303
	DNNGenIndex     DNNPointwise = 501
	DNNBinarySelect DNNPointwise = 601
)

// DNNReduce is a cudnnReduceTensorOp_t.
type DNNReduce int32

// Reductions.
const (
	DNNReduceAdd DNNReduce = 0
	DNNReduceMax DNNReduce = 3
)

// DNNTensor describes one tensor of a graph. Dims and Strides are in
// elements, 1 to 8 of them; UID names the tensor in the variant pack (non
// zero, unique in the graph). Virtual tensors live inside the fused kernel
// and have no memory; by-value tensors are host scalars whose value the
// variant pack points to.
type DNNTensor struct {
	UID           int64
	Dims, Strides []int64
	DType         DNNDataType
	Virtual       bool
	ByValue       bool
	Alignment     int64 // bytes; 0 means 16
}

// validate checks a tensor description without calling cuDNN.
func (t DNNTensor) validate() error {
	if t.UID <= 0 {
		return fmt.Errorf("cuda: cudnn tensor: uid %d must be positive", t.UID)
	}
	if len(t.Dims) == 0 || len(t.Dims) > 8 || len(t.Dims) != len(t.Strides) {
		return fmt.Errorf("cuda: cudnn tensor %d: %d dims and %d strides (want 1 to 8 of each, as many strides as dims)", t.UID, len(t.Dims), len(t.Strides))
	}
	for i := range t.Dims {
		if t.Dims[i] <= 0 || t.Strides[i] <= 0 {
			return fmt.Errorf("cuda: cudnn tensor %d: dims %v strides %v must be positive", t.UID, t.Dims, t.Strides)
		}
	}
	if t.DType.size() == 0 {
		return fmt.Errorf("cuda: cudnn tensor %d: unsupported data type %d", t.UID, t.DType)
	}
	if t.Virtual && t.ByValue {
		return fmt.Errorf("cuda: cudnn tensor %d: virtual and by-value at once", t.UID)
	}
	return nil
}

// dnnGraph builds backend descriptors, keeping the first error and every
// descriptor made so that one destroy frees them all. Every method runs on
// the context's thread.
type dnnGraph struct {
	api     dnnAPI
	err     error
	descs   []uintptr
	tensors map[int64]uintptr
	ops     []uintptr
}

func newDNNGraph(api dnnAPI) *dnnGraph {
	return &dnnGraph{api: api, tensors: map[int64]uintptr{}}
}

// fail records the first error, naming what was being built.
func (g *dnnGraph) fail(what string, err error) {
	if g.err == nil && err != nil {
		g.err = fmt.Errorf("%s: %w", what, err)
	}
}

// create makes a descriptor (0 after an error).
func (g *dnnGraph) create(kind int, what string) uintptr {
	if g.err != nil {
		return 0
	}
	d, err := g.api.createDescriptor(kind)
	if err != nil {
		g.fail(what, err)
		return 0
	}
	g.descs = append(g.descs, d)
	return d
}

func (g *dnnGraph) set(d uintptr, what string, name, typ int, n int64, v unsafe.Pointer) {
	if g.err != nil {
		return
	}
	g.fail(fmt.Sprintf("%s: attribute %d", what, name), g.api.setAttribute(d, name, typ, n, v))
}

func (g *dnnGraph) setI64(d uintptr, what string, name int, v ...int64) {
	g.set(d, what, name, dnnTypeInt64, int64(len(v)), unsafe.Pointer(&v[0]))
}

func (g *dnnGraph) setI32(d uintptr, what string, name, typ int, v int32) {
	g.set(d, what, name, typ, 1, unsafe.Pointer(&v))
}

func (g *dnnGraph) setDesc(d uintptr, what string, name int, v ...uintptr) {
	g.set(d, what, name, dnnTypeDescriptor, int64(len(v)), unsafe.Pointer(&v[0]))
}

func (g *dnnGraph) finalize(d uintptr, what string) {
	if g.err != nil {
		return
	}
	g.fail(what+": finalize", g.api.finalize(d))
}

// tensor makes (once per uid) and returns a tensor descriptor.
func (g *dnnGraph) tensor(t DNNTensor) uintptr {
	if g.err != nil {
		return 0
	}
	if d, ok := g.tensors[t.UID]; ok {
		return d
	}
	if err := t.validate(); err != nil {
		g.err = err
		return 0
	}
	what := fmt.Sprintf("tensor %d", t.UID)
	d := g.create(dnnTensorDesc, what)
	align := t.Alignment
	if align == 0 {
		align = 16
	}
	g.setI32(d, what, dnnAttrTensorDataType, dnnTypeDataType, int32(t.DType))
	g.setI64(d, what, dnnAttrTensorDims, t.Dims...)
	g.setI64(d, what, dnnAttrTensorStrides, t.Strides...)
	g.setI64(d, what, dnnAttrTensorUID, t.UID)
	g.setI64(d, what, dnnAttrTensorAlignment, align)
	if t.Virtual {
		v := true
		g.set(d, what, dnnAttrTensorVirtual, dnnTypeBoolean, 1, unsafe.Pointer(&v))
	}
	if t.ByValue {
		v := true
		g.set(d, what, dnnAttrTensorByValue, dnnTypeBoolean, 1, unsafe.Pointer(&v))
	}
	g.finalize(d, what)
	g.tensors[t.UID] = d
	return d
}

// pointwise adds y = mode(x[, b[, t]]) computed in prec; axis (GEN_INDEX)
// is used where >= 0.
func (g *dnnGraph) pointwise(name string, mode DNNPointwise, prec DNNDataType, axis int64, y, x uintptr, bt ...uintptr) {
	if g.err != nil {
		return
	}
	pw := g.create(dnnPointwiseDesc, name)
	g.setI32(pw, name, dnnAttrPointwiseMode, dnnTypePointwise, int32(mode))
	g.setI32(pw, name, dnnAttrPointwiseMathPrec, dnnTypeDataType, int32(prec))
	if axis >= 0 {
		g.setI64(pw, name, dnnAttrPointwiseAxis, axis)
	}
	g.finalize(pw, name)
	op := g.create(dnnOpPointwiseDesc, name)
	g.setDesc(op, name, dnnAttrOpPointwiseDesc, pw)
	g.setDesc(op, name, dnnAttrOpPointwiseX, x)
	if len(bt) > 0 {
		g.setDesc(op, name, dnnAttrOpPointwiseB, bt[0])
	}
	if len(bt) > 1 {
		g.setDesc(op, name, dnnAttrOpPointwiseT, bt[1])
	}
	g.setDesc(op, name, dnnAttrOpPointwiseY, y)
	one := float32(1) // alpha1 and alpha2, set as cudnn-frontend sets them
	g.set(op, name, dnnAttrOpPointwiseAlpha1, dnnTypeFloat, 1, unsafe.Pointer(&one))
	g.set(op, name, dnnAttrOpPointwiseAlpha2, dnnTypeFloat, 1, unsafe.Pointer(&one))
	g.finalize(op, name)
	g.ops = append(g.ops, op)
}

// reduction adds y = reduce(x) over the dimensions where y has size 1.
func (g *dnnGraph) reduction(name string, mode DNNReduce, y, x uintptr) {
	if g.err != nil {
		return
	}
	r := g.create(dnnReductionDesc, name)
	g.setI32(r, name, dnnAttrReductionOperator, dnnTypeReduction, int32(mode))
	g.setI32(r, name, dnnAttrReductionCompType, dnnTypeDataType, int32(DNNFloat))
	g.finalize(r, name)
	op := g.create(dnnOpReductionDesc, name)
	g.setDesc(op, name, dnnAttrOpReductionDesc, r)
	g.setDesc(op, name, dnnAttrOpReductionX, x)
	g.setDesc(op, name, dnnAttrOpReductionY, y)
	g.finalize(op, name)
	g.ops = append(g.ops, op)
}

// matmul adds c = a·b (batched over the leading dims), fp32 compute.
func (g *dnnGraph) matmul(name string, c, a, b uintptr) {
	if g.err != nil {
		return
	}
	m := g.create(dnnMatmulDesc, name)
	g.setI32(m, name, dnnAttrMatmulCompType, dnnTypeDataType, int32(DNNFloat))
	g.finalize(m, name)
	op := g.create(dnnOpMatmulDesc, name)
	g.setDesc(op, name, dnnAttrOpMatmulA, a)
	g.setDesc(op, name, dnnAttrOpMatmulB, b)
	g.setDesc(op, name, dnnAttrOpMatmulC, c)
	g.setDesc(op, name, dnnAttrOpMatmulDesc, m)
	g.finalize(op, name)
	g.ops = append(g.ops, op)
}

// reshape adds y = x viewed with y's dims and strides.
func (g *dnnGraph) reshape(name string, y, x uintptr) {
	if g.err != nil {
		return
	}
	op := g.create(dnnOpReshapeDesc, name)
	g.setDesc(op, name, dnnAttrOpReshapeX, x)
	g.setDesc(op, name, dnnAttrOpReshapeY, y)
	g.finalize(op, name)
	g.ops = append(g.ops, op)
}

// plan finalizes the operation graph on handle h, asks the heuristics
// (mode A, then FALLBACK) for engine configurations and returns the first
// execution plan that finalizes, with its workspace size.
func (g *dnnGraph) plan(h uintptr) (plan uintptr, workspace int64) {
	if g.err != nil {
		return 0, 0
	}
	if len(g.ops) == 0 {
		g.err = errors.New("cuda: cudnn graph: no operations")
		return 0, 0
	}
	og := g.create(dnnOpGraphDesc, "operation graph")
	g.set(og, "operation graph", dnnAttrOpGraphHandle, dnnTypeHandle, 1, unsafe.Pointer(&h))
	g.setDesc(og, "operation graph", dnnAttrOpGraphOps, g.ops...)
	g.finalize(og, "operation graph")
	if g.err != nil {
		return 0, 0
	}
	var tried []string
	for _, mode := range []int32{dnnHeurA, dnnHeurFallback} {
		what := fmt.Sprintf("engine heuristics (mode %d)", mode)
		heur, err := g.api.createDescriptor(dnnEngineHeurDesc)
		if err != nil {
			g.fail(what, err)
			return 0, 0
		}
		g.descs = append(g.descs, heur)
		first := g.err
		g.setDesc(heur, what, dnnAttrHeurOpGraph, og)
		g.setI32(heur, what, dnnAttrHeurMode, dnnTypeHeurMode, mode)
		g.finalize(heur, what)
		if g.err != nil {
			tried = append(tried, g.err.Error())
			g.err = first
			continue
		}
		const maxCfgs = 8
		var cfgs [maxCfgs]uintptr
		for i := range cfgs {
			if cfgs[i] = g.create(dnnEngineCfgDesc, "engine config"); g.err != nil {
				return 0, 0
			}
		}
		n, err := g.api.getAttribute(heur, dnnAttrHeurResults, dnnTypeDescriptor, maxCfgs, unsafe.Pointer(&cfgs[0]))
		if err != nil {
			tried = append(tried, what+": results: "+err.Error())
			continue
		}
		for _, cfg := range cfgs[:min(int(n), maxCfgs)] {
			p, err := g.api.createDescriptor(dnnPlanDesc)
			if err != nil {
				g.fail("execution plan", err)
				return 0, 0
			}
			g.descs = append(g.descs, p)
			err = g.api.setAttribute(p, dnnAttrPlanHandle, dnnTypeHandle, 1, unsafe.Pointer(&h))
			if err == nil {
				c := cfg
				err = g.api.setAttribute(p, dnnAttrPlanEngineCfg, dnnTypeDescriptor, 1, unsafe.Pointer(&c))
			}
			if err == nil {
				err = g.api.finalize(p)
			}
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s: engine config: %v", what, err))
				continue
			}
			var ws int64
			if _, err := g.api.getAttribute(p, dnnAttrPlanWorkspaceSize, dnnTypeInt64, 1, unsafe.Pointer(&ws)); err != nil {
				g.fail("execution plan: workspace size", err)
				return 0, 0
			}
			return p, ws
		}
		if n == 0 {
			tried = append(tried, what+": no engine configurations")
		}
	}
	g.err = fmt.Errorf("cuda: cudnn: no execution plan for the graph: %s", strings.Join(tried, "; "))
	return 0, 0
}

// destroy frees every descriptor made, newest first.
func (g *dnnGraph) destroy() error {
	var errs []error
	for i := len(g.descs) - 1; i >= 0; i-- {
		errs = append(errs, g.api.destroyDescriptor(g.descs[i]))
	}
	g.descs, g.ops, g.tensors = nil, nil, map[int64]uintptr{}
	return errors.Join(errs...)
}

// dnnExecute makes the variant pack of (uids, ptrs) and workspace and runs
// plan on handle h; on the context's thread. The pointers are device
// addresses, or host addresses of by-value scalars (pinned Go memory that
// must stay valid for the call).
func dnnExecute(api dnnAPI, h, plan uintptr, uids []int64, ptrs []uintptr, ws DevicePtr) error {
	if len(uids) != len(ptrs) || len(uids) == 0 {
		return fmt.Errorf("cuda: cudnn execute: %d uids and %d pointers", len(uids), len(ptrs))
	}
	pack, err := api.createDescriptor(dnnVariantPackDesc)
	if err != nil {
		return fmt.Errorf("cuda: cudnn variant pack: %w", err)
	}
	defer api.destroyDescriptor(pack)
	w := uintptr(ws)
	for _, s := range []struct {
		name, typ int
		n         int64
		v         unsafe.Pointer
	}{
		{dnnAttrPackUIDs, dnnTypeInt64, int64(len(uids)), unsafe.Pointer(&uids[0])},
		{dnnAttrPackPointers, dnnTypeVoidPtr, int64(len(ptrs)), unsafe.Pointer(&ptrs[0])},
		{dnnAttrPackWorkspace, dnnTypeVoidPtr, 1, unsafe.Pointer(&w)},
	} {
		if err := api.setAttribute(pack, s.name, s.typ, s.n, s.v); err != nil {
			return fmt.Errorf("cuda: cudnn variant pack: attribute %d: %w", s.name, err)
		}
	}
	if err := api.finalize(pack); err != nil {
		return fmt.Errorf("cuda: cudnn variant pack: %w", err)
	}
	return api.execute(h, plan, pack)
}

// dnnNegInf is the masked score: -inf from cuDNN 9.10 on, the lowest
// finite float before (what cudnn-frontend passes to each version).
func dnnNegInf(version uint64) float32 {
	if version < 91000 {
		return -math.MaxFloat32
	}
	return float32(math.Inf(-1))
}
