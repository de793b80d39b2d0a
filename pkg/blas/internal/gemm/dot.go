package gemm

import (
	"runtime"
	"sync"
	"unsafe"
)

// dot.go: the bf16 product with both operands bf16, on a micro-kernel that
// takes k two steps at a time (AVX512_BF16's VDPBF16PS: each fp32 lane of
// C accumulates A[i][2q]·B[2q][j] + A[i][2q+1]·B[2q+1][j]). Operands are
// packed as pairs along k: a B panel holds, for each pair step q, nr dwords
// (column j's B[2q][j] in the low half, B[2q+1][j] in the high half); an A
// panel mr dwords (row i's A[i][2q], A[i][2q+1]), or a row-major A is read
// in place, where each row's pair already is one dword. An odd k gets a
// last pair padded with zero in both operands.
//
// The blocking is SgemmSrc's with kcDot steps of k per block (a B panel of
// kcDot/2 pair steps is 16 KiB, as Sgemm's), and the same results up to
// the order of the fp32 additions: each pair's two exact bf16 products are
// summed into the accumulator by the instruction (the SDM's pseudocode adds
// them one at a time; it also treats denormal inputs and results as zero),
// so the bits differ from SgemmSrc's.

// DotKernel computes one mr×nr tile of C = alpha·(A·B) + beta·C from kp
// pair steps: A's pair q of row i is the two bf16 values at a[i·rsa + q·csa]
// (uint16 units: a packed panel has rsa 2 and csa 2·mr; a row-major A in
// place rsa lda and csa 2), the first of them for the even step, and b is
// a packed panel of kp rows of nr dwords. When beta is 0, C is not read.
// kp >= 1.
type DotKernel func(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32)

// kcDot is the steps of k per block of SgemmDot (even).
const kcDot = 2 * kcBlock

// dotWork is one SgemmDot call's packing buffers, pooled.
type dotWork struct {
	a, b []uint32
	edge [mr * kcDot / 2]uint32 // a partial panel of rows of A, packed
	tile [mr * nr]float32       // an edge tile of C
}

var dotPool = sync.Pool{New: func() any { return new(dotWork) }}

func grow32(buf []uint32, n int) []uint32 {
	if cap(buf) < n {
		return make([]uint32, n)
	}
	return buf[:n]
}

// SgemmDot computes C = alpha·op(A)·op(B) + beta·C (row-major) for bf16 A
// and B with the pair kernels kern (one mr×nr tile) and wide (two adjacent
// tiles, or nil). The arguments must be valid (pkg/blas checks them),
// m, n, k >= 1 and alpha != 0. When beta is 0, C is not read.
//
// A row-major op(A) is read in place (no packing) when C is narrow
// (n < packMinN, as in SgemmSrc) and the block's k is even.
func SgemmDot(kern, wide DotKernel, transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	w := dotPool.Get().(*dotWork)
	kc := min(k, kcDot)
	kpc := (kc + 1) / 2
	w.b = grow32(w.b, min(roundUp(n, nr), ncBlock)*kpc)
	narrow := n < packMinN
	w.a = grow32(w.a, min(roundUp(m, mr), mcBlock)*kpc)
	for jc := 0; jc < n; jc += ncBlock {
		nb := min(ncBlock, n-jc)
		for pc := 0; pc < k; pc += kcDot {
			kb := min(kcDot, k-pc)
			kp := (kb + 1) / 2
			packBDot(transB, b, ldb, pc, jc, kb, nb, w.b)
			bt := beta
			if pc > 0 {
				bt = 1
			}
			inPlace := narrow && !transA && kb%2 == 0
			for ic := 0; ic < m; ic += mcBlock {
				mb := min(mcBlock, m-ic)
				blk := dotBlock{kp: kp}
				switch {
				case inPlace:
					blk.buf, blk.lda = a[(ic*lda)+pc:], lda
					if r := mb % mr; r != 0 {
						packADot(false, a, lda, ic+mb-r, pc, r, kb, w.edge[:mr*kp])
					}
				default:
					packADot(transA, a, lda, ic, pc, mb, kb, w.a)
					blk.packed = w.a
				}
				dotMacro(kern, wide, mb, nb, alpha, bt, blk, w, c[ic*ldc+jc:], ldc)
			}
		}
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	dotPool.Put(w)
}

// dotBlock is an mb×kb block of op(A) for dotMacro: packed pair panels
// (packed, kp·mr dwords each), or a row-major A in place from buf (row
// stride lda) with a last partial panel of rows packed in dotWork.edge.
type dotBlock struct {
	packed []uint32
	buf    []uint16
	lda    int
	kp     int
}

// dotMacro is macro for the pair kernels: the mb×nb block of C at c from
// the A block and the packed B block in w.b.
func dotMacro(kern, wide DotKernel, mb, nb int, alpha, beta float32, blk dotBlock, w *dotWork, c []float32, ldc int) {
	kp := blk.kp
	tile := &w.tile
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		bp := &w.b[jr*kp]
		pair := wide != nil && jr%(2*nr) == 0 && nb-jr >= 2*nr
		paired := wide != nil && jr%(2*nr) == nr && nn == nr
		for ir := 0; ir < mb; ir += mr {
			mm := min(mr, mb-ir)
			if paired && mm == mr {
				continue
			}
			var ap *uint16
			rsa, csa := 2, 2*mr
			switch {
			case blk.packed != nil:
				ap = (*uint16)(unsafe.Pointer(&blk.packed[ir*kp]))
			case mm == mr:
				ap, rsa, csa = &blk.buf[ir*blk.lda], blk.lda, 2
			default:
				ap = (*uint16)(unsafe.Pointer(&w.edge[0]))
			}
			if mm == mr && pair {
				wide(kp, ap, rsa, csa, bp, &c[ir*ldc+jr], ldc, alpha, beta)
				continue
			}
			if mm == mr && nn == nr {
				kern(kp, ap, rsa, csa, bp, &c[ir*ldc+jr], ldc, alpha, beta)
				continue
			}
			kern(kp, ap, rsa, csa, bp, &tile[0], nr, alpha, 0)
			storeEdge(c[ir*ldc+jr:], ldc, tile[:], mm, nn, beta)
		}
	}
}

// pair returns the dword of the bf16 pair (lo, hi).
func pair(lo, hi uint16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// packADot packs op(A)[ic:ic+mb, pc:pc+kb] of a bf16 A into pair panels of
// mr rows (dst[panel·mr·kp + q·mr + i], kp = ⌈kb/2⌉); rows past mb and the
// high half of an odd kb's last pair are zero.
func packADot(trans bool, a []uint16, lda, ic, pc, mb, kb int, dst []uint32) {
	kp := (kb + 1) / 2
	ke := kb &^ 1 // the steps of full pairs
	done := 0     // full panels the assembly packed (transposed A)
	if trans && ke > 0 {
		done = packATDotAsm(a, lda, pc*lda+ic, mb/mr, ke/2, dst, mr*kp)
	}
	for ir := 0; ir < mb; ir += mr {
		mm := min(mr, mb-ir)
		d := dst[ir*kp : ir*kp+mr*kp]
		if mm < mr {
			clear(d)
		}
		if trans {
			// A is stored k×m: a pair's halves are in consecutive rows.
			if ir/mr >= done {
				for q := range kb / 2 {
					r0 := a[(pc+2*q)*lda+ic+ir:][:mm]
					r1 := a[(pc+2*q+1)*lda+ic+ir:][:mm]
					o := d[q*mr : q*mr+mm]
					for i := range o {
						o[i] = pair(r0[i], r1[i])
					}
				}
			}
			if ke < kb {
				r0 := a[(pc+ke)*lda+ic+ir:][:mm]
				o := d[(kp-1)*mr : (kp-1)*mr+mm]
				for i := range o {
					o[i] = uint32(r0[i])
				}
			}
			continue
		}
		// A is stored m×k: a row's pair is one dword.
		for i := range mm {
			base := (ic+ir+i)*lda + pc
			row := a[base : base+kb]
			for q := range kb / 2 {
				d[q*mr+i] = pair(row[2*q], row[2*q+1])
			}
			if ke < kb {
				d[(kp-1)*mr+i] = uint32(row[ke])
			}
		}
	}
}

// packBDot packs op(B)[pc:pc+kb, jc:jc+nb] of a bf16 B into pair panels of
// nr columns (dst[panel·nr·kp + q·nr + j]); columns past nb and the high
// half of an odd kb's last pair are zero.
func packBDot(trans bool, b []uint16, ldb, pc, jc, kb, nb int, dst []uint32) {
	kp := (kb + 1) / 2
	ke := kb &^ 1
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		d := dst[jr*kp : jr*kp+nr*kp]
		if nn < nr {
			clear(d)
		}
		if !trans {
			// B is stored k×n: a pair's halves are in consecutive rows.
			if nn == nr && ke > 0 && packBNDotAsm(b, ldb, pc*ldb+jc+jr, ke/2, d) {
				// done by the assembly
			} else {
				for q := range kb / 2 {
					r0 := b[(pc+2*q)*ldb+jc+jr:][:nn]
					r1 := b[(pc+2*q+1)*ldb+jc+jr:][:nn]
					o := d[q*nr : q*nr+nn]
					for j := range o {
						o[j] = pair(r0[j], r1[j])
					}
				}
			}
			if ke < kb {
				r0 := b[(pc+ke)*ldb+jc+jr:][:nn]
				o := d[(kp-1)*nr : (kp-1)*nr+nn]
				for j := range o {
					o[j] = uint32(r0[j])
				}
			}
			continue
		}
		// B is stored n×k: column j's pair is one dword of row j. With an
		// even ldb the rows are dword arrays, which packBT16 transposes.
		base := (jc+jr)*ldb + pc
		if nn == nr && ldb%2 == 0 && ke > 0 {
			bw := unsafe.Slice((*float32)(unsafe.Pointer(&b[base])), (15*ldb+ke)/2)
			packBT16(bw, ldb/2, 0, ke/2, unsafe.Slice((*float32)(unsafe.Pointer(&d[0])), len(d)))
		} else {
			for j := range nn {
				row := b[base+j*ldb : base+j*ldb+kb]
				for q := range kb / 2 {
					d[q*nr+j] = pair(row[2*q], row[2*q+1])
				}
			}
		}
		if ke < kb {
			for j := range nn {
				d[(kp-1)*nr+j] = uint32(b[base+j*ldb+ke])
			}
		}
	}
}

// KernDotGo is the portable pair kernel (DotKernel's contract): each pair
// step adds the two products in fp32, the even step first. The tests run
// SgemmDot on it on every architecture.
func KernDotGo(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32) {
	as := unsafe.Slice(a, (mr-1)*rsa+(kp-1)*csa+2)
	bs := unsafe.Slice(b, kp*nr)
	var acc [mr][nr]float32
	for q := range kp {
		bv := bs[q*nr : q*nr+nr]
		for i := range mr {
			x0, x1 := widen1(as[i*rsa+q*csa]), widen1(as[i*rsa+q*csa+1])
			row := &acc[i]
			for j, y := range bv {
				row[j] += x0 * widen1(uint16(y))
				row[j] += x1 * widen1(uint16(y>>16))
			}
		}
	}
	cs := unsafe.Slice(c, (mr-1)*ldc+nr)
	for i := range mr {
		row := cs[i*ldc : i*ldc+nr]
		for j := range row {
			v := alpha * acc[i][j]
			if beta != 0 {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}
