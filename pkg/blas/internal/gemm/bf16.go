package gemm

import "math"

// Src is one operand of SgemmSrc: fp32 elements in F32, or, when F32 is
// nil, bf16 bit patterns in BF16 that the packing widens to fp32.
type Src struct {
	F32  []float32
	BF16 []uint16
}

// widen1 returns the fp32 value of the bf16 bit pattern h (exact).
func widen1(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// widen sets d[i] = bf16(s[i]) over len(s) elements.
func widen(d []float32, s []uint16) {
	d = d[:len(s)]
	for i := widenAsm(d, s); i < len(s); i++ {
		d[i] = widen1(s[i])
	}
}

// widenA widens the mb×kb block of op(A) at (ic, pc) of a bf16 A into buf
// (grown as needed) and returns it: row-major with row stride kb, or for a
// transposed A (stored k×m) kb rows of mb values.
func widenA(trans bool, a []uint16, lda, ic, pc, mb, kb int, buf []float32) []float32 {
	buf = grow(buf, mb*kb)
	if trans {
		for p := range kb {
			base := (pc+p)*lda + ic
			widen(buf[p*mb:(p+1)*mb], a[base:base+mb])
		}
		return buf
	}
	for i := range mb {
		base := (ic+i)*lda + pc
		widen(buf[i*kb:(i+1)*kb], a[base:base+kb])
	}
	return buf
}

// packB16 is packB for a bf16 B: op(B)[pc:pc+kb, jc:jc+nb] widened into
// panels of nr columns, each k-major; columns past nb are zero. tmp holds
// at least nr·kb floats: a transposed panel's 16 rows are widened into it
// (in L1) and then packed as fp32.
func packB16(trans bool, b []uint16, ldb, pc, jc, kb, nb int, dst, tmp []float32) {
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		d := dst[jr*kb : jr*kb+nr*kb]
		if !trans {
			// B is stored k×n: the nr values of one step are contiguous.
			if nn == nr && widenBN16Asm(b, ldb, pc*ldb+jc+jr, kb, d) {
				continue
			}
			for p := range kb {
				o := d[p*nr : p*nr+nr]
				src := b[(pc+p)*ldb+jc+jr:]
				for j := range nn {
					o[j] = widen1(src[j])
				}
				clear(o[nn:])
			}
			continue
		}
		// B is stored n×k: widen the panel's rows, then gather from them.
		if nn == nr {
			t := tmp[:nr*kb]
			for j := range nr {
				base := (jc+jr+j)*ldb + pc
				widen(t[j*kb:(j+1)*kb], b[base:base+kb])
			}
			packBT16(t, kb, 0, kb, d)
			continue
		}
		clear(d)
		for j := range nn {
			base := (jc+jr+j)*ldb + pc
			for p, v := range b[base : base+kb] {
				d[p*nr+j] = widen1(v)
			}
		}
	}
}
