//go:build cgo && linux

package cuda

// nccl.go: libnccl.so.2 (NCCL 2.x) through dlsym'd function pointers. The
// unique id is a 128-byte struct passed by value to ncclCommInitRank; the
// shims copy it between Go bytes and the C struct.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;
typedef uintptr_t ncclComm_t;
typedef uintptr_t cudaStream_t;
typedef uintptr_t dptr;
typedef struct { char internal[128]; } ncclUniqueId;

#define T(name) ((name##_t)fn)

typedef ncclResult_t (*ncclGetVersion_t)(int*);
static ncclResult_t c_ncclGetVersion(void* fn, int* v) { return T(ncclGetVersion)(v); }
typedef ncclResult_t (*ncclGetUniqueId_t)(ncclUniqueId*);
static ncclResult_t c_ncclGetUniqueId(void* fn, char* out) {
	ncclUniqueId id;
	memset(&id, 0, sizeof id);
	ncclResult_t r = T(ncclGetUniqueId)(&id);
	memcpy(out, id.internal, sizeof id.internal);
	return r;
}
typedef ncclResult_t (*ncclCommInitRank_t)(ncclComm_t*, int, ncclUniqueId, int);
static ncclResult_t c_ncclCommInitRank(void* fn, ncclComm_t* comm, int n, const char* idb, int rank) {
	ncclUniqueId id;
	memcpy(id.internal, idb, sizeof id.internal);
	return T(ncclCommInitRank)(comm, n, id, rank);
}
typedef ncclResult_t (*ncclAllReduce_t)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t);
static ncclResult_t c_ncclAllReduce(void* fn, dptr send, dptr recv, size_t count, int dt, int op, ncclComm_t comm, cudaStream_t s) {
	return T(ncclAllReduce)((const void*)send, (void*)recv, count, dt, op, comm, s);
}
typedef ncclResult_t (*ncclVoid_t)(void);
static ncclResult_t c_ncclVoid(void* fn) { return ((ncclVoid_t)fn)(); }
typedef ncclResult_t (*ncclCommFn_t)(ncclComm_t);
static ncclResult_t c_ncclCommFn(void* fn, ncclComm_t comm) { return ((ncclCommFn_t)fn)(comm); }
typedef ncclResult_t (*ncclCommGetAsyncError_t)(ncclComm_t, ncclResult_t*);
static ncclResult_t c_ncclCommGetAsyncError(void* fn, ncclComm_t comm, ncclResult_t* r) { return T(ncclCommGetAsyncError)(comm, r); }
typedef const char* (*ncclGetLastError_t)(ncclComm_t);
static const char* c_ncclGetLastError(void* fn, ncclComm_t comm) { return T(ncclGetLastError)(comm); }
*/
import "C"

import "unsafe"

// cgoNCCL holds libnccl's function pointers.
type cgoNCCL struct {
	getVersion, getUniqueID, commInitRank_, allReduce_, groupStart_, groupEnd_,
	commDestroy_, commAbort_, commGetAsyncError, getLastError unsafe.Pointer // getLastError is optional (2.13+)
}

// newNCCLAPI resolves libnccl's functions.
func newNCCLAPI(lib Library) (ncclAPI, error) {
	s := &symbols{lib: lib}
	n := &cgoNCCL{
		getVersion: s.need("ncclGetVersion"), getUniqueID: s.need("ncclGetUniqueId"),
		commInitRank_: s.need("ncclCommInitRank"), allReduce_: s.need("ncclAllReduce"),
		groupStart_: s.need("ncclGroupStart"), groupEnd_: s.need("ncclGroupEnd"),
		commDestroy_: s.need("ncclCommDestroy"), commAbort_: s.need("ncclCommAbort"),
		commGetAsyncError: s.need("ncclCommGetAsyncError"), getLastError: s.want("ncclGetLastError"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *cgoNCCL) check(call string, r C.ncclResult_t) error {
	if r == 0 {
		return nil
	}
	return Error{Call: call, Code: int(r), Name: codeName(ncclResultNames, "ncclResult", int(r))}
}

func (n *cgoNCCL) version() (int, error) {
	var v C.int
	err := n.check("ncclGetVersion", C.c_ncclGetVersion(n.getVersion, &v))
	return int(v), err
}

func (n *cgoNCCL) uniqueID() (NCCLUniqueID, error) {
	var id NCCLUniqueID
	err := n.check("ncclGetUniqueId", C.c_ncclGetUniqueId(n.getUniqueID, (*C.char)(unsafe.Pointer(&id[0]))))
	return id, err
}

func (n *cgoNCCL) commInitRank(world int, id NCCLUniqueID, rank int) (uintptr, error) {
	var comm C.ncclComm_t
	err := n.check("ncclCommInitRank", C.c_ncclCommInitRank(n.commInitRank_, &comm, C.int(world),
		(*C.char)(unsafe.Pointer(&id[0])), C.int(rank)))
	return uintptr(comm), err
}

func (n *cgoNCCL) allReduce(send, recv DevicePtr, count uint64, dt NCCLDataType, op NCCLOp, comm, stream uintptr) error {
	return n.check("ncclAllReduce", C.c_ncclAllReduce(n.allReduce_, C.dptr(send), C.dptr(recv), C.size_t(count),
		C.int(dt), C.int(op), C.ncclComm_t(comm), C.cudaStream_t(stream)))
}

func (n *cgoNCCL) groupStart() error { return n.check("ncclGroupStart", C.c_ncclVoid(n.groupStart_)) }
func (n *cgoNCCL) groupEnd() error   { return n.check("ncclGroupEnd", C.c_ncclVoid(n.groupEnd_)) }

func (n *cgoNCCL) commDestroy(comm uintptr) error {
	return n.check("ncclCommDestroy", C.c_ncclCommFn(n.commDestroy_, C.ncclComm_t(comm)))
}

func (n *cgoNCCL) commAbort(comm uintptr) error {
	return n.check("ncclCommAbort", C.c_ncclCommFn(n.commAbort_, C.ncclComm_t(comm)))
}

// commAsyncError returns the communicator's asynchronous error as an Error
// naming ncclCommGetAsyncError, or the failure of the query itself.
func (n *cgoNCCL) commAsyncError(comm uintptr) error {
	var r C.ncclResult_t
	if err := n.check("ncclCommGetAsyncError", C.c_ncclCommGetAsyncError(n.commGetAsyncError, C.ncclComm_t(comm), &r)); err != nil {
		return err
	}
	if r == 7 { // ncclInProgress: a non-blocking communicator still initialising, not a failure
		return nil
	}
	return n.check("ncclCommGetAsyncError", r)
}

func (n *cgoNCCL) lastError(comm uintptr) string {
	if n.getLastError == nil {
		return ""
	}
	p := C.c_ncclGetLastError(n.getLastError, C.ncclComm_t(comm))
	if p == nil {
		return ""
	}
	return C.GoString(p)
}
