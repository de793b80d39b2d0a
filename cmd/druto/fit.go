package main

// fit.go: the memory checks a run makes before it allocates anything
// large: fitCheck (a training step against the planner's count and
// budget) and freeCheck (any need against the memory free now, the host's
// on the CPU).

import (
	"errors"
	"fmt"
	"os"

	"github.com/druto/druto/internal/hostmem"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// fitCheck refuses a step of micro-batch B, accum micro-steps and level r
// that does not fit q (train.PlanRequest.Check: the planner's own count
// and budget, so a planned step always passes), in one line naming what,
// and on the CPU one that the host's free memory cannot hold
// (freeCheck). ranks is the number of rank processes of this host
// (data-parallel training; 0 or 1 without): each holds its own model,
// optimizer and activations, so together they need ranks times one's
// memory from the one host. Every rank checks this before any of them
// allocates (right after the rendezvous), so each reads the same free
// memory.
func fitCheck(dev device.Device, q train.PlanRequest, B, accum int, r gpt.Recompute, ranks int, what string) error {
	const todo = "lower --batch or --seq (--dry-run prints the breakdown)"
	var fe *train.FitError
	if err := q.Check(B, accum, r); errors.As(err, &fe) {
		if g, ok := dev.(*gpu.Device); ok {
			under := ""
			if fe.From == device.MemoryCapEnv {
				under = " under " + device.MemoryCapEnv
			}
			return fmt.Errorf("out of GPU memory: %s needs about %s (%s of reserve included), but %s has %s free%s; %s",
				what, train.GiB(fe.Need+fe.Reserve), train.GiB(fe.Reserve), g.Context().Device.Name, train.GiB(fe.Budget), under, todo)
		}
		return fmt.Errorf("over the memory budget: %s needs about %s, the budget is %s (%s); %s", what, train.GiB(fe.Need+fe.Reserve), train.GiB(fe.Budget), fe.From, todo)
	} else if err != nil {
		return err
	}
	if _, ok := dev.(*gpu.Device); ok {
		return nil // q's budget is the GPU's free memory, read once
	}
	need := q.Need(B, accum, r)
	if ranks > 1 {
		return freeCheck(dev, int64(ranks)*need,
			fmt.Sprintf("%d ranks on this host, each %s (about %s), together", ranks, what, train.GiB(need)),
			"lower --batch or --seq, or run fewer --ranks (--dry-run prints one rank's breakdown)")
	}
	return freeCheck(dev, need, what, todo)
}

// freeCheck returns an error when dev cannot hold need bytes: what needs
// them, both figures, and todo, what to do. On a GPU the free figure is the
// device's, with train.GPUReserve kept for workspaces, attention and
// classifier scratch; on the CPU it is the host's (internal/hostmem:
// DRUTO_HOST_MEMORY, the cgroup's limit, then MemAvailable), checked before
// anything large is allocated, since Go cannot recover from running out of
// memory. It is nil when the free memory cannot be read (the allocation
// then says why).
func freeCheck(dev device.Device, need int64, what, todo string) error {
	g, ok := dev.(*gpu.Device)
	if !ok {
		free, src, err := hostmem.Available()
		if err != nil {
			if src == "" && os.Getenv(hostmem.Env) != "" {
				return err // a DRUTO_HOST_MEMORY that is not a size
			}
			return nil
		}
		const margin = 64 << 20 // the Go runtime, the data
		if need <= free-margin {
			return nil
		}
		return fmt.Errorf("out of host memory: %s needs about %.2f GiB, but this machine has %.2f GiB free (%s); %s",
			what, float64(need+margin)/(1<<30), float64(free)/(1<<30), src, todo)
	}
	free, _, err := g.FreeMemory()
	if err != nil {
		return nil
	}
	const margin = train.GPUReserve
	if need+margin <= int64(free) {
		return nil
	}
	return fmt.Errorf("out of GPU memory: %s needs about %.1f GiB, but %s has %.1f GiB free; %s",
		what, float64(need+margin)/(1<<30), g.Context().Device.Name, float64(free)/(1<<30), todo)
}
