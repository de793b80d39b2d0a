package gpu

import (
	"bytes"
	"testing"
)

// TestMatmulRowsEmulator runs kernels/matmul.cu's matmul_rows and its
// fused forms, matmul_rows_ln (the layernorm taken in the prologue) and
// matmul_rows_res (the residual add in the epilogue), compiled for the
// host (kernels/emu/matmul, -DDRUTO_EMU) against the emulator's float64
// reference in every float dtype: every split of a column over warps, the
// vector and scalar paths, one row to ROWS_MAX. Needs g++ (not cgo).
func TestMatmulRowsEmulator(t *testing.T) {
	for _, dt := range floatDTypes {
		bin := emulatorOf(t, "matmul", dt, floatDTypes)
		out := runEmu(t, bin, nil) // exits 1 on a mismatch
		for _, form := range []string{"rows ", "ln ", "res "} {
			if n := bytes.Count(append([]byte("\n"), out...), []byte("\n"+form)); n < 7 {
				t.Errorf("%s: %d cases of %q; want at least 7:\n%s", dt, n, form, out)
			}
		}
		if bytes.Contains(out, []byte("MISMATCH")) {
			t.Errorf("%s:\n%s", dt, out)
		}
	}
}
