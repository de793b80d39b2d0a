//go:build linux

package cuda

import (
	"fmt"
	"io/fs"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// fakeLoader opens "libraries" from a table: name (path or soname) to the
// symbols it exports, or to an error the loader reports.
type fakeLoader struct {
	mu     sync.Mutex
	libs   map[string][]string // name -> exported symbols
	broken map[string]string   // name -> load error
	asked  []string            // every name Open was called with, in order
}

func (l *fakeLoader) Open(name string) (Library, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, name)
	if msg, ok := l.broken[name]; ok {
		return nil, fmt.Errorf("%s", msg)
	}
	syms, ok := l.libs[name]
	if !ok {
		return nil, fmt.Errorf("fake: %s: %w", name, fs.ErrNotExist)
	}
	set := map[string]bool{}
	for _, s := range syms {
		set[s] = true
	}
	return &fakeLibrary{path: name, syms: set}, nil
}

type fakeLibrary struct {
	path string
	syms map[string]bool
}

var fakeSymbol byte // the address every fake symbol resolves to (never called)

func (l *fakeLibrary) Sym(name string) (unsafe.Pointer, error) {
	if !l.syms[name] {
		return nil, fmt.Errorf("%w: %s", ErrSymbol, name)
	}
	return unsafe.Pointer(&fakeSymbol), nil
}
func (l *fakeLibrary) Path() string { return l.path }
func (l *fakeLibrary) Close() error { return nil }

// fakeDriver is a driverAPI in Go memory: device memory is a byte slice
// addressed from 0x1000, with a capacity for out-of-memory tests; every
// call records the OS thread it ran on.
type fakeDriver struct {
	mu       sync.Mutex
	ver      int
	initErr  error
	devices  int
	capacity uint64
	used     uint64
	next     DevicePtr
	blocks   map[DevicePtr]uint64
	threads  map[int]int // OS thread id -> calls
	calls    []string
	failCall string    // a call that returns CUDA_ERROR_INVALID_VALUE
	elapsed  []float32 // the times cuEventElapsedTime returns in turn (ms); 1.5 when none are left
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{ver: 13000, devices: 1, capacity: 1 << 30, next: 0x1000,
		blocks: map[DevicePtr]uint64{}, threads: map[int]int{}}
}

func (f *fakeDriver) note(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.threads[syscall.Gettid()]++
	f.calls = append(f.calls, call)
	if call == f.failCall {
		return Error{Call: call, Code: 1, Name: "CUDA_ERROR_INVALID_VALUE"}
	}
	return nil
}

func (f *fakeDriver) version() (int, error) { return f.ver, nil }
func (f *fakeDriver) initialize() error     { return f.initErr }
func (f *fakeDriver) errorName(code int) string {
	return codeName(driverErrorNames, "CUDA_ERROR", code)
}
func (f *fakeDriver) deviceCount() (int, error) { return f.devices, nil }
func (f *fakeDriver) deviceGet(o int) (int32, error) {
	if o >= f.devices {
		return 0, Error{Call: "cuDeviceGet", Code: 101, Name: "CUDA_ERROR_INVALID_DEVICE"}
	}
	return int32(o), nil
}
func (f *fakeDriver) deviceName(int32) (string, error)     { return "Fake GPU", nil }
func (f *fakeDriver) deviceTotalMem(int32) (uint64, error) { return f.capacity, nil }
func (f *fakeDriver) deviceAttr(attr int, _ int32) (int, error) {
	switch attr {
	case attrCCMajor:
		return 9, nil
	case attrCCMinor:
		return 0, nil
	case attrMultiprocessors:
		return 132, nil
	}
	return 1, nil
}
func (f *fakeDriver) primaryCtxRetain(int32) (uintptr, error) {
	return 0xc0, f.note("cuDevicePrimaryCtxRetain")
}
func (f *fakeDriver) primaryCtxRelease(int32) error { return f.note("cuDevicePrimaryCtxRelease_v2") }
func (f *fakeDriver) ctxSetCurrent(uintptr) error   { return f.note("cuCtxSetCurrent") }
func (f *fakeDriver) ctxSynchronize() error         { return f.note("cuCtxSynchronize") }
func (f *fakeDriver) memAlloc(n uint64) (DevicePtr, error) {
	if err := f.note("cuMemAlloc_v2"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used+n > f.capacity {
		return 0, Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	p := f.next
	f.next += DevicePtr((n + 511) / 512 * 512)
	f.used += n
	f.blocks[p] = n
	return p, nil
}
func (f *fakeDriver) memFree(p DevicePtr) error {
	if err := f.note("cuMemFree_v2"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.blocks[p]
	if !ok {
		return Error{Call: "cuMemFree_v2", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE"}
	}
	delete(f.blocks, p)
	f.used -= n
	return nil
}
func (f *fakeDriver) memGetInfo() (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity - f.used, f.capacity, nil
}
func (f *fakeDriver) memcpyHtoD(DevicePtr, unsafe.Pointer, uint64, uintptr) error {
	return f.note("cuMemcpyHtoDAsync_v2")
}
func (f *fakeDriver) memcpyDtoH(unsafe.Pointer, DevicePtr, uint64, uintptr) error {
	return f.note("cuMemcpyDtoHAsync_v2")
}
func (f *fakeDriver) memcpyDtoD(DevicePtr, DevicePtr, uint64, uintptr) error {
	return f.note("cuMemcpyDtoDAsync_v2")
}
func (f *fakeDriver) memsetD8(DevicePtr, uint8, uint64, uintptr) error {
	return f.note("cuMemsetD8Async")
}
func (f *fakeDriver) memsetD32(DevicePtr, uint32, uint64, uintptr) error {
	return f.note("cuMemsetD32Async")
}
func (f *fakeDriver) streamCreate(uint32) (uintptr, error)   { return 0x5, f.note("cuStreamCreate") }
func (f *fakeDriver) streamDestroy(uintptr) error            { return f.note("cuStreamDestroy_v2") }
func (f *fakeDriver) streamSynchronize(uintptr) error        { return f.note("cuStreamSynchronize") }
func (f *fakeDriver) streamWaitEvent(uintptr, uintptr) error { return f.note("cuStreamWaitEvent") }
func (f *fakeDriver) eventCreate(uint32) (uintptr, error)    { return 0xe, f.note("cuEventCreate") }
func (f *fakeDriver) eventDestroy(uintptr) error             { return f.note("cuEventDestroy_v2") }
func (f *fakeDriver) eventRecord(uintptr, uintptr) error     { return f.note("cuEventRecord") }
func (f *fakeDriver) eventSynchronize(uintptr) error         { return f.note("cuEventSynchronize") }
func (f *fakeDriver) eventElapsedTime(uintptr, uintptr) (float32, error) {
	ms := float32(1.5)
	f.mu.Lock()
	if len(f.elapsed) > 0 {
		ms, f.elapsed = f.elapsed[0], f.elapsed[1:]
	}
	f.mu.Unlock()
	return ms, f.note("cuEventElapsedTime")
}
func (f *fakeDriver) streamBeginCapture(uintptr, int) error { return f.note("cuStreamBeginCapture_v2") }
func (f *fakeDriver) streamEndCapture(uintptr) (uintptr, error) {
	return 0x9, f.note("cuStreamEndCapture")
}
func (f *fakeDriver) graphInstantiate(uintptr) (uintptr, error) {
	return 0xa, f.note("cuGraphInstantiateWithFlags")
}
func (f *fakeDriver) graphLaunch(uintptr, uintptr) error { return f.note("cuGraphLaunch") }
func (f *fakeDriver) graphExecDestroy(uintptr) error     { return f.note("cuGraphExecDestroy") }
func (f *fakeDriver) graphDestroy(uintptr) error         { return f.note("cuGraphDestroy") }
func (f *fakeDriver) hostAlloc(n uint64) (unsafe.Pointer, error) {
	if err := f.note("cuMemHostAlloc"); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	return unsafe.Pointer(&b[0]), nil
}
func (f *fakeDriver) hostFree(unsafe.Pointer) error { return f.note("cuMemFreeHost") }
func (f *fakeDriver) moduleLoad([]byte) (uintptr, string, string, error) {
	if err := f.note("cuModuleLoadDataEx"); err != nil {
		return 0, "", "ptxas fatal   : fake JIT failure", err
	}
	return 0x3, "", "", nil
}
func (f *fakeDriver) moduleUnload(uintptr) error { return f.note("cuModuleUnload") }
func (f *fakeDriver) moduleGetFunction(uintptr, string) (uintptr, error) {
	return 0x4, f.note("cuModuleGetFunction")
}
func (f *fakeDriver) funcGetAttribute(int, uintptr) (int, error) {
	return 32, f.note("cuFuncGetAttribute")
}
func (f *fakeDriver) funcSetAttribute(uintptr, int, int) error { return f.note("cuFuncSetAttribute") }
func (f *fakeDriver) launchKernel(_ uintptr, _, _ Dim3, _ uint32, _ uintptr, _ []byte, _ []int32, pdl bool) error {
	if pdl {
		return f.note("cuLaunchKernelEx")
	}
	return f.note("cuLaunchKernel")
}
func (f *fakeDriver) hasLaunchEx() bool { return true }
func (f *fakeDriver) threadID() int     { return syscall.Gettid() }

// fakeContext returns a Context over a fake driver.
func fakeContext(f *fakeDriver) (*Context, error) {
	d, err := newDriver(f, LibInfo{Name: "cuda", Found: true, Path: "/fake/libcuda.so.1"})
	if err != nil {
		return nil, err
	}
	return d.NewContext(0)
}

// fakeStream is a stream of a context on f, closed when the test ends.
func fakeStream(t *testing.T, f *fakeDriver) (*Context, *Stream) {
	t.Helper()
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
