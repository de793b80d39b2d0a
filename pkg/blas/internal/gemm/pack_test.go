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

// TestPackBNN checks the packing of a row-major B (assembly for full
// panels where the CPU has AVX2, Go for partial ones) against its
// definition, with zero padding past the last column.
func TestPackBNN(t *testing.T) {
	for _, nb := range []int{16, 32, 5, 21, 48} {
		for _, kb := range []int{1, 7, 8, 33} {
			ldb := nb + 3
			pc, jc := 2, 1
			b := make([]float32, (pc+kb)*ldb+jc+nb)
			for i := range b {
				b[i] = float32(i + 1)
			}
			panels := (nb + nr - 1) / nr
			d := make([]float32, panels*nr*kb)
			for i := range d {
				d[i] = -1 // must be overwritten
			}
			packB(false, b, ldb, pc, jc, kb, nb, d)
			for jr := 0; jr < panels*nr; jr += nr {
				for p := range kb {
					for j := range nr {
						want := float32(0)
						if jr+j < nb {
							want = b[(pc+p)*ldb+jc+jr+j]
						}
						if got := d[jr*kb+p*nr+j]; got != want {
							t.Fatalf("nb=%d kb=%d: panel %d step %d col %d = %v, want %v", nb, kb, jr/nr, p, j, got, want)
						}
					}
				}
			}
		}
	}
}
