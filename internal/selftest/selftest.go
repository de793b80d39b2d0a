// Package selftest keeps the verdict of detection's GPU self-test (the op
// tests with each kernel's verdict, the step checks and the graph check)
// once per process and on disk beside the kernel cache, so that `druto
// train` and each mode of `druto bench` (which opens the device once per
// mode) do not repeat the conformance cases (about 2 s on an H200) and the
// three training steps with their CPU reference (about 2 s more). `druto
// detect` runs the op tests afresh every time and refreshes the record
// (Cache.Ops with fresh).
//
// The key (Key) covers everything the verdict depends on: the program
// itself (the sha256 of the running executable: Go launchers, embedded
// kernel sources and PTX, the conformance cases), the GPU (name, PCI bus,
// memory, architecture), the driver's CUDA version, how the kernels were
// built (NVRTC version or embedded PTX), the attention backend (cuDNN's
// version or why it is off), the environment that changes the GPU's paths,
// and the fused/decomposed form. A new build, driver or GPU gives a new
// key, so a stale verdict is never reused; a Cache with Off set skips the
// disk and keeps only the per-process copy. Only a verdict that passed
// everything is kept: a failure is never hidden behind an older pass.
package selftest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// Verdict is what the self-test decided, as cached.
type Verdict struct {
	Key     string                     `json:"key"`
	OpTests []devicetest.Result        `json:"op_tests"`
	Kernels map[string]*gpu.KernelTest `json:"kernel_tests,omitempty"` // by "name/dtype"
	Checks  []train.StepCheck          `json:"step_checks"`
	Usable  bool                       `json:"usable"`
	Notes   []string                   `json:"notes,omitempty"`
	Graphs  string                     `json:"graphs,omitempty"` // the graph check (train.GraphCheck)
}

// OpsPass reports whether every op test passed (cuDNN's included), and
// there was at least one.
func OpsPass(rs []devicetest.Result) bool {
	for _, t := range rs {
		if !t.Pass {
			return false
		}
	}
	return len(rs) > 0
}

// Whole reports whether v passed everything under key and can be kept or
// reused.
func (v Verdict) Whole(key string) bool {
	return key != "" && v.Key == key && v.Usable && OpsPass(v.OpTests) && len(v.Checks) > 0
}

var (
	verdictMu sync.Mutex
	verdicts  = map[string]Verdict{} // this process's verdicts by key

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

// keyEnv are the variables that change which GPU path an op or the step
// takes (DRUTO_ATTENTION is in the attention backend).
var keyEnv = []string{gpu.GEMMTuneEnv, gpu.DGELUEnv, gpt.HeadRowsEnv, gpu.PDLEnv}

// Subject is what a verdict depends on besides the program and the
// environment: what detection found before the op tests.
type Subject struct {
	Device    gpu.DeviceInfo // the GPU tested (device 0)
	CUDA      string         // the driver's CUDA version
	Libraries []gpu.LibInfo  // as gpu.Probe lists them (NVRTC second)
	Kernels   []*gpu.Built   // each kernel and how it was built
	Attention string         // the attention path (gpu.Device.AttentionPath)
	Fused     bool
}

// Key returns the cache key of the self-test of s. It is "" when the
// program's file cannot be read (then nothing is cached).
func Key(s Subject) string {
	exe := executableHash()
	if exe == "" {
		return ""
	}
	d := s.Device
	h := sha256.New()
	fmt.Fprintf(h, "druto self-test v2\nexe %s\ndevice %s pci %d mem %d %s\ncuda %s\nfused %v\nattention %s\n",
		exe, d.Name, d.PCIBus, d.TotalMem, d.Arch(), s.CUDA, s.Fused, s.Attention)
	for _, e := range keyEnv {
		fmt.Fprintf(h, "env %s=%s\n", e, os.Getenv(e))
	}
	for _, k := range s.Kernels { // how each kernel was built: NVRTC (which version) or PTX
		fmt.Fprintf(h, "kernel %s/%s %s %s\n", k.Kernel, k.DType, k.Arch, buildKind(k.From))
	}
	if len(s.Libraries) > 1 {
		fmt.Fprintf(h, "nvrtc %s\n", s.Libraries[1].Version)
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

// Cache is where verdicts are kept: this process, and unless Off the
// directory Dir (the kernel cache; empty: gpu.DefaultCacheDir).
type Cache struct {
	Dir string
	Off bool
}

// File returns where the verdict for key lives on disk, or "" when the
// disk cache is off.
func (c Cache) File(key string) string {
	if c.Off || key == "" {
		return ""
	}
	dir := c.Dir
	if dir == "" {
		var err error
		if dir, err = gpu.DefaultCacheDir(); err != nil {
			return ""
		}
	}
	return filepath.Join(dir, "selftest", key+".json")
}

// Load returns a whole verdict for key from this process or the disk.
func (c Cache) Load(key string) (Verdict, bool) {
	if key == "" {
		return Verdict{}, false
	}
	verdictMu.Lock()
	defer verdictMu.Unlock()
	if v, ok := verdicts[key]; ok {
		return v, true
	}
	f := c.File(key)
	if f == "" {
		return Verdict{}, false
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return Verdict{}, false
	}
	var v Verdict
	if json.Unmarshal(b, &v) != nil || !v.Whole(key) {
		return Verdict{}, false // unreadable, foreign or not a pass: test again
	}
	verdicts[key] = v
	return v, true
}

// Keep remembers a whole verdict in this process and, when the disk cache
// is on, writes it atomically beside the kernel cache. Anything short of a
// pass is not kept (a failure may be transient, e.g. memory taken by
// another process, and is tested again next time).
func (c Cache) Keep(v Verdict) error {
	if !v.Whole(v.Key) {
		return nil
	}
	verdictMu.Lock()
	verdicts[v.Key] = v
	verdictMu.Unlock()
	f := c.File(v.Key)
	if f == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("druto: self-test cache: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return fmt.Errorf("druto: self-test cache: %w", err)
	}
	if err := atomicfile.WriteFile(f, b); err != nil {
		return fmt.Errorf("druto: self-test cache: %w", err)
	}
	return nil
}

// drop forgets the verdict for key here and on disk: a fresh run failed
// where it had passed.
func (c Cache) drop(key string) {
	verdictMu.Lock()
	delete(verdicts, key)
	verdictMu.Unlock()
	if f := c.File(key); f != "" {
		_ = os.Remove(f)
	}
}

// Ops returns the op tests' verdict for key: the cached one unless fresh
// (`druto detect`, which proves the kernels work), else run's. A fresh run
// keeps the cached step checks when its op tests all pass and drops the
// cached record when one fails. cached says the op tests came from the
// cache.
func (c Cache) Ops(key string, fresh bool, run func() ([]devicetest.Result, map[string]*gpu.KernelTest)) (v Verdict, cached bool) {
	v, ok := c.Load(key)
	if ok && !fresh {
		return v, true
	}
	ops, kernels := run()
	if !OpsPass(ops) {
		if ok {
			c.drop(key)
		}
		return Verdict{Key: key, OpTests: ops, Kernels: kernels}, false
	}
	v.Key, v.OpTests, v.Kernels = key, ops, kernels
	return v, false
}

// Forget drops this process's verdicts (tests: only the disk copy is
// left).
func Forget() {
	verdictMu.Lock()
	clear(verdicts)
	verdictMu.Unlock()
}
