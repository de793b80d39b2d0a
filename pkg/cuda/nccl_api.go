package cuda

import (
	"errors"
	"fmt"
	"os"
)

// nccl_api.go: NCCL (libnccl.so.2), the collectives of data-parallel
// training between GPUs, with the Go-typed API over the primitive calls of
// ncclAPI. nccl.go implements them over dlsym'd function pointers; the build
// without cgo has none (nccl_nocgo.go). NCCL is not loaded by Load: only a
// run of more than one GPU process needs it, and it calls LoadNCCL itself.

// ncclAPI is libnccl. version, uniqueID and lastError need no context;
// commInitRank, allReduce, groupStart, groupEnd, commDestroy and commAbort
// run on the owning Context's thread (ncclGroupStart and ncclGroupEnd are
// per thread, and NCCL takes the current CUDA context from the thread).
type ncclAPI interface {
	version() (int, error)
	uniqueID() (NCCLUniqueID, error)
	commInitRank(world int, id NCCLUniqueID, rank int) (uintptr, error)
	allReduce(send, recv DevicePtr, count uint64, dt NCCLDataType, op NCCLOp, comm, stream uintptr) error
	groupStart() error
	groupEnd() error
	commDestroy(comm uintptr) error
	commAbort(comm uintptr) error
	commAsyncError(comm uintptr) error
	// lastError returns NCCL's description of the last failure on comm (0:
	// any), "" when the library cannot say (before NCCL 2.13).
	lastError(comm uintptr) string
}

var specNCCL = libSpec{"nccl", []string{"libnccl.so.2"}, ErrLibraryNotFound}

// EnvNCCLNVLS is NCCL's switch for NVLink SHARP (multicast) collectives.
// LoadNCCL and NewComm set it to "0" unless it is already set: the test
// machines must keep multicast off, and data-parallel all-reduce of a GPT's
// gradients does not need it. Set it to "1" before starting to opt in.
const EnvNCCLNVLS = "NCCL_NVLS_ENABLE"

// NCCLUniqueIDBytes is the size of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
const NCCLUniqueIDBytes = 128

// NCCLUniqueID is the id rank 0 makes with UniqueID and every rank passes to
// NewComm; it names one communicator and travels between processes as bytes.
type NCCLUniqueID [NCCLUniqueIDBytes]byte

// NCCLDataType is an ncclDataType_t.
type NCCLDataType int

// Element types of NCCL collectives.
const (
	NCCLFloat16  NCCLDataType = 6 // ncclFloat16
	NCCLFloat32  NCCLDataType = 7 // ncclFloat32
	NCCLBFloat16 NCCLDataType = 9 // ncclBfloat16 (NCCL 2.10 and CUDA 11+)
)

// size returns the bytes of one element.
func (t NCCLDataType) size() int {
	switch t {
	case NCCLFloat16, NCCLBFloat16:
		return 2
	case NCCLFloat32:
		return 4
	}
	return 0
}

// NCCLOp is an ncclRedOp_t.
type NCCLOp int

// Reductions of NCCLComm.AllReduce.
const (
	NCCLSum NCCLOp = 0 // ncclSum
	NCCLAvg NCCLOp = 4 // ncclAvg: the sum divided by the number of ranks (NCCL 2.10+)
)

// ncclAvgVersion is the first NCCL version with ncclAvg (2.10.0).
const ncclAvgVersion = 21000

// ncclResultNames names the ncclResult_t codes.
var ncclResultNames = map[int]string{
	0: "ncclSuccess",
	1: "ncclUnhandledCudaError",
	2: "ncclSystemError",
	3: "ncclInternalError",
	4: "ncclInvalidArgument",
	5: "ncclInvalidUsage",
	6: "ncclRemoteError",
	7: "ncclInProgress",
}

// NCCL is the loaded NCCL library.
type NCCL struct {
	api     ncclAPI
	info    LibInfo
	version int
}

// LoadNCCL finds and loads libnccl.so.2 (searched as the package comment
// says for every library) and reads its version. It sets NCCL_NVLS_ENABLE=0
// first unless the variable is set (see EnvNCCLNVLS).
func LoadNCCL(o LoadOptions) (*NCCL, error) {
	if err := disableNVLS(); err != nil {
		return nil, err
	}
	lib, info, err := find(specNCCL, o)
	if err != nil {
		return nil, err
	}
	api, err := newNCCLAPI(lib)
	if err != nil {
		return nil, err
	}
	return newNCCL(api, info)
}

// newNCCL reads the version of a resolved library (split out for fakes).
func newNCCL(api ncclAPI, info LibInfo) (*NCCL, error) {
	v, err := api.version()
	if err != nil {
		return nil, err
	}
	info.Version = ncclVersionString(v)
	return &NCCL{api: api, info: info, version: v}, nil
}

// disableNVLS sets NCCL_NVLS_ENABLE=0 unless it is set. In a cgo build
// os.Setenv also sets the C environment, where NCCL reads it.
func disableNVLS() error {
	if _, set := os.LookupEnv(EnvNCCLNVLS); set {
		return nil
	}
	if err := os.Setenv(EnvNCCLNVLS, "0"); err != nil {
		return fmt.Errorf("cuda: set %s=0: %w", EnvNCCLNVLS, err)
	}
	return nil
}

// ncclVersionString formats ncclGetVersion's code: 1000·major + 100·minor +
// patch up to 2.8, 10000·major + 100·minor + patch from 2.9 on.
func ncclVersionString(v int) string {
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

// Info describes where NCCL was found; Version is e.g. "2.27.3".
func (n *NCCL) Info() LibInfo { return n.info }

// Version returns ncclGetVersion's code, e.g. 22703 for 2.27.3.
func (n *NCCL) Version() int { return n.version }

// UniqueID makes the id of a new communicator (rank 0 calls it and sends
// the bytes to the others). It needs no CUDA context.
func (n *NCCL) UniqueID() (NCCLUniqueID, error) {
	id, err := n.api.uniqueID()
	if err != nil {
		return NCCLUniqueID{}, n.detail(err, 0)
	}
	return id, nil
}

// detail appends NCCL's own description of the failure, when it has one.
func (n *NCCL) detail(err error, comm uintptr) error {
	if msg := n.api.lastError(comm); msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// NCCLComm is one rank's communicator, bound to the CUDA context it was made
// in: its calls run on that context's thread.
type NCCLComm struct {
	n           *NCCL
	c           *Context
	h           uintptr
	world, rank int
}

// NewComm joins communicator id as rank of world ranks on c's device
// (ncclCommInitRank on c's thread). It returns when every rank has joined,
// so all ranks must call it. It sets NCCL_NVLS_ENABLE=0 first unless set.
func (n *NCCL) NewComm(c *Context, world, rank int, id NCCLUniqueID) (*NCCLComm, error) {
	if c == nil {
		return nil, errors.New("cuda: NCCL NewComm with a nil context")
	}
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("cuda: NCCL NewComm: rank %d of %d ranks (want 0 <= rank < ranks)", rank, world)
	}
	if id == (NCCLUniqueID{}) {
		return nil, errors.New("cuda: NCCL NewComm with an empty unique id (rank 0 makes it with UniqueID)")
	}
	if err := disableNVLS(); err != nil {
		return nil, err
	}
	m := &NCCLComm{n: n, c: c, world: world, rank: rank}
	err := c.Do(func() error {
		var e error
		m.h, e = n.api.commInitRank(world, id, rank)
		return e
	})
	if err != nil {
		return nil, n.detail(err, 0)
	}
	return m, nil
}

// Rank returns this communicator's rank.
func (m *NCCLComm) Rank() int { return m.rank }

// World returns the number of ranks.
func (m *NCCLComm) World() int { return m.world }

// AllReduce queues an all-reduce of count elements of type dt from send
// into recv (the same address for in place) on stream s (nil: the legacy
// default stream) of the communicator's context. Every rank must make the
// same calls in the same order. It returns when the work is queued.
func (m *NCCLComm) AllReduce(send, recv DevicePtr, count int, dt NCCLDataType, op NCCLOp, s *Stream) error {
	if count == 0 {
		return nil
	}
	switch {
	case m.h == 0:
		return errors.New("cuda: NCCL AllReduce on a destroyed communicator")
	case count < 0:
		return fmt.Errorf("cuda: NCCL AllReduce of %d elements", count)
	case send == 0 || recv == 0:
		return errors.New("cuda: NCCL AllReduce with a null buffer")
	case dt.size() == 0:
		return fmt.Errorf("cuda: NCCL AllReduce of unknown data type %d", dt)
	case op != NCCLSum && op != NCCLAvg:
		return fmt.Errorf("cuda: NCCL AllReduce with unknown reduction %d", op)
	case op == NCCLAvg && m.n.version < ncclAvgVersion:
		return fmt.Errorf("cuda: ncclAvg needs NCCL 2.10.0 or newer, %s is %s: use NCCLSum and scale, or update NCCL",
			m.n.info.Path, m.n.info.Version)
	case s != nil && s.c != m.c:
		return errors.New("cuda: NCCL AllReduce on a stream of another context")
	}
	var sh uintptr
	if s != nil {
		sh = s.h
	}
	err := m.c.Do(func() error { return m.n.api.allReduce(send, recv, uint64(count), dt, op, m.h, sh) })
	if err != nil {
		return m.n.detail(err, m.h)
	}
	return nil
}

// Group runs fn between ncclGroupStart and ncclGroupEnd on the context's
// thread, so that the collectives fn queues are launched together. The
// group is ended even when fn fails; the first error is returned.
func (m *NCCLComm) Group(fn func() error) error {
	err := m.c.Do(func() error {
		if err := m.n.api.groupStart(); err != nil {
			return err
		}
		ferr := fn()
		return errors.Join(ferr, m.n.api.groupEnd())
	})
	if err != nil {
		return m.n.detail(err, m.h)
	}
	return nil
}

// AsyncError returns an error the communicator met in queued work (a peer
// lost, a network failure), nil when there is none.
func (m *NCCLComm) AsyncError() error {
	if m.h == 0 {
		return nil
	}
	if err := m.n.api.commAsyncError(m.h); err != nil {
		return m.n.detail(err, m.h)
	}
	return nil
}

// Destroy frees the communicator once its queued work is done.
func (m *NCCLComm) Destroy() error { return m.end("destroy", m.n.api.commDestroy) }

// Abort frees the communicator at once, abandoning queued work (after a
// peer failed: Destroy would wait for it).
func (m *NCCLComm) Abort() error { return m.end("abort", m.n.api.commAbort) }

func (m *NCCLComm) end(what string, fn func(uintptr) error) error {
	if m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	if err := m.c.Do(func() error { return fn(h) }); err != nil {
		return fmt.Errorf("cuda: NCCL %s: %w", what, err)
	}
	return nil
}
