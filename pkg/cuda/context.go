package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Add returns p advanced by off bytes.
func (p DevicePtr) Add(off uint64) DevicePtr { return p + DevicePtr(off) }

// Driver is the loaded CUDA driver, libcuda.so.1.
type Driver struct {
	api     driverAPI
	info    LibInfo
	version int

	once    sync.Once
	initErr error
}

// LoadDriver finds and loads libcuda, resolves every function druto uses
// and checks the driver's version. Its errors wrap ErrNoDriver (not found or
// not loadable), ErrSymbol, ErrDriverTooOld or ErrNoGPUSupport.
func LoadDriver(o LoadOptions) (*Driver, error) {
	d, _, err := loadDriver(o)
	return d, err
}

func loadDriver(o LoadOptions) (*Driver, LibInfo, error) {
	lib, info, err := find(specDriver, o)
	if err != nil {
		return nil, info, err
	}
	api, err := newDriverAPI(lib)
	if err != nil {
		return nil, info, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	d, err := newDriver(api, info)
	if d != nil {
		info = d.info
	}
	return d, info, err
}

// newDriver checks the version of a resolved driver (split out for fakes).
func newDriver(api driverAPI, info LibInfo) (*Driver, error) {
	v, err := api.version()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	info.Version = versionString(v)
	if err := checkDriverVersion(v); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, info.Path)
	}
	return &Driver{api: api, info: info, version: v}, nil
}

// checkDriverVersion rejects drivers older than MinDriverVersion.
func checkDriverVersion(v int) error {
	if v < MinDriverVersion {
		return fmt.Errorf("%w: it supports CUDA %s, druto needs %s or newer (NVIDIA driver R520+); update the driver",
			ErrDriverTooOld, versionString(v), versionString(MinDriverVersion))
	}
	return nil
}

// versionString formats a CUDA API version (1000·major + 10·minor) as "13.0".
func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// Version returns the CUDA version the driver supports, e.g. 13000.
func (d *Driver) Version() int { return d.version }

// Info describes where the driver was found and its version.
func (d *Driver) Info() LibInfo { return d.info }

// Init initialises the driver once (cuInit); a driver that sees no device
// returns an error wrapping ErrNoDevice.
func (d *Driver) Init() error {
	d.once.Do(func() {
		if err := d.api.initialize(); err != nil {
			var ce Error
			if errors.As(err, &ce) && (ce.Name == "CUDA_ERROR_NO_DEVICE" || ce.Name == "CUDA_ERROR_STUB_LIBRARY") {
				d.initErr = fmt.Errorf("%w (%w)", ErrNoDevice, err)
				return
			}
			d.initErr = err
		}
	})
	return d.initErr
}

// DeviceCount returns the number of CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	if err := d.Init(); err != nil {
		return 0, err
	}
	return d.api.deviceCount()
}

// DeviceInfo describes one device as the driver reports it.
type DeviceInfo struct {
	Ordinal         int    `json:"ordinal"`
	Name            string `json:"name"`
	Major           int    `json:"cc_major"`
	Minor           int    `json:"cc_minor"`
	SMs             int    `json:"sms"`
	TotalMem        uint64 `json:"memory_bytes"`
	L2Bytes         int    `json:"l2_bytes"`
	MaxThreads      int    `json:"max_threads_per_block"`
	SharedPerBlock  int    `json:"shared_per_block_optin"`
	ClockKHz        int    `json:"clock_khz"`
	MemClockKHz     int    `json:"memory_clock_khz"`
	MemBusWidthBits int    `json:"memory_bus_width_bits"`
	PCIBus          int    `json:"pci_bus"`
	dev             int32
}

// Arch returns the device's real architecture name, e.g. "sm_90".
func (i DeviceInfo) Arch() string { return fmt.Sprintf("sm_%d%d", i.Major, i.Minor) }

// CC returns the compute capability as "9.0".
func (i DeviceInfo) CC() string { return fmt.Sprintf("%d.%d", i.Major, i.Minor) }

// Device attribute numbers (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock = 1
	attrClockRate          = 13
	attrMultiprocessors    = 16
	attrPCIBusID           = 33
	attrMemoryClockRate    = 36
	attrMemoryBusWidth     = 37
	attrL2CacheSize        = 38
	attrCCMajor            = 75
	attrCCMinor            = 76
	attrSharedOptin        = 97
)

// Device queries one device; it needs no context.
func (d *Driver) Device(ordinal int) (DeviceInfo, error) {
	if err := d.Init(); err != nil {
		return DeviceInfo{}, err
	}
	dev, err := d.api.deviceGet(ordinal)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal, dev: dev}
	if info.Name, err = d.api.deviceName(dev); err != nil {
		return info, err
	}
	if info.TotalMem, err = d.api.deviceTotalMem(dev); err != nil {
		return info, err
	}
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrCCMajor, &info.Major}, {attrCCMinor, &info.Minor}, {attrMultiprocessors, &info.SMs},
		{attrL2CacheSize, &info.L2Bytes}, {attrMaxThreadsPerBlock, &info.MaxThreads},
		{attrSharedOptin, &info.SharedPerBlock}, {attrClockRate, &info.ClockKHz},
		{attrMemoryClockRate, &info.MemClockKHz}, {attrMemoryBusWidth, &info.MemBusWidthBits},
		{attrPCIBusID, &info.PCIBus},
	} {
		if *a.dst, err = d.api.deviceAttr(a.attr, dev); err != nil {
			return info, err
		}
	}
	return info, nil
}

// Context is a CUDA context on one device, bound to one OS thread.
//
// The rule, written here once for all of druto: the driver keeps the current
// context per OS thread, and the Go scheduler moves goroutines between OS
// threads at will. So a Context starts one goroutine that locks itself to
// its OS thread (runtime.LockOSThread), makes the device's primary context
// current there, and then runs every call that needs the context —
// allocation, copies, launches, streams, events, graphs, modules, cuBLAS and
// cuBLASLt — as a closure received over a channel. Every method of Context
// and of the objects made from it (Stream, Event, Graph, Module, Function,
// Pool, BLAS, BLASLt) sends itself there; Do runs a batch of calls in one
// hop, and calls made inside Do run directly, since they are already on the
// thread. No other goroutine touches the driver's per-thread state, so
// methods are safe to call from any goroutine; they are serialised.
type Context struct {
	drv    *Driver
	api    driverAPI
	Device DeviceInfo

	handle uintptr
	tid    int
	work   chan func()
	done   chan struct{}

	mu     sync.RWMutex // held (read) while a call is in flight; Close takes it
	closed bool

	pool *Pool
}

// NewContext retains the primary context of device ordinal and binds it to
// a new locked OS thread.
func (d *Driver) NewContext(ordinal int) (*Context, error) {
	info, err := d.Device(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{drv: d, api: d.api, Device: info, work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go c.serve(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	c.pool = newPool(contextMemory{c})
	return c, nil
}

// serve is the bound thread: it never unlocks, so the thread ends with it.
func (c *Context) serve(ready chan<- error) {
	runtime.LockOSThread()
	c.tid = c.api.threadID()
	h, err := c.api.primaryCtxRetain(c.Device.dev)
	if err == nil {
		if err = c.api.ctxSetCurrent(h); err != nil {
			_ = c.api.primaryCtxRelease(c.Device.dev)
		}
	}
	c.handle = h
	ready <- err
	if err != nil {
		close(c.done)
		return
	}
	for fn := range c.work {
		fn()
	}
	close(c.done)
}

// onThread reports whether the caller runs on the bound thread (a locked
// thread runs only its own goroutine, so the thread id identifies it).
func (c *Context) onThread() bool { return c.api.threadID() == c.tid }

// result carries a closure's error or panic back to the caller.
type result struct {
	err   error
	panic any
}

// Do runs fn on the bound thread and returns its error. Calls to the
// Context's objects inside fn run directly (no further hop).
func (c *Context) Do(fn func() error) error {
	if c.onThread() {
		return fn()
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	res := make(chan result, 1)
	c.work <- func() {
		defer func() {
			if p := recover(); p != nil {
				res <- result{panic: p}
			}
		}()
		res <- result{err: fn()}
	}
	r := <-res
	if r.panic != nil {
		panic(r.panic) // re-raised in the caller's goroutine, where it belongs
	}
	return r.err
}

// Synchronize waits for all work on the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.Do(func() error { return c.api.ctxSynchronize() })
}

// MemInfo returns the device's free and total memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	err = c.Do(func() error {
		var e error
		free, total, e = c.api.memGetInfo()
		return e
	})
	return
}

// PDL reports whether the driver has cuLaunchKernelEx, which
// Function.LaunchPDL needs (CUDA 12.0 and newer). The device must also be
// sm_90 or newer for the launch to overlap anything.
func (c *Context) PDL() bool { return c.api.hasLaunchEx() }

// Pool returns the context's caching allocator.
func (c *Context) Pool() *Pool { return c.pool }

// Driver returns the driver the context was made from.
func (c *Context) Driver() *Driver { return c.drv }

// Close frees the pool's memory, releases the primary context and ends the
// bound thread. Objects made from the context must not be used afterwards.
// It must not be called from inside Do.
func (c *Context) Close() error {
	if c.onThread() {
		return errors.New("cuda: Context.Close called from inside Do")
	}
	var errs []error
	if c.pool != nil {
		errs = append(errs, c.pool.Close())
	}
	errs = append(errs, c.Do(func() error {
		return errors.Join(c.api.ctxSynchronize(), c.api.primaryCtxRelease(c.Device.dev))
	}))
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.work)
	}
	c.mu.Unlock()
	<-c.done
	return errors.Join(errs...)
}

// contextMemory is the raw allocator under a context's Pool: the pool runs
// each of its operations through do, so alloc, free and info are called on
// the bound thread and call the driver directly.
type contextMemory struct{ c *Context }

func (m contextMemory) do(fn func() error) error              { return m.c.Do(fn) }
func (m contextMemory) alloc(n uint64) (DevicePtr, error)     { return m.c.api.memAlloc(n) }
func (m contextMemory) free(p DevicePtr) error                { return m.c.api.memFree(p) }
func (m contextMemory) info() (free, total uint64, err error) { return m.c.api.memGetInfo() }
