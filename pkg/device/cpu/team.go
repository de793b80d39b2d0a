package cpu

// team.go: persistent helper goroutines for parallel's small calls. A
// decode step of a small model is dozens of ops of a few µs each; starting
// and waking a goroutine per op (what a plain go statement and a WaitGroup
// cost) takes about as long as the op. The team's helpers stay alive for
// the process, spin briefly on the job pointer after each job (the
// next op of a decode step follows within µs) and then park on a channel,
// so a hand-off costs a store and a load while ops come quickly and nothing
// while they do not.
//
// One team serves the process (helpers are not tied to a Device, which has
// no Close); a call finding it busy (another Device's op on another
// goroutine, or a parallel call inside a job) runs on plain goroutines.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// teamSpin is how long a helper spins for the next job before parking.
const teamSpin = 50 * time.Microsecond

// teamMaxHelpers bounds the helpers the team starts.
const teamMaxHelpers = 63

// teamJob is one call: chunks of chunk items over [0,n), claimed in order
// by whoever comes first (the caller included), so a helper the OS has not
// scheduled yet delays nothing; done counts the chunks finished.
type teamJob struct {
	fn      func(lo, hi int)
	n       int
	chunk   int
	chunks  int32
	workers int
	next    atomic.Int32
	done    atomic.Int32
}

// work claims and runs chunks of j until none is left.
func (j *teamJob) work() {
	for c := j.next.Add(1) - 1; c < j.chunks; c = j.next.Add(1) - 1 {
		lo := int(c) * j.chunk
		j.fn(lo, min(lo+j.chunk, j.n))
		j.done.Add(1)
	}
}

type teamHelper struct {
	parked atomic.Bool
	wake   chan struct{}
}

var team struct {
	mu      sync.Mutex // held by the one caller the team serves
	once    sync.Once
	job     atomic.Pointer[teamJob] // a new job each call: helpers tell them apart by pointer
	helpers []*teamHelper
}

// teamRun runs fn over [0,n) in contiguous chunks of chunk items on the
// calling goroutine and workers-1 of the team's helpers.
// It reports false, having run nothing, when the team is busy or has fewer
// helpers than workers-1.
func teamRun(n, chunk, workers int, fn func(lo, hi int)) bool {
	team.once.Do(func() {
		h := min(runtime.GOMAXPROCS(0)-1, teamMaxHelpers)
		for i := range max(h, 0) {
			t := &teamHelper{wake: make(chan struct{}, 1)}
			team.helpers = append(team.helpers, t)
			go teamLoop(i, t)
		}
	})
	if workers-1 > len(team.helpers) || !team.mu.TryLock() {
		return false
	}
	defer team.mu.Unlock()
	j := &teamJob{fn: fn, n: n, chunk: chunk, chunks: int32((n + chunk - 1) / chunk), workers: workers}
	team.job.Store(j)
	for _, h := range team.helpers[:workers-1] {
		if h.parked.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
	j.work()
	for spins := 0; j.done.Load() < j.chunks; spins++ {
		if spins > 64 {
			runtime.Gosched()
		}
	}
	return true
}

// teamLoop is helper i's life: wait for a new job, claim its chunks with
// the others while any is left (if the job uses helper i), repeat.
func teamLoop(i int, h *teamHelper) {
	var last *teamJob // started before the first job is stored
	for {
		start := time.Now()
		for spins := 0; team.job.Load() == last; spins++ {
			if spins&1023 != 1023 || time.Since(start) < teamSpin {
				continue
			}
			// Park. The caller stores the job before reading parked; this
			// side sets parked before reading the job: one sees the other.
			h.parked.Store(true)
			if team.job.Load() == last {
				<-h.wake
			}
			h.parked.Store(false)
			start = time.Now()
		}
		j := team.job.Load()
		last = j
		if i+1 < j.workers {
			j.work()
		}
	}
}
