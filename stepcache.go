package druto

// stepcache.go: the self-test's verdict (the op tests with each kernel's
// verdict, the step checks and the graph check), kept once per process and
// on disk beside the kernel cache, so that `druto train` and each mode of
// `druto bench` (which opens the device once per mode) do not repeat the
// conformance cases (about 2 s on an H200) and the three training steps
// with their CPU reference (about 2 s more). `druto detect` runs the op
// tests afresh every time and refreshes the record.
//
// The key covers everything the verdict depends on: the program itself
// (the sha256 of the running executable: Go launchers, embedded kernel
// sources and PTX, the conformance cases), the GPU (name, PCI bus, memory,
// architecture), the driver's CUDA version, how the kernels were built
// (NVRTC version or embedded PTX), the attention backend (cuDNN's version
// or why it is off), the environment that changes the GPU's paths, and the
// fused/decomposed form. A new build, driver or GPU gives a new key, so a
// stale verdict is never reused; NoCache skips the disk and keeps only the
// per-process copy. Only a verdict that passed everything is kept: a
// failure is never hidden behind an older pass.

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
)

// verdict is what the self-test decided, as cached.
type verdict struct {
	Key     string                     `json:"key"`
	OpTests []devicetest.Result        `json:"op_tests"`
	Kernels map[string]*gpu.KernelTest `json:"kernel_tests,omitempty"` // by "name/dtype"
	Checks  []StepCheck                `json:"step_checks"`
	Usable  bool                       `json:"usable"`
	Notes   []string                   `json:"notes,omitempty"`
	Graphs  string                     `json:"graphs,omitempty"` // Report.Graphs
}

// opsPass says every op test passed (cuDNN's included).
func opsPass(rs []devicetest.Result) bool {
	for _, t := range rs {
		if !t.Pass {
			return false
		}
	}
	return len(rs) > 0
}

// whole says v passed everything and can be kept or reused.
func (v verdict) whole(key string) bool {
	return key != "" && v.Key == key && v.Usable && opsPass(v.OpTests) && len(v.Checks) > 0
}

var (
	verdictMu sync.Mutex
	verdicts  = map[string]verdict{} // this process's verdicts by key

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

// verdictKey is the cache key of the self-test for the device described
// by r (detection has filled Driver, Devices, Kernels and Attention, before
// the op tests) under fused. It is "" when the program's file cannot be
// read (then nothing is cached).
func verdictKey(r *Report, fused bool) string {
	exe := executableHash()
	if exe == "" || r.Driver == nil || len(r.Devices) == 0 {
		return ""
	}
	d := r.Devices[0]
	h := sha256.New()
	fmt.Fprintf(h, "druto self-test v2\nexe %s\ndevice %s pci %d mem %d %s\ncuda %s\nfused %v\nattention %s\n",
		exe, d.Name, d.PCIBus, d.TotalMem, d.Arch, r.Driver.CUDA, fused, r.Attention)
	for _, e := range keyEnv {
		fmt.Fprintf(h, "env %s=%s\n", e, os.Getenv(e))
	}
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

// verdictFile is where the verdict for key lives on disk, or "" when the
// disk cache is off.
func verdictFile(o Options, key string) string {
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
	return filepath.Join(dir, "selftest", key+".json")
}

// cachedVerdict returns a whole verdict for key from this process or the
// disk.
func cachedVerdict(o Options, key string) (verdict, bool) {
	if key == "" {
		return verdict{}, false
	}
	verdictMu.Lock()
	defer verdictMu.Unlock()
	if v, ok := verdicts[key]; ok {
		return v, true
	}
	f := verdictFile(o, key)
	if f == "" {
		return verdict{}, false
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return verdict{}, false
	}
	var v verdict
	if json.Unmarshal(b, &v) != nil || !v.whole(key) {
		return verdict{}, false // unreadable, foreign or not a pass: test again
	}
	verdicts[key] = v
	return v, true
}

// keepVerdict remembers a whole verdict in this process and, when the disk
// cache is on, writes it atomically beside the kernel cache. Anything short
// of a pass is not kept (a failure may be transient, e.g. memory taken by
// another process, and is tested again next time).
func keepVerdict(o Options, v verdict) error {
	if !v.whole(v.Key) {
		return nil
	}
	verdictMu.Lock()
	verdicts[v.Key] = v
	verdictMu.Unlock()
	f := verdictFile(o, v.Key)
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

// dropVerdict forgets the verdict for key here and on disk: a fresh run
// failed where it had passed.
func dropVerdict(o Options, key string) {
	verdictMu.Lock()
	delete(verdicts, key)
	verdictMu.Unlock()
	if f := verdictFile(o, key); f != "" {
		_ = os.Remove(f)
	}
}

// opVerdict returns the op tests' verdict for key: the cached one unless
// fresh (`druto detect`, which proves the kernels work), else run's. A
// fresh run keeps the cached step checks when its op tests all pass and
// drops the cached record when one fails. cached says the op tests came
// from the cache.
func opVerdict(o Options, key string, fresh bool, run func() ([]devicetest.Result, map[string]*gpu.KernelTest)) (v verdict, cached bool) {
	v, ok := cachedVerdict(o, key)
	if ok && !fresh {
		return v, true
	}
	ops, kernels := run()
	if !opsPass(ops) {
		if ok {
			dropVerdict(o, key)
		}
		return verdict{Key: key, OpTests: ops, Kernels: kernels}, false
	}
	v.Key, v.OpTests, v.Kernels = key, ops, kernels
	return v, false
}

// forget drops this process's verdicts (tests: only the disk copy is left).
func forget() {
	verdictMu.Lock()
	clear(verdicts)
	verdictMu.Unlock()
}
