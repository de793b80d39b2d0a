package cuda

import (
	"errors"
	"strings"
	"testing"
)

// fakeNVML is an nvmlAPI whose device 0 is 87% busy with 1 GiB in use.
type fakeNVML struct{ noUtil bool }

func (fakeNVML) initialize() error                  { return nil }
func (fakeNVML) shutdown() error                    { return nil }
func (fakeNVML) driverVersion() (string, error)     { return "580.95.05", nil }
func (fakeNVML) cudaDriverVersion() (int, error)    { return 13000, nil }
func (fakeNVML) deviceCount() (int, error)          { return 1, nil }
func (fakeNVML) deviceName(uintptr) (string, error) { return "NVIDIA H200", nil }
func (fakeNVML) deviceHandle(i int) (uintptr, error) {
	if i != 0 {
		return 0, Error{Call: "nvmlDeviceGetHandleByIndex_v2", Code: 2, Name: "NVML_ERROR_INVALID_ARGUMENT"}
	}
	return 0x10, nil
}
func (fakeNVML) deviceMemory(uintptr) (uint64, uint64, uint64, error) {
	return 4 << 30, 3 << 30, 1 << 30, nil
}
func (f fakeNVML) deviceUtilization(uintptr) (uint32, uint32, error) {
	if f.noUtil {
		return 0, 0, errors.New("cuda: " + "nvmlDeviceGetUtilizationRates missing")
	}
	return 87, 30, nil
}

// TestNVMLUtilization: Utilization returns the device's GPU and memory
// percentages and the memory in use, and an error naming the device for a
// bad index or a library without the utilisation call.
func TestNVMLUtilization(t *testing.T) {
	n := &NVML{api: fakeNVML{}}
	g, m, used, err := n.Utilization(0)
	if err != nil || g != 87 || m != 30 || used != 1<<30 {
		t.Errorf("Utilization(0) = %d%%, %d%%, %d bytes, %v", g, m, used, err)
	}
	if _, _, _, err := n.Utilization(3); err == nil || !strings.Contains(err.Error(), "nvml device 3") {
		t.Errorf("Utilization(3): %v", err)
	}
	n = &NVML{api: fakeNVML{noUtil: true}}
	if _, _, _, err := n.Utilization(0); err == nil || !strings.Contains(err.Error(), "utilisation") {
		t.Errorf("without nvmlDeviceGetUtilizationRates: %v", err)
	}
}
