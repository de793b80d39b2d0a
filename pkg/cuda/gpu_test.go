//go:build cgo && linux

package cuda

// gpu_test.go: tests on a real GPU. They skip where the driver or a device
// is missing, unless DRUTO_REQUIRE_GPU=1, which turns the skip into a
// failure (set it on the GPU machine so that a skip cannot pass for a pass).

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/tensor"
)

var (
	gpuOnce sync.Once
	gpuLibs *Libraries
	gpuErr  error
)

// gpuContext returns the loaded libraries and a fresh context on device 0.
func gpuContext(t *testing.T) (*Libraries, *Context) {
	t.Helper()
	gpuOnce.Do(func() {
		gpuLibs = Load(LoadOptions{})
		gpuErr = gpuLibs.Err
		if gpuErr == nil {
			var n int
			if n, gpuErr = gpuLibs.Driver.DeviceCount(); gpuErr == nil && n == 0 {
				gpuErr = ErrNoDevice
			}
		}
	})
	if gpuErr != nil {
		gputest.Skip(t, gpuErr)
	}
	c, err := gpuLibs.Driver.NewContext(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return gpuLibs, c
}

// nvrtcOnly loads NVRTC alone (no driver or device needed), skipping when
// it is missing unless DRUTO_REQUIRE_GPU=1.
func nvrtcOnly(t *testing.T) *NVRTC {
	t.Helper()
	n, err := LoadNVRTC(LoadOptions{})
	if err != nil {
		testreq.Skip(t, "DRUTO_NVRTC_TESTS", "NVRTC does not load: %v", err)
	}
	return n
}

func needNVRTC(t *testing.T, l *Libraries) *NVRTC {
	t.Helper()
	if l.NVRTC == nil {
		t.Fatalf("NVRTC not loaded: %+v", l.Info[1])
	}
	return l.NVRTC
}

// testKernels is CUDA C for the launch, argument and graph tests.
const testKernels = `
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void args(long long* out, int i32, long long i64, float f, double d,
                                unsigned int u32, unsigned long long u64, char* p) {
    out[0] = i32; out[1] = i64; out[2] = (long long)(f * 1000.0f); out[3] = (long long)(d * 1000.0);
    out[4] = u32; out[5] = (long long)u64; out[6] = (long long)p;
}
`

func TestGPUDeviceQuery(t *testing.T) {
	l, c := gpuContext(t)
	d := c.Device
	free, total, err := c.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device %d: %s, cc %s (%s), %d SMs, %d MiB total, %d MiB free, L2 %d KiB, %d max threads, %d KiB shared opt-in",
		d.Ordinal, d.Name, d.CC(), d.Arch(), d.SMs, d.TotalMem>>20, free>>20, d.L2Bytes>>10, d.MaxThreads, d.SharedPerBlock>>10)
	for _, li := range l.Info {
		t.Logf("library %-8s found=%v version=%s path=%s %s", li.Name, li.Found, li.Version, li.Path, li.Error)
	}
	if d.Name == "" || d.Major < 7 || d.SMs <= 0 || d.TotalMem == 0 || total == 0 || free == 0 || free > total {
		t.Fatalf("implausible device %+v, free %d total %d", d, free, total)
	}
	if l.Driver.Version() < MinDriverVersion {
		t.Fatalf("driver %d", l.Driver.Version())
	}
	if l.NVML != nil {
		v, err := l.NVML.DriverVersion()
		devs, derr := l.NVML.Devices()
		if err != nil || derr != nil || v == "" || len(devs) == 0 {
			t.Fatalf("nvml: %q %v %v %v", v, devs, err, derr)
		}
		cv, _ := l.NVML.CUDAVersion()
		t.Logf("nvml: driver %s, CUDA %s, device 0 %q, %d MiB total, %d MiB used", v, versionString(cv), devs[0].Name, devs[0].Total>>20, devs[0].Used>>20)
		if devs[0].Name != d.Name {
			t.Errorf("NVML names device 0 %q, the driver %q", devs[0].Name, d.Name)
		}
	}
}

func TestGPUCopyRoundTrip(t *testing.T) {
	_, c := gpuContext(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	p := c.Pool()
	for _, n := range []int{1, 12345, 1 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rand.Uint32())
		}
		a, err1 := p.Alloc(uint64(n))
		b, err2 := p.Alloc(uint64(n))
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		err = errors.Join(s.CopyHtoD(a, src), s.Memset8(b, 0xab, uint64(n)), s.CopyDtoD(b, a, uint64(n)), s.CopyDtoH(got, b))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("%d bytes: round trip differs", n)
		}
		if n%4 == 0 {
			if err := s.Memset32(b, 0x3f800000, uint64(n/4)); err != nil {
				t.Fatal(err)
			}
			f := make([]float32, n/4)
			if err := Download(s, f, b); err != nil {
				t.Fatal(err)
			}
			for i, v := range f {
				if v != 1 {
					t.Fatalf("memset32: f[%d] = %v", i, v)
				}
			}
		}
		_ = p.Free(a)
		_ = p.Free(b)
	}
}

// TestGPUPoolSteadyState: after a warm-up step, steps that allocate and
// free the same sizes make no cuMemAlloc call.
func TestGPUPoolSteadyState(t *testing.T) {
	_, c := gpuContext(t)
	p := c.Pool()
	sizes := []uint64{1000, 1<<20 + 1, 3 << 20, 512, 64 << 20}
	var warm int64
	for step := range 10 {
		var ptrs []DevicePtr
		for _, n := range sizes {
			ptr, err := p.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			ptrs = append(ptrs, ptr)
		}
		for _, ptr := range ptrs {
			if err := p.Free(ptr); err != nil {
				t.Fatal(err)
			}
		}
		if step == 0 {
			warm = p.Stats().Mallocs
		}
	}
	st := p.Stats()
	t.Logf("pool after 10 steps: %+v", st)
	if st.Mallocs != warm {
		t.Fatalf("cuMemAlloc called %d times after the first step", st.Mallocs-warm)
	}
}

func TestGPUOutOfMemory(t *testing.T) {
	_, c := gpuContext(t)
	const asked = 1 << 40 // 1 TiB
	_, err := c.Pool().Alloc(asked)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err = %v, want *OutOfMemoryError", err)
	}
	t.Logf("OOM text: %v (driver: %v)", err, oom.Err)
	if oom.Asked != asked || oom.Free == 0 || oom.Free > oom.Total || !strings.Contains(err.Error(), "asked 1099511627776 bytes") {
		t.Fatalf("oom %+v", oom)
	}
	var ce Error
	if !errors.As(err, &ce) || ce.Call != "cuMemAlloc_v2" || ce.Code != 2 {
		t.Fatalf("driver error %v", oom.Err)
	}
}

// TestNVRTCCompile compiles for sm_75 through sm_90 and to compute_75 PTX,
// and checks that a bad source returns NVRTC's log; it needs NVRTC only.
func TestNVRTCCompile(t *testing.T) {
	n := nvrtcOnly(t)
	archs, err := n.SupportedArchs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %s (%s) supports %v", n.Version(), n.Info().Path, archs)
	for _, arch := range []string{"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"} {
		start := time.Now()
		cubin, log, err := n.Compile(testKernels, "test.cu", arch)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		t.Logf("%s: %d-byte cubin in %v %s", arch, len(cubin), time.Since(start).Round(time.Millisecond), log)
		if !IsCubin(cubin) {
			t.Fatalf("%s: not an ELF cubin", arch)
		}
	}
	ptx, _, err := n.Compile(testKernels, "test.cu", "compute_75")
	if err != nil || IsCubin(ptx) || !bytes.Contains(ptx, []byte(".target sm_75")) {
		t.Fatalf("compute_75 PTX: %v\n%.200s", err, ptx)
	}
	_, log, err := n.Compile("extern \"C\" __global__ void k() { this is not C++; }", "bad.cu", "sm_90")
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "error") || !strings.Contains(err.Error(), "bad.cu") || log == "" {
		t.Fatalf("bad source: err %v, log %q", err, log)
	}
	t.Logf("compile error reported as: %s", strings.ReplaceAll(err.Error(), "\n", " | "))
}

// loadTest compiles the test kernels as a cubin for the device, or as
// compute_75 PTX that the driver JIT compiles.
func loadTest(t *testing.T, l *Libraries, c *Context, ptx bool) *Module {
	t.Helper()
	arch := c.Device.Arch()
	if ptx {
		arch = "compute_75"
	}
	code, _, err := needNVRTC(t, l).Compile(testKernels, "test.cu", arch)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LoadModule(code)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unload() })
	return m
}

func TestGPULaunchArgs(t *testing.T) {
	l, c := gpuContext(t)
	for _, ptx := range []bool{false, true} {
		m := loadTest(t, l, c, ptx)
		f, err := m.Function("args")
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.Attributes()
		if err != nil || a.Registers <= 0 || a.MaxThreads < 256 {
			t.Fatalf("attributes %+v %v", a, err)
		}
		t.Logf("args kernel (from PTX %v, load %v): %+v", m.FromPTX, m.LoadTime.Round(time.Microsecond), a)
		out, _ := c.Pool().Alloc(7 * 8)
		s := c.DefaultStream()
		err = f.Launch(s, D1(1), D1(1), 0, out, -7, int64(-1)<<40, float32(2.5), 3.25, uint32(0xfffffff0), uint64(1)<<62, DevicePtr(0xdeadbeef00))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int64, 7)
		if err := errors.Join(s.Synchronize(), Download(s, got, out)); err != nil {
			t.Fatal(err)
		}
		want := []int64{-7, -1 << 40, 2500, 3250, 0xfffffff0, 1 << 62, 0xdeadbeef00}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("kernel saw %v, want %v", got, want)
		}
		_ = c.Pool().Free(out)
	}
}

// TestGPUGraph captures ten axpy launches, replays the graph three times,
// and checks y = y0 + 30·a·x; it times eager launches against replays.
func TestGPUGraph(t *testing.T) {
	l, c := gpuContext(t)
	m := loadTest(t, l, c, false)
	f, err := m.Function("axpy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1<<20 + 3
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(rand.NormFloat64()), float32(rand.NormFloat64())
	}
	dx, _ := c.Pool().Alloc(4 * n)
	dy, _ := c.Pool().Alloc(4 * n)
	defer c.Pool().Free(dx)
	defer c.Pool().Free(dy)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := errors.Join(Upload(s, dx, x), Upload(s, dy, y)); err != nil {
		t.Fatal(err)
	}
	const a, launches, replays = float32(0.5), 10, 3
	grid := (n + 255) / 256
	g, err := s.Capture(func() error {
		for range launches {
			if err := f.Launch(s, D1(grid), D1(256), 0, dy, dx, a, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	for range replays {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]float32, n)
	if err := errors.Join(s.Synchronize(), Download(s, got, dy)); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n)
	for i := range want {
		v := y[i]
		for range launches * replays {
			v += a * x[i]
		}
		want[i] = v
	}
	if err := tensor.CloseF32(got, want, tensor.F32, 1); err != nil {
		t.Fatalf("graph replay: %v", err)
	}
	// Timing: eager launches against graph replays, medians of 20.
	e0, _ := c.NewEvent()
	e1, _ := c.NewEvent()
	defer e0.Destroy()
	defer e1.Destroy()
	timeIt := func(run func() error) time.Duration {
		var ds []time.Duration
		for range 21 {
			if err := errors.Join(e0.Record(s), run(), e1.Record(s)); err != nil {
				t.Fatal(err)
			}
			d, err := Elapsed(e0, e1)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	eager := timeIt(func() error {
		return c.Do(func() error {
			for range launches {
				if err := f.Launch(s, D1(grid), D1(256), 0, dy, dx, a, n); err != nil {
					return err
				}
			}
			return nil
		})
	})
	replay := timeIt(func() error { return g.Launch(s) })
	if eager <= 0 || replay <= 0 {
		t.Fatalf("elapsed times %v %v", eager, replay)
	}
	bytesMoved := float64(launches) * 3 * 4 * n // read x, read y, write y
	t.Logf("10 axpy launches of %d floats: eager %v (%.0f GB/s), graph replay %v (%.0f GB/s)",
		n, eager, bytesMoved/eager.Seconds()/1e9, replay, bytesMoved/replay.Seconds()/1e9)
}

// randMatrix returns rows×cols normal values scaled by 1/sqrt(k), rounded
// to dt, as float32 and as the dtype's raw bytes.
func randMatrix(rows, cols, k int, dt tensor.DType) ([]float32, []byte) {
	t := tensor.New(dt, rows, cols)
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rand.NormFloat64() / math.Sqrt(float64(k)))
	}
	_ = t.SetF32(v)
	return t.ToF32(), t.Raw()
}

// refMatmul is out(N,OC) = inp(N,C)·W(OC,C)ᵀ (+ bias) in float64.
func refMatmul(inp, w, bias []float32, N, C, OC int, gelu bool) []float64 {
	out := make([]float64, N*OC)
	for i := range N {
		for o := range OC {
			var s float64
			for k := range C {
				s += float64(inp[i*C+k]) * float64(w[o*C+k])
			}
			if bias != nil {
				s += float64(bias[o])
			}
			if gelu {
				s = 0.5 * s * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(s+0.044715*s*s*s)))
			}
			out[i*OC+o] = s
		}
	}
	return out
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func relErr64(got, want []float64) float64 {
	var num, den float64
	for i := range got {
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

// TestGPUGemmEx checks cublasGemmEx (fp32 and bf16 inputs) and the strided
// batched form against a float64 CPU matmul of the same rounded inputs.
func TestGPUGemmEx(t *testing.T) {
	l, c := gpuContext(t)
	if l.BLAS == nil {
		t.Fatalf("cuBLAS not loaded: %+v", l.Info[3])
	}
	s, _ := c.NewStream()
	defer s.Destroy()
	h, err := l.BLAS.NewHandle(c, s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy()
	const N, C, OC = 67, 96, 80
	pool := c.Pool()
	for _, tc := range []struct {
		in, out tensor.DType
	}{{tensor.F32, tensor.F32}, {tensor.BF16, tensor.F32}, {tensor.BF16, tensor.BF16}, {tensor.F16, tensor.F16}} {
		inp, inpRaw := randMatrix(N, C, C, tc.in)
		w, wRaw := randMatrix(OC, C, C, tc.in)
		dIn, _ := pool.Alloc(uint64(len(inpRaw)))
		dW, _ := pool.Alloc(uint64(len(wRaw)))
		dOut, _ := pool.Alloc(uint64(N * OC * tc.out.Size()))
		if err := errors.Join(s.CopyHtoD(dIn, inpRaw), s.CopyHtoD(dW, wRaw), s.Memset8(dOut, 0xff, uint64(N*OC*tc.out.Size()))); err != nil {
			t.Fatal(err)
		}
		dtype := map[tensor.DType]DataType{tensor.F32: R32F, tensor.BF16: R16BF, tensor.F16: R16F}
		err := h.GemmEx(Gemm{TransA: true, M: OC, N: N, K: C, Alpha: 1, Beta: 0,
			A: dW, AType: dtype[tc.in], LDA: C, B: dIn, BType: dtype[tc.in], LDB: C, C: dOut, CType: dtype[tc.out], LDC: OC,
			Compute: Compute32F})
		if err != nil {
			t.Fatalf("%v->%v: %v", tc.in, tc.out, err)
		}
		out := tensor.New(tc.out, N, OC)
		if err := errors.Join(s.Synchronize(), s.CopyDtoH(out.Raw(), dOut)); err != nil {
			t.Fatal(err)
		}
		want := refMatmul(inp, w, nil, N, C, OC, false)
		got := f64(out.ToF32())
		// Element-wise: the output dtype's tolerance, scaled by the K
		// accumulation steps for fp32 results.
		scale := 1.0
		if tc.out == tensor.F32 {
			scale = C
		}
		if err := tensor.Close(got, want, tc.out, scale); err != nil {
			t.Errorf("gemm %v->%v: %v", tc.in, tc.out, err)
		}
		t.Logf("cublasGemmEx %v->%v (%d,%d)x(%d,%d)ᵀ: rel err %.3g", tc.in, tc.out, N, C, OC, C, relErr64(got, want))
		_ = pool.Free(dIn)
		_ = pool.Free(dW)
		_ = pool.Free(dOut)
	}

	// Strided batched, fp32: 3 independent products.
	const B = 3
	var inps, ws, wants [][]float32
	dIn, _ := pool.Alloc(4 * B * N * C)
	dW, _ := pool.Alloc(4 * B * OC * C)
	dOut, _ := pool.Alloc(4 * B * N * OC)
	for b := range B {
		inp, inpRaw := randMatrix(N, C, C, tensor.F32)
		w, wRaw := randMatrix(OC, C, C, tensor.F32)
		inps, ws = append(inps, inp), append(ws, w)
		if err := errors.Join(s.CopyHtoD(dIn.Add(uint64(4*b*N*C)), inpRaw), s.CopyHtoD(dW.Add(uint64(4*b*OC*C)), wRaw)); err != nil {
			t.Fatal(err)
		}
		ref := refMatmul(inp, w, nil, N, C, OC, false)
		r32 := make([]float32, len(ref))
		for i, v := range ref {
			r32[i] = float32(v)
		}
		wants = append(wants, r32)
	}
	err = h.GemmStridedBatched(Gemm{TransA: true, M: OC, N: N, K: C, Alpha: 1, A: dW, AType: R32F, LDA: C,
		B: dIn, BType: R32F, LDB: C, C: dOut, CType: R32F, LDC: OC, Compute: Compute32F,
		StrideA: OC * C, StrideB: N * C, StrideC: N * OC, Batch: B})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, B*N*OC)
	if err := errors.Join(s.Synchronize(), Download(s, got, dOut)); err != nil {
		t.Fatal(err)
	}
	for b := range B {
		if err := tensor.CloseF32(got[b*N*OC:(b+1)*N*OC], wants[b], tensor.F32, C); err != nil {
			t.Errorf("strided batch %d: %v", b, err)
		}
	}
	t.Logf("cublasGemmStridedBatchedEx f32 x%d: rel err %.3g", B, tensor.RelErr(got[:N*OC], wants[0]))
	_ = pool.Free(dIn)
	_ = pool.Free(dW)
	_ = pool.Free(dOut)
}

// TestGPULtMatmul checks cublasLtMatmul with the bias epilogue (fp32) and
// the GELU+bias epilogue (bf16) against the CPU.
func TestGPULtMatmul(t *testing.T) {
	s, h, pool, ws := ltSetup(t)
	const N, C, OC = 64, 128, 96
	for _, tc := range []struct {
		dt  tensor.DType
		typ DataType
		epi Epilogue
	}{{tensor.F32, R32F, EpilogueBias}, {tensor.BF16, R16BF, EpilogueGELUBias}, {tensor.F16, R16F, EpilogueBias}} {
		inp, inpRaw := randMatrix(N, C, C, tc.dt)
		w, wRaw := randMatrix(OC, C, C, tc.dt)
		bias, biasRaw := randMatrix(1, OC, 1, tc.dt)
		dIn, _ := pool.Alloc(uint64(len(inpRaw)))
		dW, _ := pool.Alloc(uint64(len(wRaw)))
		dB, _ := pool.Alloc(uint64(len(biasRaw)))
		outBytes := uint64(N * OC * tc.dt.Size())
		dOut, _ := pool.Alloc(outBytes)
		if err := errors.Join(s.CopyHtoD(dIn, inpRaw), s.CopyHtoD(dW, wRaw), s.CopyHtoD(dB, biasRaw), s.Memset8(dOut, 0xff, outBytes)); err != nil {
			t.Fatal(err)
		}
		mm, err := h.NewMatmul(LtParams{TransA: true, M: OC, N: N, K: C, AType: tc.typ, BType: tc.typ, CType: tc.typ,
			LDA: C, LDB: C, LDC: OC, Compute: Compute32F, Epilogue: tc.epi, MaxWorkspace: ltWorkspace})
		if err != nil {
			t.Fatalf("%v: %v", tc.dt, err)
		}
		err = mm.Run(s, LtArgs{Alpha: 1, A: dW, B: dIn, D: dOut, Bias: dB, Workspace: ws, WorkspaceBytes: ltWorkspace})
		if err != nil {
			t.Fatalf("%v: %v", tc.dt, err)
		}
		out := tensor.New(tc.dt, N, OC)
		if err := errors.Join(s.Synchronize(), s.CopyDtoH(out.Raw(), dOut)); err != nil {
			t.Fatal(err)
		}
		want := refMatmul(inp, w, bias, N, C, OC, tc.epi == EpilogueGELUBias)
		got := f64(out.ToF32())
		scale := 1.0
		if tc.dt == tensor.F32 {
			scale = C
		}
		if err := tensor.Close(got, want, tc.dt, scale); err != nil {
			t.Errorf("lt %v epilogue %d: %v", tc.dt, tc.epi, err)
		}
		t.Logf("cublasLtMatmul %v epilogue %d (workspace %d B): rel err %.3g", tc.dt, tc.epi, mm.WorkspaceRequired, relErr64(got, want))
		if err := mm.Destroy(); err != nil {
			t.Error(err)
		}
		for _, p := range []DevicePtr{dIn, dW, dB, dOut} {
			_ = pool.Free(p)
		}
	}
}
