package gpu

import (
	"bytes"
	"testing"
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
