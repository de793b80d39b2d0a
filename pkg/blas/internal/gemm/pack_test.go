package gemm

import "testing"

// TestPackBT16 checks the transposing pack of 16 rows (assembly for the
// steps in multiples of 8 where the CPU has AVX2, Go for the rest) against
// its definition, for every step count up to 40 and a padded row stride.
func TestPackBT16(t *testing.T) {
	for kb := 1; kb <= 40; kb++ {
		ldb := kb + 3
		base := 5
		b := make([]float32, base+15*ldb+kb)
		for i := range b {
			b[i] = float32(i)
		}
		d := make([]float32, kb*nr)
		packBT16(b, ldb, base, kb, d)
		for p := range kb {
			for j := range nr {
				if got, want := d[p*nr+j], b[base+j*ldb+p]; got != want {
					t.Fatalf("kb=%d: d[step %d, row %d] = %v, want %v", kb, p, j, got, want)
				}
			}
		}
	}
}
