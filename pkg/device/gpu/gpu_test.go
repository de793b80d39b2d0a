package gpu

// gpu_test.go: the shared test fixture (one context and two devices, fused
// and decomposed, for the whole test binary; host/device tensor helpers;
// the comparison that logs relative errors) and the tests of the core.
//
// Every GPU test skips when no GPU is usable, with the reason; with
// DRUTO_REQUIRE_GPU=1 (set it on the GPU machine) the skip is a failure, so
// a skip cannot pass for a pass. Comparisons use tensor.Close with the
// tolerance of the dtype the op computes in; each test says why it scales
// the tolerance where it does. Lines "RESULT op dtype form shape output
// relerr" are grepped into the H200 logs.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// fixture is the test binary's one GPU context and its two devices.
type fixture struct {
	once  sync.Once
	ctx   *cuda.Context
	libs  *cuda.Libraries
	fused *Device
	plain *Device
	err   error
}

var fx fixture

// setup loads the libraries, makes the context on device 0 and builds both
// devices (the kernel cache makes the second build a load).
func (f *fixture) setup() {
	f.libs = cuda.Load(cuda.LoadOptions{})
	if f.err = f.libs.Err; f.err != nil {
		return
	}
	n, err := f.libs.Driver.DeviceCount()
	if err == nil && n == 0 {
		err = cuda.ErrNoDevice
	}
	if f.err = err; err != nil {
		return
	}
	if f.ctx, f.err = f.libs.Driver.NewContext(0); f.err != nil {
		return
	}
	start := time.Now()
	if f.fused, f.err = NewWith(f.ctx, Config{Options: device.Options{Fused: true}, Libs: f.libs}); f.err != nil {
		return
	}
	built := time.Since(start)
	if f.plain, f.err = NewWith(f.ctx, Config{Options: device.Options{Fused: false}, Libs: f.libs}); f.err != nil {
		return
	}
	fmt.Fprintf(os.Stderr, "gpu test fixture: %s; kernels built in %v\n", f.fused.Name(), built.Round(time.Millisecond))
	for _, e := range f.fused.KernelErrors() {
		fmt.Fprintf(os.Stderr, "gpu test fixture: unavailable: %s\n", e)
	}
}

// gpuDev returns the shared fused or decomposed device.
func gpuDev(t *testing.T, fused bool) *Device {
	t.Helper()
	fx.once.Do(fx.setup)
	if fx.err != nil {
		gputest.Skip(t, fx.err)
	}
	if fused {
		return fx.fused
	}
	return fx.plain
}

// testRNG returns the random source of one test: seeded from DRUTO_SEED
// when set, else from the clock (fresh inputs each run); the seed is logged
// so that a failure on the GPU machine can be replayed with DRUTO_SEED.
func testRNG(t *testing.T) *tensor.RNG {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DRUTO_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DRUTO_SEED=%q: want an unsigned integer", s)
		}
		seed = v
	}
	t.Logf("seed %d (replay with DRUTO_SEED=%d)", seed, seed)
	return tensor.NewRNG(seed)
}

// forms are the two forms every op is tested in.
var forms = []bool{true, false}

// formName names a form in logs.
func formName(fused bool) string {
	if fused {
		return "fused"
	}
	return "decomposed"
}

// floatDTypes are the dtypes the policies compute in.
var floatDTypes = []tensor.DType{tensor.F32, tensor.BF16, tensor.F16}

// randHost returns a host tensor of fresh normal values mean + std·N(0,1),
// rounded to dt.
func randHost(rng *tensor.RNG, dt tensor.DType, mean, std float64, shape ...int) *tensor.Tensor {
	h := tensor.New(dt, shape...)
	v := make([]float32, h.Numel())
	for i := range v {
		v[i] = float32(mean + std*rng.Norm())
	}
	if err := h.SetF32(v); err != nil {
		panic(err) // dt is a float dtype in every caller
	}
	return h
}

// toGPU allocates a device copy of host h, freed when the test ends.
func toGPU(t *testing.T, g *Device, h *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	d, err := g.Alloc(h.DType, h.Shape...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(d) })
	g.Upload(d, h)
	return d
}

// poisoned allocates a device tensor filled with NaN (all-ones bytes are
// NaN in every float dtype), freed when the test ends.
func poisoned(t *testing.T, g *Device, dt tensor.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	d, err := g.Alloc(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(d) })
	if err := g.Stream().Memset8(cuda.DevicePtr(d.Dev), 0xff, uint64(d.Bytes())); err != nil {
		t.Fatal(err)
	}
	return d
}

// toHost downloads a device tensor after checking the device's errors.
func toHost(t *testing.T, g *Device, d *tensor.Tensor) *tensor.Tensor {
	t.Helper()
	h := tensor.New(d.DType, d.Shape...)
	g.Download(h, d)
	if err := g.Sync(); err != nil {
		t.Fatalf("gpu: %v", err)
	}
	return h
}

// clone returns a host copy of h.
func clone(h *tensor.Tensor) *tensor.Tensor {
	c := tensor.New(h.DType, h.Shape...)
	copy(c.Raw(), h.Raw())
	return c
}

// cpuRef returns the CPU reference device of the same form.
func cpuRef(fused bool) *cpu.Device { return cpu.New(device.Options{Fused: fused}) }

// relErr is tensor.RelErr with NaN shown as +Inf.
func relErr(got, want []float32) float64 {
	e := tensor.RelErr(got, want)
	if math.IsNaN(e) {
		return math.Inf(1)
	}
	return e
}

// check compares got (GPU) with want (CPU) under dt's tolerance times
// scale, logs the relative error in a RESULT line and fails on a mismatch.
func check(t *testing.T, op string, dt tensor.DType, fused bool, shape, output string, got, want *tensor.Tensor, tol tensor.DType, scale float64) {
	t.Helper()
	g, w := got.ToF32(), want.ToF32()
	e := relErr(g, w)
	t.Logf("RESULT %s %s %s %s %s relerr %.3g", op, dt, formName(fused), shape, output, e)
	if err := tensor.CloseF32(g, w, tol, scale); err != nil {
		t.Errorf("%s %s %s %s: %s: %v (relative error %.3g)", op, dt, formName(fused), shape, output, err, e)
	}
}

// trim drops the largest size under -test.short (the compute-sanitizer
// run, where every access is checked).
func trim[S any](sizes []S) []S {
	if testing.Short() && len(sizes) > 2 {
		return sizes[:len(sizes)-1]
	}
	return sizes
}

// shortTo keeps the first n sizes under -test.short: racecheck and
// synccheck instrument every shared-memory access, and at the largest
// sizes of these tables they run for tens of minutes. The sizes kept still
// take every kernel and every code path (tails, several tiles, several
// blocks a row); the full tables run without -test.short.
func shortTo[S any](sizes []S, n int) []S {
	if testing.Short() && len(sizes) > n {
		return sizes[:n]
	}
	return sizes
}

// sqrtScale is the tolerance scale of an fp32 result that sums k terms in
// an order that differs between cuBLAS and the CPU GEMM: the rounding
// errors of such sums grow like √k ulps of the terms, and the inputs are
// sized so that results are O(1); √k/8 keeps k ≤ 64 at scale 1.
func sqrtScale(k int) float64 { return max(1, math.Sqrt(float64(k))/8) }

func TestGPUCore(t *testing.T) {
	g := gpuDev(t, true)
	if !strings.HasPrefix(g.Name(), "gpu (") || !g.Fused() || gpuDev(t, false).Fused() {
		t.Fatalf("name %q fused %v", g.Name(), g.Fused())
	}
	rng := testRNG(t)
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, tensor.I32} {
		for _, n := range []int{1, 17, 1000, 1 << 20} {
			d, err := g.Alloc(dt, n)
			if err != nil {
				t.Fatal(err)
			}
			zero := toHost(t, g, d)
			for i, b := range zero.Raw() {
				if b != 0 {
					t.Fatalf("%s(%d): Alloc left byte %d = %#x", dt, n, i, b)
				}
			}
			h := tensor.New(dt, n)
			for i := range h.Raw() {
				h.Raw()[i] = byte(rng.Uint64())
			}
			g.Upload(d, h)
			back := toHost(t, g, d)
			if string(back.Raw()) != string(h.Raw()) {
				t.Fatalf("%s(%d): upload/download changed the bytes", dt, n)
			}
			g.Zero(d)
			for i, b := range toHost(t, g, d).Raw() {
				if b != 0 {
					t.Fatalf("%s(%d): Zero left byte %d = %#x", dt, n, i, b)
				}
			}
			g.Free(d)
			if d.Dev != 0 {
				t.Fatal("Free left the device address")
			}
		}
	}
	// Errors are recorded, returned once by Sync, and wrap the sentinels.
	a := poisoned(t, g, tensor.F32, 4)
	h := tensor.New(tensor.F32, 5)
	g.Upload(a, h)
	if err := g.Sync(); !errors.Is(err, tensor.ErrShape) {
		t.Fatalf("upload of 5 into 4 elements: Sync = %v, want ErrShape", err)
	}
	if err := g.Sync(); err != nil {
		t.Fatalf("the error was not cleared: %v", err)
	}
	b := poisoned(t, g, tensor.BF16, 2, 3)
	g.Matmul(b, nil, a.MustView(0, 2, 2), poisoned(t, g, tensor.F32, 3, 2), nil, 2, 2, 3, device.None)
	if err := g.Sync(); !errors.Is(err, device.ErrUnsupported) {
		t.Fatalf("matmul of mixed dtypes: Sync = %v, want ErrUnsupported", err)
	}
	g.Matmul(b, nil, h, h, nil, 2, 2, 3, device.None) // host tensors
	if err := g.Sync(); err == nil {
		t.Fatal("matmul of host tensors: no error")
	}
	// Scratch buffers are reused and grow.
	p1 := g.scratch("test", 100)
	if p2 := g.scratch("test", 50); p2 != p1 {
		t.Fatal("a smaller scratch request moved the buffer")
	}
	if p3 := g.scratch("test", 1<<20); p3 == 0 {
		t.Fatal("scratch growth failed")
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Alloc(tensor.F32, -1); err == nil {
		t.Fatal("Alloc with a negative extent: no error")
	}
}
