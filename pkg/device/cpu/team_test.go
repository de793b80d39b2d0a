package cpu

import (
	"sync"
	"testing"

	"github.com/druto/druto/pkg/device"
)

// TestParallelCoversOnce: parallel runs every index exactly once whether the
// team serves the call, is busy with another goroutine's call, or is asked
// from inside a job (nested), for sizes around the chunk boundaries.
func TestParallelCoversOnce(t *testing.T) {
	d := New(device.Options{Fused: true, Threads: 4})
	check := func(n, grain int, nested bool) {
		seen := make([]int32, n)
		var mu sync.Mutex
		d.parallel(n, grain, func(lo, hi int) {
			if nested {
				d.parallel(hi-lo, 1, func(a, b int) {
					mu.Lock()
					for i := lo + a; i < lo+b; i++ {
						seen[i]++
					}
					mu.Unlock()
				})
				return
			}
			mu.Lock()
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			mu.Unlock()
		})
		for i, c := range seen {
			if c != 1 {
				t.Errorf("n %d grain %d nested %v: index %d ran %d times", n, grain, nested, i, c)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 4 { // four callers at once: the team serves one at a time
		wg.Go(func() {
			for n := range 40 {
				check(n, 1+(n+g)%5, n%3 == 0)
			}
		})
	}
	wg.Wait()
	for range 2000 { // back-to-back calls, as a decode step makes them
		check(13, 2, false)
	}
}
