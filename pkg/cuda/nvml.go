//go:build cgo && linux

package cuda

// nvml.go: libnvidia-ml through dlsym'd function pointers (druto's own
// binding: see NVML for why not go-nvml).

/*
#include <stdint.h>

typedef int nvmlReturn_t;
typedef uintptr_t nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;

#define T(name) ((name##_t)fn)

typedef nvmlReturn_t (*nvmlVoid_t)(void);
static nvmlReturn_t c_nvmlVoid(void* fn) { return ((nvmlVoid_t)fn)(); }
typedef const char* (*nvmlErrorString_t)(nvmlReturn_t);
static const char* c_nvmlErrorString(void* fn, nvmlReturn_t r) { return T(nvmlErrorString)(r); }
typedef nvmlReturn_t (*nvmlSystemGetDriverVersion_t)(char*, unsigned int);
static nvmlReturn_t c_nvmlSystemGetDriverVersion(void* fn, char* s, unsigned int n) { return T(nvmlSystemGetDriverVersion)(s, n); }
typedef nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_t)(int*);
static nvmlReturn_t c_nvmlSystemGetCudaDriverVersion(void* fn, int* v) { return T(nvmlSystemGetCudaDriverVersion)(v); }
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_t)(unsigned int*);
static nvmlReturn_t c_nvmlDeviceGetCount_v2(void* fn, unsigned int* n) { return T(nvmlDeviceGetCount_v2)(n); }
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_t)(unsigned int, nvmlDevice_t*);
static nvmlReturn_t c_nvmlDeviceGetHandleByIndex_v2(void* fn, unsigned int i, nvmlDevice_t* d) { return T(nvmlDeviceGetHandleByIndex_v2)(i, d); }
typedef nvmlReturn_t (*nvmlDeviceGetName_t)(nvmlDevice_t, char*, unsigned int);
static nvmlReturn_t c_nvmlDeviceGetName(void* fn, nvmlDevice_t d, char* s, unsigned int n) { return T(nvmlDeviceGetName)(d, s, n); }
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_t)(nvmlDevice_t, nvmlMemory_t*);
static nvmlReturn_t c_nvmlDeviceGetMemoryInfo(void* fn, nvmlDevice_t d, nvmlMemory_t* m) { return T(nvmlDeviceGetMemoryInfo)(d, m); }
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_t)(nvmlDevice_t, nvmlUtilization_t*);
static nvmlReturn_t c_nvmlDeviceGetUtilizationRates(void* fn, nvmlDevice_t d, nvmlUtilization_t* u) { return T(nvmlDeviceGetUtilizationRates)(d, u); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cgoNVML holds libnvidia-ml's function pointers.
type cgoNVML struct {
	init_, shutdown_, errString, driverVersion_, cudaVersion, count, handle, name, memory unsafe.Pointer
	util                                                                                  unsafe.Pointer // optional
}

// newNVMLAPI resolves libnvidia-ml's functions.
func newNVMLAPI(lib Library) (nvmlAPI, error) {
	s := &symbols{lib: lib}
	n := &cgoNVML{
		init_: s.need("nvmlInit_v2"), shutdown_: s.need("nvmlShutdown"), errString: s.need("nvmlErrorString"),
		driverVersion_: s.need("nvmlSystemGetDriverVersion"), cudaVersion: s.need("nvmlSystemGetCudaDriverVersion"),
		count: s.need("nvmlDeviceGetCount_v2"), handle: s.need("nvmlDeviceGetHandleByIndex_v2"),
		name: s.need("nvmlDeviceGetName"), memory: s.need("nvmlDeviceGetMemoryInfo"),
		util: s.want("nvmlDeviceGetUtilizationRates"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *cgoNVML) check(call string, r C.nvmlReturn_t) error {
	if r == 0 {
		return nil
	}
	return Error{Call: call, Code: int(r), Name: codeName(nvmlErrorNames, "NVML_ERROR", int(r))}
}

func (n *cgoNVML) initialize() error { return n.check("nvmlInit_v2", C.c_nvmlVoid(n.init_)) }
func (n *cgoNVML) shutdown() error   { return n.check("nvmlShutdown", C.c_nvmlVoid(n.shutdown_)) }

func (n *cgoNVML) driverVersion() (string, error) {
	var buf [96]C.char
	if err := n.check("nvmlSystemGetDriverVersion", C.c_nvmlSystemGetDriverVersion(n.driverVersion_, &buf[0], C.uint(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (n *cgoNVML) cudaDriverVersion() (int, error) {
	var v C.int
	return int(v), n.check("nvmlSystemGetCudaDriverVersion", C.c_nvmlSystemGetCudaDriverVersion(n.cudaVersion, &v))
}

func (n *cgoNVML) deviceCount() (int, error) {
	var c C.uint
	return int(c), n.check("nvmlDeviceGetCount_v2", C.c_nvmlDeviceGetCount_v2(n.count, &c))
}

func (n *cgoNVML) deviceHandle(i int) (uintptr, error) {
	var d C.nvmlDevice_t
	return uintptr(d), n.check("nvmlDeviceGetHandleByIndex_v2", C.c_nvmlDeviceGetHandleByIndex_v2(n.handle, C.uint(i), &d))
}

func (n *cgoNVML) deviceName(h uintptr) (string, error) {
	var buf [96]C.char
	if err := n.check("nvmlDeviceGetName", C.c_nvmlDeviceGetName(n.name, C.nvmlDevice_t(h), &buf[0], C.uint(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (n *cgoNVML) deviceMemory(h uintptr) (uint64, uint64, uint64, error) {
	var m C.nvmlMemory_t
	err := n.check("nvmlDeviceGetMemoryInfo", C.c_nvmlDeviceGetMemoryInfo(n.memory, C.nvmlDevice_t(h), &m))
	return uint64(m.total), uint64(m.free), uint64(m.used), err
}

func (n *cgoNVML) deviceUtilization(h uintptr) (uint32, uint32, error) {
	if n.util == nil {
		return 0, 0, fmt.Errorf("%w: nvmlDeviceGetUtilizationRates", ErrSymbol)
	}
	var u C.nvmlUtilization_t
	err := n.check("nvmlDeviceGetUtilizationRates", C.c_nvmlDeviceGetUtilizationRates(n.util, C.nvmlDevice_t(h), &u))
	return uint32(u.gpu), uint32(u.memory), err
}
