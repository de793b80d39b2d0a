//go:build linux

package blas

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/druto/druto/internal/testreq"
)

// guarded returns a slice of n float32 that ends exactly where an
// unreadable page begins, so a read or write past its end faults (the
// assembly kernel has no bounds checks), and a function that unmaps it.
func guarded(t *testing.T, n int) ([]float32, func()) {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n*4+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		testreq.Skip(t, "DRUTO_OS_TESTS", "mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	end := size - page
	x := unsafe.Slice((*float32)(unsafe.Pointer(&mem[end-n*4])), n)
	return x, func() {
		if err := syscall.Munmap(mem); err != nil {
			t.Errorf("munmap: %v", err)
		}
	}
}

// TestPackedGuardPages runs the blocked SGEMM with A, B and C each ending
// at an unreadable page (the slices exactly as long as check requires): a
// kernel or packing read past the last element would crash the test.
func TestPackedGuardPages(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for name, kern := range packedKernels(t) {
		call := packedCall(kern)
		for _, s := range [][3]int{{7, 17, 5}, {6, 16, 256}, {13, 33, 300}, {1, 1, 1}, {145, 20, 9}, {7, 300, 5}, {13, 257, 260}} {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, beta := range []float32{0, 0.5} {
						ar, ac := m, k
						if ta {
							ar, ac = k, m
						}
						br, bc := k, n
						if tb {
							br, bc = n, k
						}
						lda, ldb, ldc := ac+1, bc+2, n+3
						a, freeA := guarded(t, (ar-1)*lda+ac)
						b, freeB := guarded(t, (br-1)*ldb+bc)
						c, freeC := guarded(t, (m-1)*ldc+n)
						copy(a, randSlice(r, len(a)))
						copy(b, randSlice(r, len(b)))
						copy(c, randSlice(r, len(c)))
						want := naive(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
						if err := call(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc); err != nil {
							t.Fatal(err)
						}
						for i := range m {
							for j := range n {
								if d := float64(c[i*ldc+j]) - want[i*n+j]; d > 1e-3 || d < -1e-3 {
									t.Fatalf("%s m=%d n=%d k=%d tA=%v tB=%v beta=%g: C[%d,%d] = %v, want %v", name, m, n, k, ta, tb, beta, i, j, c[i*ldc+j], want[i*n+j])
								}
							}
						}
						freeA()
						freeB()
						freeC()
					}
				}
			}
		}
	}
}
