package gpu

import (
	"bytes"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestMatmulRowsEmulator runs kernels/matmul.cu's matmul_rows (the decode
// step's linear layers) compiled for the host (kernels/emu/matmul,
// -DDRUTO_EMU) against the emulator's float64 reference in every float
// dtype: every split of a column over warps (ks), the vector and scalar
// paths, with and without the bias and GELU, one row to ROWS_MAX. The
// emulator exits 1 on a mismatch. Needs g++ (not cgo).
func TestMatmulRowsEmulator(t *testing.T) {
	for _, dt := range floatDTypes {
		out := runEmu(t, emulatorOf(t, "matmul", dt, floatDTypes), nil)
		if n := bytes.Count(out, []byte(" OK\n")); n < 20 || bytes.Contains(out, []byte("MISMATCH")) {
			t.Errorf("%s: %d cases OK; want at least 20 and no mismatch:\n%s", dt, n, out)
		}
	}
}

// TestMatmulMMAEmulator runs kernels/matmul_mma.cu's matmul_mma (the decode
// step's linear layers at 9 to 64 rows, mma.sync emulated from its fragment
// layouts by kernels/emu/harness.h) compiled for the host against the
// emulator's float64 reference in bf16 and f16: GPT-2's shapes at the slices
// mmaSlices picks for them on a 132-SM GPU, one slice, a warp without a
// chunk, several groups of chunks a warp, columns past OC; the blocks in
// order and in reverse must give the same bits. Needs g++ (not cgo).
func TestMatmulMMAEmulator(t *testing.T) {
	dts := []tensor.DType{tensor.BF16, tensor.F16}
	for _, dt := range dts {
		out := runEmu(t, emulatorOf(t, "matmul_mma", dt, dts), nil)
		if n := bytes.Count(out, []byte(" OK\n")); n < 9 || bytes.Contains(out, []byte("MISMATCH")) {
			t.Errorf("%s: %d cases OK; want at least 9 and no mismatch:\n%s", dt, n, out)
		}
	}
}

// TestMMASlices: matmul_mma's slices of C for GPT-2's products at batch 64
// on a 132-SM GPU (the emulator runs these), and the limits: every warp of
// a block gets a chunk, the grid stays within two blocks an SM, and S
// divides the chunks.
func TestMMASlices(t *testing.T) {
	for _, c := range []struct {
		name        string
		C, OC, want int
	}{
		{"qkv", 768, 2304, 3}, {"attn_proj", 768, 768, 6}, {"fc", 768, 3072, 2}, {"fc_proj", 3072, 768, 8},
		{"C 96", 96, 40, 1}, {"huge OC", 768, 50304, 1},
	} {
		tiles := blocks(c.OC, mmaCols)
		S := mmaSlices(tiles, c.C/32, 132)
		if S != c.want {
			t.Errorf("%s: S %d, want %d", c.name, S, c.want)
		}
		if S > 1 && ((c.C/32)%S != 0 || c.C/32/S < mmaWarps || tiles*S > 2*132) {
			t.Errorf("%s: S %d breaks a limit (chunks %d, tiles %d)", c.name, S, c.C/32, tiles)
		}
	}
}
