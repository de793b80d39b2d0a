package druto

// stepcache.go: the step checks' verdict, kept once per process and on disk
// beside the kernel cache, so that `druto train` and each mode of
// `druto bench` (which opens the device once per mode) do not repeat the
// three training steps and their CPU reference (about 2 s on an H200).
//
// The key covers everything the verdict depends on: the program itself
// (the sha256 of the running executable: Go launchers, embedded kernel
// sources and PTX), the GPU (name, PCI bus, memory, architecture), the driver's CUDA
// version, how the kernels were built (NVRTC version or embedded PTX), and
// the fused/decomposed form. A new build, driver or GPU gives a new key, so a
// stale verdict is never reused; NoCache skips the disk and keeps only the
// per-process copy.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/druto/druto/pkg/device/gpu"
)

// stepVerdict is what stepChecks decided, as cached.
type stepVerdict struct {
	Key    string      `json:"key"`
	Checks []StepCheck `json:"step_checks"`
	Usable bool        `json:"usable"`
	Notes  []string    `json:"notes,omitempty"`
	Graphs string      `json:"graphs,omitempty"` // Report.Graphs
}

var (
	stepMu    sync.Mutex
	stepCache = map[string]stepVerdict{} // this process's verdicts by key

	exeOnce sync.Once
	exeHash string // sha256 of the running executable, "" when unreadable
)

// executableHash returns the hex sha256 of the running program's file.
func executableHash() string {
	exeOnce.Do(func() {
		p, err := os.Executable()
		if err != nil {
			return
		}
		f, err := os.Open(p)
		if err != nil {
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			exeHash = hex.EncodeToString(h.Sum(nil))
		}
	})
	return exeHash
}

// stepKey is the cache key of the step checks for the device described by
// r (detection has filled Driver, Devices and Kernels) under fused. It is
// "" when the program's file cannot be read (then nothing is cached).
func stepKey(r *Report, fused bool) string {
	exe := executableHash()
	if exe == "" || r.Driver == nil || len(r.Devices) == 0 {
		return ""
	}
	d := r.Devices[0]
	h := sha256.New()
	fmt.Fprintf(h, "druto step checks v1\nexe %s\ndevice %s pci %d mem %d %s\ncuda %s\nfused %v\n", exe, d.Name, d.PCIBus, d.TotalMem, d.Arch, r.Driver.CUDA, fused)
	for _, k := range r.Kernels { // how each kernel was built: NVRTC (which version) or PTX
		fmt.Fprintf(h, "kernel %s/%s %s %s\n", k.Name, k.DType, k.Arch, buildKind(k.Status))
	}
	if len(r.Libraries) > 1 {
		fmt.Fprintf(h, "nvrtc %s\n", r.Libraries[1].Version)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildKind folds a freshly compiled and a cached cubin together: both are
// the same NVRTC output.
func buildKind(f gpu.From) string {
	if f == gpu.FromCache {
		return string(gpu.FromNVRTC)
	}
	return string(f)
}

// stepCacheFile is where the verdict for key lives on disk, or "" when the
// disk cache is off.
func stepCacheFile(o Options, key string) string {
	if o.NoCache || key == "" {
		return ""
	}
	dir := o.CacheDir
	if dir == "" {
		var err error
		if dir, err = gpu.DefaultCacheDir(); err != nil {
			return ""
		}
	}
	return filepath.Join(dir, "stepchecks", key+".json")
}

// cachedSteps returns a verdict for key from this process or the disk.
func cachedSteps(o Options, key string) (stepVerdict, bool) {
	if key == "" {
		return stepVerdict{}, false
	}
	stepMu.Lock()
	defer stepMu.Unlock()
	if v, ok := stepCache[key]; ok {
		return v, true
	}
	f := stepCacheFile(o, key)
	if f == "" {
		return stepVerdict{}, false
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return stepVerdict{}, false
	}
	var v stepVerdict
	if json.Unmarshal(b, &v) != nil || v.Key != key || len(v.Checks) == 0 {
		return stepVerdict{}, false // unreadable or foreign: run the checks again
	}
	stepCache[key] = v
	return v, true
}

// keepSteps remembers a verdict in this process and, when the disk cache
// is on, writes it atomically beside the kernel cache. The caller keeps
// only passing verdicts (a failure may be transient, e.g. memory taken by
// another process, and is checked again next time).
func keepSteps(o Options, v stepVerdict) error {
	if v.Key == "" {
		return nil
	}
	stepMu.Lock()
	stepCache[v.Key] = v
	stepMu.Unlock()
	f := stepCacheFile(o, v.Key)
	if f == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return fmt.Errorf("druto: step-check cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f), ".stepchecks-*")
	if err != nil {
		return fmt.Errorf("druto: step-check cache: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("druto: step-check cache: %w", errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp.Name(), f); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("druto: step-check cache: %w", err)
	}
	return nil
}

// forget drops this process's verdicts (tests: only the disk copy is left).
func forget() {
	stepMu.Lock()
	clear(stepCache)
	stepMu.Unlock()
}
