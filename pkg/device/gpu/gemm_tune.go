package gpu

// gemm_tune.go: DRUTO_GEMM_TUNE=1 times the candidate algorithms of each
// cuBLASLt matmul (the heuristic's and the split-K variants, see
// cuda.LtMatmul) once, at its first use (never during
// graph capture: the step runs plainly first), and keeps the fastest.
//
// The candidates run on scratch operands of the matmul's shape (pool
// memory, contents undefined, freed afterwards) with beta 0, so no tensor
// of the caller is touched: each one warm-up run, then ltTuneRuns timed
// between two CUDA events. Matmuls whose operands would need more than
// ltTuneMaxBytes keep the heuristic's first choice.

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/druto/druto/pkg/cuda"
)

const (
	ltTuneRuns     = 5
	ltTuneMaxBytes = 1 << 30
)

// GEMMTuneEnv names the environment variable that turns tuning on ("1").
const GEMMTuneEnv = "DRUTO_GEMM_TUNE"

// gemmTuneEnv reads GEMMTuneEnv: "1" on, "0" or unset off.
func gemmTuneEnv() (bool, error) {
	switch v := os.Getenv(GEMMTuneEnv); v {
	case "1":
		return true, nil
	case "", "0":
		return false, nil
	default:
		return false, fmt.Errorf("gpu: %s=%q: want 1 (time the GEMM algorithms at first use) or 0 or unset", GEMMTuneEnv, v)
	}
}

// tuning reports whether GEMMTuneEnv is on (read once per device; New
// rejects a bad value).
func (d *Device) tuning() bool {
	if d.ltx.tune == 0 {
		d.ltx.tune = 1
		if on, _ := gemmTuneEnv(); on {
			d.ltx.tune = 2
		}
	}
	return d.ltx.tune == 2
}

// dtBytes is the element size of a cuBLAS element type.
func dtBytes(t cuda.DataType) uint64 {
	switch {
	case t == cuda.R32F:
		return 4
	case t.FP8():
		return 1
	}
	return 2
}

// ltTune times e's candidates and returns the fastest and a note of the
// times; on any failure it keeps the current best and says why.
func (d *Device) ltTune(p cuda.LtParams, e ltEntry) (int, string) {
	m := e.m
	if m.Algos() < 2 {
		return e.best, "heuristic (one candidate)"
	}
	colsA, colsB := p.K, p.N // column-major: op(A) is M×K, op(B) K×N
	if p.TransA {
		colsA = p.M
	}
	if p.TransB {
		colsB = p.K
	}
	sizes := []uint64{
		uint64(p.LDA) * uint64(colsA) * dtBytes(p.AType),
		uint64(p.LDB) * uint64(colsB) * dtBytes(p.BType),
		uint64(p.LDC) * uint64(p.N) * dtBytes(p.CType),
		uint64(max(p.M, p.N)) * 4,                                // bias or bias gradient (fp32 covers every type)
		uint64(max(p.AuxLD, 1)) * uint64(p.N) * dtBytes(p.CType), // aux
	}
	var total uint64
	for _, s := range sizes {
		total += s
	}
	if total > ltTuneMaxBytes {
		return e.best, fmt.Sprintf("heuristic (operands of %d MiB not tuned)", total>>20)
	}
	pool := d.ctx.Pool()
	ptrs := make([]cuda.DevicePtr, len(sizes))
	defer func() {
		for _, q := range ptrs {
			if q != 0 {
				_ = pool.Free(q)
			}
		}
	}()
	for i, s := range sizes {
		q, err := pool.Alloc(s)
		if err != nil {
			return e.best, "heuristic (tuning: " + err.Error() + ")"
		}
		ptrs[i] = q
	}
	args := cuda.LtArgs{Alpha: 1, A: ptrs[0], B: ptrs[1], D: ptrs[2], Bias: ptrs[3], Aux: ptrs[4],
		Workspace: d.ws, WorkspaceBytes: WorkspaceBytes}
	start, err1 := d.ctx.NewEvent()
	end, err2 := d.ctx.NewEvent()
	if err1 != nil || err2 != nil {
		return e.best, "heuristic (tuning: no events)"
	}
	defer func() { _ = start.Destroy(); _ = end.Destroy() }()
	best, bestT := e.best, time.Duration(-1)
	var times []string
	for i := range m.Algos() {
		if m.UseAlgo(i) != nil || m.Run(d.stream, args) != nil || m.Algo() != i {
			times = append(times, fmt.Sprintf("#%d failed", i))
			continue
		}
		err := start.Record(d.stream)
		for r := 0; r < ltTuneRuns && err == nil; r++ {
			err = m.Run(d.stream, args)
		}
		if err == nil {
			err = end.Record(d.stream)
		}
		var t time.Duration
		if err == nil {
			t, err = cuda.Elapsed(start, end)
		}
		if err != nil {
			times = append(times, fmt.Sprintf("#%d failed", i))
			continue
		}
		t /= ltTuneRuns
		times = append(times, fmt.Sprintf("#%d %.1fus", i, float64(t.Nanoseconds())/1e3))
		if bestT < 0 || t < bestT {
			best, bestT = i, t
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		d.fail(fmt.Errorf("gpu: gemm tuning: %w", err))
	}
	if err := m.UseAlgo(best); err != nil {
		d.fail(fmt.Errorf("gpu: gemm tuning: %w", err))
	}
	return best, "tuned: " + strings.Join(times, ", ")
}
