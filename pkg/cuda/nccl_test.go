//go:build linux

package cuda

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/druto/druto/internal/testreq"
)

// fakeNCCL is an ncclAPI in Go: it records each call with the OS thread it
// ran on, and fails the call named in failCall with ncclSystemError.
type fakeNCCL struct {
	mu       sync.Mutex
	ver      int
	calls    []string
	threads  map[string]int // call -> OS thread of its last run
	failCall string
	async    error
	reduces  []fakeReduce
	depth    int // open groups
	lastMsg  string
}

type fakeReduce struct {
	send, recv DevicePtr
	count      uint64
	dt         NCCLDataType
	op         NCCLOp
	comm, s    uintptr
	inGroup    bool
}

func newFakeNCCL() *fakeNCCL { return &fakeNCCL{ver: 22703, threads: map[string]int{}} }

func (f *fakeNCCL) note(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	f.threads[call] = syscall.Gettid()
	if call == f.failCall {
		f.lastMsg = "fake: " + call + " failed on purpose"
		return Error{Call: call, Code: 2, Name: "ncclSystemError"}
	}
	return nil
}

func (f *fakeNCCL) version() (int, error) { return f.ver, nil }
func (f *fakeNCCL) uniqueID() (NCCLUniqueID, error) {
	var id NCCLUniqueID
	for i := range id {
		id[i] = byte(i*7 + 3)
	}
	return id, f.note("ncclGetUniqueId")
}
func (f *fakeNCCL) commInitRank(world int, id NCCLUniqueID, rank int) (uintptr, error) {
	return 0xc0ffee, f.note("ncclCommInitRank")
}
func (f *fakeNCCL) allReduce(send, recv DevicePtr, count uint64, dt NCCLDataType, op NCCLOp, comm, s uintptr) error {
	f.mu.Lock()
	f.reduces = append(f.reduces, fakeReduce{send, recv, count, dt, op, comm, s, f.depth > 0})
	f.mu.Unlock()
	return f.note("ncclAllReduce")
}
func (f *fakeNCCL) groupStart() error {
	f.mu.Lock()
	f.depth++
	f.mu.Unlock()
	return f.note("ncclGroupStart")
}
func (f *fakeNCCL) groupEnd() error {
	f.mu.Lock()
	f.depth--
	f.mu.Unlock()
	return f.note("ncclGroupEnd")
}
func (f *fakeNCCL) commDestroy(uintptr) error     { return f.note("ncclCommDestroy") }
func (f *fakeNCCL) commAbort(uintptr) error       { return f.note("ncclCommAbort") }
func (f *fakeNCCL) commAsyncError(uintptr) error  { return f.async }
func (f *fakeNCCL) lastError(comm uintptr) string { f.mu.Lock(); defer f.mu.Unlock(); return f.lastMsg }

// TestNCCLComm: NewComm, AllReduce, Group, Destroy run on the context's
// thread with the arguments given, and NCCL_NVLS_ENABLE is 0 before init.
func TestNCCLComm(t *testing.T) {
	t.Setenv(EnvNCCLNVLS, "") // registered for restore by t.Setenv, then removed
	os.Unsetenv(EnvNCCLNVLS)
	c, err := fakeContext(newFakeDriver())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := newFakeNCCL()
	n, err := newNCCL(f, LibInfo{Name: "nccl", Path: "/fake/libnccl.so.2"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Info().Version != "2.27.3" || n.Version() != 22703 {
		t.Fatalf("version %d, info %+v", n.Version(), n.Info())
	}
	id, err := n.UniqueID()
	if err != nil || id[1] != 10 {
		t.Fatalf("unique id %v, %v", id[:4], err)
	}
	if _, err := n.NewComm(c, 2, 2, id); err == nil || !strings.Contains(err.Error(), "rank 2 of 2") {
		t.Fatalf("rank out of range accepted: %v", err)
	}
	if _, err := n.NewComm(c, 2, 0, NCCLUniqueID{}); err == nil || !strings.Contains(err.Error(), "empty unique id") {
		t.Fatalf("empty id accepted: %v", err)
	}
	m, err := n.NewComm(c, 2, 1, id)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := os.LookupEnv(EnvNCCLNVLS); !ok || v != "0" {
		t.Fatalf("%s = %q (set %v) after NewComm, want 0", EnvNCCLNVLS, v, ok)
	}
	if m.Rank() != 1 || m.World() != 2 {
		t.Fatalf("rank %d world %d", m.Rank(), m.World())
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	err = m.Group(func() error {
		if err := m.AllReduce(0x1000, 0x1000, 300, NCCLFloat32, NCCLAvg, s); err != nil {
			return err
		}
		return m.AllReduce(0x2000, 0x3000, 5, NCCLBFloat16, NCCLSum, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []fakeReduce{
		{0x1000, 0x1000, 300, NCCLFloat32, NCCLAvg, 0xc0ffee, 0x5, true},
		{0x2000, 0x3000, 5, NCCLBFloat16, NCCLSum, 0xc0ffee, 0, true},
	}
	if len(f.reduces) != 2 || f.reduces[0] != want[0] || f.reduces[1] != want[1] {
		t.Fatalf("all-reduces %+v, want %+v", f.reduces, want)
	}
	for _, call := range []string{"ncclCommInitRank", "ncclGroupStart", "ncclAllReduce", "ncclGroupEnd"} {
		if got := f.threads[call]; got != c.tid {
			t.Errorf("%s ran on thread %d, the context's is %d", call, got, c.tid)
		}
	}
	// Validation at the boundary.
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"negative count", func() error { return m.AllReduce(0x1000, 0x1000, -1, NCCLFloat32, NCCLSum, s) }, "-1 elements"},
		{"null buffer", func() error { return m.AllReduce(0, 0x1000, 4, NCCLFloat32, NCCLSum, s) }, "null buffer"},
		{"bad dtype", func() error { return m.AllReduce(0x1000, 0x1000, 4, 42, NCCLSum, s) }, "data type 42"},
		{"bad op", func() error { return m.AllReduce(0x1000, 0x1000, 4, NCCLFloat32, 3, s) }, "reduction 3"},
	} {
		if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
	if err := m.AllReduce(0x1000, 0x1000, 0, NCCLFloat32, NCCLSum, s); err != nil || len(f.reduces) != 2 {
		t.Fatalf("an empty all-reduce was not a no-op: %v, %d calls", err, len(f.reduces))
	}
	// A failing call: an Error naming it, with NCCL's own description.
	f.failCall = "ncclAllReduce"
	err = m.Group(func() error { return m.AllReduce(0x1000, 0x1000, 4, NCCLFloat32, NCCLSum, s) })
	var ce Error
	if !errors.As(err, &ce) || ce.Call != "ncclAllReduce" || ce.Name != "ncclSystemError" ||
		!strings.Contains(err.Error(), "failed on purpose") {
		t.Fatalf("err = %v, want ncclSystemError from ncclAllReduce with the detail", err)
	}
	if f.depth != 0 || f.calls[len(f.calls)-1] != "ncclGroupEnd" {
		t.Fatalf("the group was not ended after a failure: depth %d, calls %q", f.depth, f.calls)
	}
	f.failCall = ""
	f.async = Error{Call: "ncclCommGetAsyncError", Code: 6, Name: "ncclRemoteError"}
	if err := m.AsyncError(); !errors.As(err, &ce) || ce.Name != "ncclRemoteError" {
		t.Fatalf("async error %v", err)
	}
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := m.Destroy(); err != nil || strings.Count(strings.Join(f.calls, " "), "ncclCommDestroy") != 1 {
		t.Fatalf("second Destroy: %v, calls %q", err, f.calls)
	}
	if err := m.AllReduce(0x1000, 0x1000, 4, NCCLFloat32, NCCLSum, s); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Fatalf("all-reduce after Destroy: %v", err)
	}
}

// TestNCCLAvgNeedsNewVersion: ncclAvg on NCCL older than 2.10 is refused
// with what to do; ncclSum still works. Old version codes are decoded.
func TestNCCLAvgNeedsNewVersion(t *testing.T) {
	c, err := fakeContext(newFakeDriver())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := newFakeNCCL()
	f.ver = 2804
	n, err := newNCCL(f, LibInfo{Path: "/fake/libnccl.so.2"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Info().Version != "2.8.4" {
		t.Fatalf("version %q, want 2.8.4", n.Info().Version)
	}
	id, _ := n.UniqueID()
	m, err := n.NewComm(c, 1, 0, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AllReduce(0x1000, 0x1000, 4, NCCLFloat32, NCCLAvg, nil); err == nil || !strings.Contains(err.Error(), "2.10") {
		t.Fatalf("ncclAvg on 2.8.4: %v", err)
	}
	if err := m.AllReduce(0x1000, 0x1000, 4, NCCLFloat32, NCCLSum, nil); err != nil {
		t.Fatal(err)
	}
	if got := ncclVersionString(21903); got != "2.19.3" {
		t.Fatalf("21903 is %q", got)
	}
}

// TestNCCLNotFound: a missing libnccl names the soname and what to set;
// NVLS stays as the user set it.
func TestNCCLNotFound(t *testing.T) {
	t.Setenv(EnvNCCLNVLS, "1")
	_, err := LoadNCCL(LoadOptions{LibDir: t.TempDir(), OnlyLibDir: true, Loader: &fakeLoader{}})
	if !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), "libnccl.so.2") || !strings.Contains(err.Error(), EnvLibDir) {
		t.Fatalf("err = %v", err)
	}
	if os.Getenv(EnvNCCLNVLS) != "1" {
		t.Fatalf("LoadNCCL overrode an explicit %s=1", EnvNCCLNVLS)
	}
	ld := &fakeLoader{libs: map[string][]string{"/d/libnccl.so.2": {"ncclGetVersion"}}}
	_, err = LoadNCCL(LoadOptions{LibDir: "/d", OnlyLibDir: true, Loader: ld})
	if systemLoader == nil {
		if !errors.Is(err, ErrNoGPUSupport) {
			t.Fatalf("err = %v, want ErrNoGPUSupport without cgo", err)
		}
		return
	}
	if !errors.Is(err, ErrSymbol) || !strings.Contains(err.Error(), "ncclAllReduce") || strings.Contains(err.Error(), "ncclGetLastError") {
		t.Fatalf("err = %v, want ErrSymbol naming the required ncclAllReduce (not the optional ncclGetLastError)", err)
	}
}

// fakeLibncclSource is a C stand-in for libnccl.so.2 that checks what the
// cgo shims pass: the unique id by value, NCCL_NVLS_ENABLE=0 in the C
// environment at init, the comm and stream handles, groups per thread. Its
// ncclAllReduce treats the buffers as host float32 (2 ranks holding x and
// 3x: sum 4x, average 2x). Count 13 fails with ncclSystemError and a last
// error; count 17 leaves an asynchronous ncclRemoteError.
const fakeLibncclSource = `
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
typedef struct { char internal[128]; } ncclUniqueId;
struct comm { int magic, n, rank; };
static struct comm theComm;
static const char* last = "";
static int asyncErr = 0;
static __thread int depth = 0;
int ncclGetVersion(int* v) { const char* e = getenv("FAKE_NCCL_VERSION"); *v = e ? atoi(e) : 22703; return 0; }
int ncclGetUniqueId(ncclUniqueId* id) { for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 3); return 0; }
int ncclCommInitRank(struct comm** c, int n, ncclUniqueId id, int rank) {
	for (int i = 0; i < 128; i++) if (id.internal[i] != (char)(i * 7 + 3)) { last = "fake: unique id garbled"; return 4; }
	const char* nv = getenv("NCCL_NVLS_ENABLE");
	if (nv == NULL || strcmp(nv, "0") != 0) { last = "fake: NCCL_NVLS_ENABLE is not 0 at init"; return 5; }
	if (rank < 0 || rank >= n) { last = "fake: bad rank"; return 4; }
	theComm.magic = 0x5ca1ab1e; theComm.n = n; theComm.rank = rank; *c = &theComm; return 0;
}
int ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, struct comm* c, uintptr_t stream) {
	if (c != &theComm || c->magic != 0x5ca1ab1e) { last = "fake: bad comm"; return 4; }
	if (stream != 0x5) { last = "fake: not the stream given"; return 4; }
	if (depth == 0) { last = "fake: all-reduce outside a group"; return 5; }
	if (count == 13) { last = "fake: peer 1 lost"; return 2; }
	if (count == 17) asyncErr = 6;
	if (dt != 7) { last = "fake: not float32"; return 4; }
	const float* x = s; float* y = r;
	for (size_t i = 0; i < count; i++) y[i] = op == 4 ? 2 * x[i] : 4 * x[i];
	return 0;
}
int ncclGroupStart(void) { depth++; return 0; }
int ncclGroupEnd(void) { if (depth == 0) { last = "fake: group end without start on this thread"; return 5; } depth--; return 0; }
int ncclCommDestroy(struct comm* c) { if (c != &theComm) return 4; c->magic = 0; return 0; }
int ncclCommAbort(struct comm* c) { return ncclCommDestroy(c); }
int ncclCommGetAsyncError(struct comm* c, int* r) { *r = asyncErr; return 0; }
const char* ncclGetLastError(struct comm* c) { return last; }
`

// TestFakeLibnccl drives the real dlopen, dlsym and cgo shims against a
// compiled fake libnccl.so.2 (skipped without a C compiler).
func TestFakeLibnccl(t *testing.T) {
	if systemLoader == nil {
		testreq.Skip(t, "DRUTO_CC_TESTS", "no cgo: no dlopen")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		testreq.Skip(t, "DRUTO_CC_TESTS", "no C compiler (%s) to build a fake libnccl: %v", cc, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	if err := os.WriteFile(src, []byte(fakeLibncclSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libnccl.so.2"), src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	t.Setenv(EnvNCCLNVLS, "")
	os.Unsetenv(EnvNCCLNVLS)
	n, err := LoadNCCL(LoadOptions{LibDir: dir, OnlyLibDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if n.Info().Version != "2.27.3" || !strings.HasPrefix(n.Info().Path, dir) {
		t.Fatalf("info %+v", n.Info())
	}
	id, err := n.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := fakeContext(newFakeDriver())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := n.NewComm(c, 2, 1, id)
	if err != nil {
		t.Fatalf("NewComm (the fake checks the id bytes and NCCL_NVLS_ENABLE=0 in the C environment): %v", err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, -2.5, 3, 1e-3, 7}
	avg, sum := make([]float32, len(x)), make([]float32, len(x))
	ptr := func(v []float32) DevicePtr { return DevicePtr(uintptr(unsafe.Pointer(&v[0]))) }
	err = m.Group(func() error {
		if err := m.AllReduce(ptr(x), ptr(avg), len(x), NCCLFloat32, NCCLAvg, s); err != nil {
			return err
		}
		return m.AllReduce(ptr(x), ptr(sum), len(x), NCCLFloat32, NCCLSum, s)
	})
	runtime.KeepAlive(x)
	if err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if avg[i] != 2*x[i] || sum[i] != 4*x[i] {
			t.Fatalf("element %d: avg %g sum %g of %g (count, pointers, op or dtype lost on the way)", i, avg[i], sum[i], x[i])
		}
	}
	// An all-reduce outside a group still works (NCCL allows it) but the
	// fake insists on groups, so this checks that the error comes back named.
	err = m.AllReduce(ptr(x), ptr(avg), len(x), NCCLFloat32, NCCLSum, s)
	var ce Error
	if !errors.As(err, &ce) || ce.Call != "ncclAllReduce" || ce.Name != "ncclInvalidUsage" || !strings.Contains(err.Error(), "outside a group") {
		t.Fatalf("err = %v", err)
	}
	big := make([]float32, 17)
	err = m.Group(func() error { return m.AllReduce(ptr(big), ptr(big), 13, NCCLFloat32, NCCLSum, s) })
	if !errors.As(err, &ce) || ce.Name != "ncclSystemError" || !strings.Contains(err.Error(), "peer 1 lost") {
		t.Fatalf("err = %v, want ncclSystemError with the fake's last error", err)
	}
	if err := m.AsyncError(); err != nil {
		t.Fatalf("async error before any: %v", err)
	}
	if err := m.Group(func() error { return m.AllReduce(ptr(big), ptr(big), 17, NCCLFloat32, NCCLSum, s) }); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(big)
	if err := m.AsyncError(); !errors.As(err, &ce) || ce.Name != "ncclRemoteError" {
		t.Fatalf("async error %v, want ncclRemoteError", err)
	}
	if err := m.Abort(); err != nil {
		t.Fatal(err)
	}
}
