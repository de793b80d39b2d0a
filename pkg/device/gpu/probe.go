package gpu

// probe.go: what the root package's detection and the CLI need from CUDA,
// so that neither imports pkg/cuda: the machine's driver, libraries and
// devices (Probe), building every kernel without a device (BuildKernels,
// CompileKernels), and the CUDA records they report, as aliases.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
)

// The CUDA records detection reports and the options it takes.
type (
	LoadOptions    = cuda.LoadOptions    // where to look for the CUDA libraries
	LibInfo        = cuda.LibInfo        // one library: found, path, version
	DeviceInfo     = cuda.DeviceInfo     // one GPU: name, compute capability, memory
	FuncAttributes = cuda.FuncAttributes // one kernel's registers, shared memory, threads
)

// EnvNCCLNVLS is NCCL's switch for NVLink SHARP (multicast) collectives.
const EnvNCCLNVLS = cuda.EnvNCCLNVLS

// Errors of Probe, BuildKernels and DeviceCount (wrapped).
var (
	ErrNoGPUSupport = cuda.ErrNoGPUSupport // a build without cgo
	ErrNoDevice     = cuda.ErrNoDevice
)

// DriverInfo is the NVIDIA driver as the CUDA driver API and NVML report it.
type DriverInfo struct {
	CUDA    string `json:"cuda"`              // the CUDA version it supports, e.g. "13.0"
	Version string `json:"version,omitempty"` // the kernel driver's, e.g. "580.95.05" (NVML)
	Path    string `json:"path"`              // libcuda's file
}

// Machine is what Probe found.
type Machine struct {
	Support   bool // false in a build without cgo, which cannot load CUDA
	Driver    *DriverInfo
	Libraries []LibInfo
	Devices   []DeviceInfo
	FreeBytes uint64 // device 0's free memory before the Device was made
}

// Probe loads the CUDA libraries, lists the devices and makes a Device on
// device 0 that owns its context (cfg.OwnContext is implied; cfg.Libs is
// ignored). It never fails: dev is nil when no device could be made, and
// errs says what went wrong on the way.
func Probe(ctx context.Context, cfg Config) (m Machine, dev *Device, errs []error) {
	libs := cuda.Load(cfg.Load)
	m.Support = !errors.Is(libs.Err, cuda.ErrNoGPUSupport)
	if !m.Support {
		return m, nil, nil
	}
	m.Libraries = libs.Info
	if libs.Err != nil {
		return m, nil, []error{libs.Err}
	}
	defer func() {
		if libs.NVML != nil {
			_ = libs.NVML.Close()
		}
	}()
	drv := libs.Driver
	m.Driver = &DriverInfo{CUDA: drv.Info().Version, Path: drv.Info().Path}
	if libs.NVML != nil {
		if v, err := libs.NVML.DriverVersion(); err == nil {
			m.Driver.Version = v
		}
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return m, nil, []error{err}
	}
	for i := range n {
		info, err := drv.Device(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.Devices = append(m.Devices, info)
	}
	if len(m.Devices) == 0 || ctx.Err() != nil {
		return m, nil, errs
	}
	c, err := drv.NewContext(0)
	if err != nil {
		return m, nil, append(errs, err)
	}
	if free, _, err := c.MemInfo(); err == nil {
		m.FreeBytes = free
	}
	// The device builds every kernel (one NVRTC compile per source file and
	// dtype, in parallel, cached on disk) and owns the context from here.
	cfg.Libs, cfg.OwnContext = libs, true
	dev, err = NewWith(c, cfg)
	if err != nil {
		errs = append(errs, err)
		if cerr := c.Close(); cerr != nil {
			errs = append(errs, cerr)
		}
		return m, nil, errs
	}
	return m, dev, errs
}

// DeviceCount returns how many GPUs the driver sees (CUDA_VISIBLE_DEVICES
// counts).
func DeviceCount(load LoadOptions) (int, error) {
	drv, err := cuda.LoadDriver(load)
	if err != nil {
		return 0, err
	}
	return drv.DeviceCount()
}

// Devices lists the GPUs the driver sees, without making a context or
// building a kernel: for checks that only need the compute capability.
func Devices(load LoadOptions) ([]DeviceInfo, error) {
	drv, err := cuda.LoadDriver(load)
	if err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	for i := range n {
		info, err := drv.Device(i)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

// BuildKernels builds every kernel for device 0 as New does, in a context
// of its own that it closes before returning (the results keep their
// origin, times, attributes and errors; their modules are gone).
func BuildKernels(load LoadOptions, noCache bool) ([]*Built, error) {
	libs := cuda.Load(load)
	if libs.Err != nil {
		return nil, libs.Err
	}
	n, err := libs.Driver.DeviceCount()
	if err == nil && n == 0 {
		err = cuda.ErrNoDevice
	}
	if err != nil {
		return nil, err
	}
	c, err := libs.Driver.NewContext(0)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := &builder{Ctx: c, NVRTC: libs.NVRTC, NoCache: noCache}
	built, err := b.buildAll()
	for _, k := range built {
		k.Module, k.Func = nil, nil
	}
	return built, err
}

// Compiled is one module (source file and dtype) compiled by NVRTC for a
// target without a device (CompileKernels).
type Compiled struct {
	File, DType, Arch, NVRTC string
	Time                     time.Duration
	Bytes                    int
	Err                      error
}

// CompileKernels compiles every module with NVRTC alone for each target
// ("sm_XY" gives a cubin, "compute_XY" PTX); it needs no GPU. A module whose
// MinArch is above the target is left out, as a device of that
// architecture leaves it unbuilt. dtypes, when given ("bf16", ...), keep the
// modules of those storage types only.
func CompileKernels(load LoadOptions, archs []string, dtypes ...string) ([]Compiled, error) {
	n, err := cuda.LoadNVRTC(load)
	if err != nil {
		return nil, fmt.Errorf("NVRTC: %w", err)
	}
	vs, err := kernels.Variants()
	if err != nil {
		return nil, err
	}
	var out []Compiled
	for _, arch := range archs {
		arch = strings.TrimSpace(arch)
		cc, _ := strconv.Atoi(arch[strings.IndexByte(arch, '_')+1:])
		done := map[string]bool{}
		for _, v := range vs {
			if done[moduleKey(v)] || (len(dtypes) > 0 && !slices.Contains(dtypes, v.DType.String())) || cc > 0 && cc < v.MinArch {
				continue
			}
			done[moduleKey(v)] = true
			code, d, _, err := compileOnly(n, v, arch)
			out = append(out, Compiled{File: v.File, DType: v.DType.String(), Arch: arch, NVRTC: n.Version(), Time: d, Bytes: len(code), Err: err})
		}
	}
	return out, nil
}

// FreeMemory returns the device's free and total memory in bytes; under a
// cap (device.MemoryCapEnv) the total is the cap and the free memory at
// most what the cap leaves beside the bytes druto's pool has in use.
func (d *Device) FreeMemory() (free, total uint64, err error) {
	free, total, err = d.ctx.MemInfo()
	if err != nil {
		return 0, 0, err
	}
	if c := d.ctx.Pool().Limit(); c > 0 {
		used := d.ctx.Pool().Stats().InUse
		total, free = min(total, c), min(free, c-min(c, used))
	}
	return free, total, nil
}
