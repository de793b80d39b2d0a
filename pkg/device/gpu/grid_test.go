package gpu

// grid_test.go: the launch-geometry computations on any machine (issue 14:
// grids that overflow CUDA's limits must be an error naming the op and the
// shape, never a truncated launch that covers too little).

import (
	"errors"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

func TestCheckGrid(t *testing.T) {
	ok := []struct{ grid, block cuda.Dim3 }{
		{cuda.D1(1), cuda.D1(1024)},
		{cuda.D1(maxGridX), cuda.D1(256)},
		{cuda.Dim3{X: 6, Y: maxGridYZ, Z: maxGridYZ}, cuda.D1(128)},
		{cuda.D1(1), cuda.Dim3{X: 16, Y: 16, Z: 4}},
	}
	for _, c := range ok {
		if err := checkGrid("k", tensor.F32, c.grid, c.block); err != nil {
			t.Errorf("grid %v block %v: %v", c.grid, c.block, err)
		}
	}
	bad := []struct{ grid, block cuda.Dim3 }{
		{cuda.Dim3{X: maxGridX + 1, Y: 1, Z: 1}, cuda.D1(256)},
		{cuda.Dim3{X: 1, Y: maxGridYZ + 1, Z: 1}, cuda.D1(256)},
		{cuda.Dim3{X: 1, Y: 1, Z: maxGridYZ + 1}, cuda.D1(256)},
		{cuda.D1(1), cuda.D1(1025)},
		{cuda.D1(1), cuda.Dim3{X: 64, Y: 32, Z: 1}},
		{cuda.D1(1), cuda.Dim3{X: 1, Y: 1, Z: 65}},
		{cuda.D1(1), cuda.Dim3{X: 0, Y: 1, Z: 1}},
	}
	for _, c := range bad {
		err := checkGrid("layernorm_colsum", tensor.BF16, c.grid, c.block)
		if err == nil || !errors.Is(err, tensor.ErrShape) || !strings.Contains(err.Error(), "layernorm_colsum/bf16") {
			t.Errorf("grid %v block %v: error %v, want ErrShape naming the kernel", c.grid, c.block, err)
		}
	}
}

func TestGrid1Saturates(t *testing.T) {
	for _, n := range []int{1, 1000, maxGridX} {
		if g := grid1(n); int(g.X) != n || g.Y != 1 || g.Z != 1 {
			t.Errorf("grid1(%d) = %v", n, g)
		}
	}
	// cuda.D1 would truncate 2^32 + 5 to 5 blocks: grid1 saturates and
	// checkGrid rejects it.
	for _, n := range []int{maxGridX + 1, 1<<32 + 5, -1} {
		if err := checkGrid("k", tensor.F32, grid1(n), cuda.D1(256)); err == nil {
			t.Errorf("grid1(%d) = %v passes checkGrid", n, grid1(n))
		}
	}
}

// TestColsumGrid: the decomposed layernorm backward's column-sum grid stays
// within 65535 block rows past 4.19 M rows (64 rows a slice), and the
// kernel's loop over y (slices y, y+gridDim.y, ...) covers every slice once.
func TestColsumGrid(t *testing.T) {
	for _, N := range []int{1, 64, 65, 4 << 20, 64*maxGridYZ + 1, 50 << 20} {
		for _, C := range []int{1, 768, 50304} {
			g := colsumGrid(N, C)
			if err := checkGrid("layernorm_colsum", tensor.F32, g, cuda.D1(128)); err != nil {
				t.Fatalf("N=%d C=%d: %v", N, C, err)
			}
			if int(g.X)*128 < C || (int(g.X)-1)*128 >= C {
				t.Errorf("N=%d C=%d: %d column blocks", N, C, g.X)
			}
			slices := (N + lnColsumRows - 1) / lnColsumRows
			covered := 0
			for y := 0; y < int(g.Y); y++ {
				covered += (slices - y + int(g.Y) - 1) / int(g.Y) // slices y, y+Y, ... below slices
			}
			if covered != slices {
				t.Errorf("N=%d C=%d: grid y %d covers %d of %d slices", N, C, g.Y, covered, slices)
			}
		}
	}
}

func TestEwGridAndCeGrid(t *testing.T) {
	d := &Device{}
	for _, n := range []int64{1, 1000, 1 << 31, 1 << 40} {
		for _, per := range []int{1, 4} {
			g := d.ewGrid(n, per)
			if err := checkGrid("k", tensor.F32, g, cuda.D1(ewGridUnit)); err != nil || g.X == 0 {
				t.Errorf("ewGrid(%d, %d) = %v: %v", n, per, g, err)
			}
			if need := (n + int64(per*ewGridUnit) - 1) / int64(per*ewGridUnit); int64(g.X) > need {
				t.Errorf("ewGrid(%d, %d) = %d blocks, more than the %d needed", n, per, g.X, need)
			}
		}
	}
	for _, c := range []struct{ N, sms, want int }{{1, 132, 1}, {200, 132, 200}, {16384, 132, 264}, {5, 0, 2}} {
		if g := ceGrid(c.N, c.sms); g != min(c.want, c.N) {
			t.Errorf("ceGrid(%d, %d) = %d, want %d", c.N, c.sms, g, c.want)
		}
	}
}

// TestLaunchGridTooLarge: an op whose grid would pass CUDA's limit records
// an error naming the kernel and the launch shape (and launches nothing).
func TestLaunchGridTooLarge(t *testing.T) {
	// the decomposed form's ce_rowmax: one block a row, 2^31 + 1 blocks
	const N, V = 1<<31 + 1, 1
	got, err := hooked(t, false, func(d *Device) {
		d.CrossEntropy(dev(tensor.F32, N), dev(tensor.BF16, N, V), dev(tensor.I32, N), N, V, 1)
	})
	if err == nil || !strings.Contains(err.Error(), "ce_rowmax/bf16") || !strings.Contains(err.Error(), "2147483649") && !strings.Contains(err.Error(), "4294967295") {
		t.Errorf("error %v, want one naming ce_rowmax/bf16 and its grid", err)
	}
	if len(got) != 0 {
		t.Errorf("launched %d kernels", len(got))
	}
}

// TestBenchFinish: results are compared with the ceiling measured in the
// same run (the "copy" op) or given, and say which; with none (the copy
// failed) they claim no ceiling and no share of one.
func TestBenchFinish(t *testing.T) {
	rs := finish([]KernelResult{{Name: "copy", GBps: 4000}, {Name: "x", GBps: 3400}}, 4000, "copy")
	if rs[0].PctOfCeil != 100 || rs[1].PctOfCeil != 85 || rs[1].CeilingGBps != 4000 || rs[1].CeilingSource != "copy" {
		t.Errorf("measured ceiling: %+v", rs)
	}
	rs = finish([]KernelResult{{Name: "x", GBps: 2000}}, 0, "copy")
	if rs[0].CeilingGBps != 0 || rs[0].PctOfCeil != 0 || rs[0].CeilingSource != "" {
		t.Errorf("no ceiling: %+v", rs)
	}
}

// TestDecSlots: attention_decode's blocks a pair fill the GPU without
// exceeding the chunks, and whenever a pair gets more than one block the
// grid stays within one wave of the 8 blocks an SM its launch bounds keep
// resident.
func TestDecSlots(t *testing.T) {
	for _, c := range []struct{ splits, pairs, sms, want int }{
		{16, 12, 132, 16},  // gpt2 at batch 1: every chunk its own block
		{16, 768, 132, 1},  // batch 64: one block a pair takes all its chunks
		{16, 384, 132, 2},  // batch 32
		{16, 96, 132, 6},   // batch 8
		{1, 1, 132, 1},     // a cache of one chunk
		{16, 2000, 132, 1}, // more pairs than the GPU holds: still one
		{5, 3, 0, 1},       // no SM count: at least one
	} {
		if got := decSlots(c.splits, c.pairs, c.sms); got != c.want {
			t.Errorf("decSlots(%d, %d, %d) = %d, want %d", c.splits, c.pairs, c.sms, got, c.want)
		}
	}
	for _, sms := range []int{1, 78, 132} {
		for pairs := 1; pairs <= 3000; pairs++ {
			x := decSlots(16, pairs, sms)
			if x < 1 || x > 16 || (x > 1 && x*pairs >= 2*decAttWave*sms) {
				t.Fatalf("decSlots(16, %d, %d) = %d: outside [1, 16] or past one wave", pairs, sms, x)
			}
		}
	}
}
