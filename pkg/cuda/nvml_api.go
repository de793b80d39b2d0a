package cuda

import (
	"errors"
	"fmt"
)

// NVML is the loaded NVIDIA management library, read for the driver's own
// version and each device's name and memory without a CUDA context.
//
// druto binds the eight NVML functions it needs itself rather than use
// github.com/NVIDIA/go-nvml: go-nvml links every binary with
// --unresolved-symbols=ignore-in-object-files and its own loader, which
// neither follows the search order above nor fits the fake Loader that the
// tests use, and it returns status codes that callers compare by hand.
type NVML struct {
	api  nvmlAPI
	info LibInfo
}

// LoadNVML finds, loads and initialises NVML.
func LoadNVML(o LoadOptions) (*NVML, error) {
	n, _, err := loadNVML(o)
	return n, err
}

func loadNVML(o LoadOptions) (*NVML, LibInfo, error) {
	lib, info, err := find(specNVML, o)
	if err != nil {
		return nil, info, err
	}
	api, err := newNVMLAPI(lib)
	if err != nil {
		return nil, info, err
	}
	if err := api.initialize(); err != nil {
		return nil, info, err
	}
	n := &NVML{api: api, info: info}
	if v, err := api.driverVersion(); err == nil {
		n.info.Version = v
	}
	return n, n.info, nil
}

// Info describes where NVML was found; Version is the driver's, e.g. "580.95.05".
func (n *NVML) Info() LibInfo { return n.info }

// DriverVersion returns the kernel driver's version, e.g. "580.95.05".
func (n *NVML) DriverVersion() (string, error) { return n.api.driverVersion() }

// CUDAVersion returns the CUDA version the driver supports, e.g. 13000.
func (n *NVML) CUDAVersion() (int, error) { return n.api.cudaDriverVersion() }

// NVMLDevice is one device as NVML sees it.
type NVMLDevice struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Total uint64 `json:"memory_total_bytes"`
	Free  uint64 `json:"memory_free_bytes"`
	Used  uint64 `json:"memory_used_bytes"`
}

// Devices lists the devices.
func (n *NVML) Devices() ([]NVMLDevice, error) {
	count, err := n.api.deviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]NVMLDevice, 0, count)
	for i := range count {
		h, err := n.api.deviceHandle(i)
		if err != nil {
			return out, fmt.Errorf("cuda: nvml device %d: %w", i, err)
		}
		d := NVMLDevice{Index: i}
		var errName, errMem error
		d.Name, errName = n.api.deviceName(h)
		d.Total, d.Free, d.Used, errMem = n.api.deviceMemory(h)
		if err := errors.Join(errName, errMem); err != nil {
			return out, fmt.Errorf("cuda: nvml device %d: %w", i, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Utilization returns device i's utilisation as NVML samples it: the
// percentage of its last sample period (between 1/6 s and 1 s, by product)
// in which a kernel ran (gpu) and in which device memory was read or
// written (memory), and the device memory in use, in bytes. NVML's index i
// is the CUDA device of the same index unless CUDA_VISIBLE_DEVICES or
// CUDA_DEVICE_ORDER reorder them.
func (n *NVML) Utilization(i int) (gpu, memory int, used uint64, err error) {
	h, err := n.api.deviceHandle(i)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: nvml device %d: %w", i, err)
	}
	g, m, err := n.api.deviceUtilization(h)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: nvml device %d utilisation: %w", i, err)
	}
	_, _, used, err = n.api.deviceMemory(h)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: nvml device %d memory: %w", i, err)
	}
	return int(g), int(m), used, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error { return n.api.shutdown() }
