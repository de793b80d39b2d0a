// Package gemm is pkg/blas's fallback SGEMM, used when no native library
// loads, on CPUs with an assembly micro-kernel (amd64 with AVX2 + FMA): a
// BLIS-style blocked product (a separate package because Go assembly cannot
// live in a cgo package). For each block of NC columns of C and KC steps of
// k, the KC×NC block of op(B) is packed into panels of nr columns (k-major,
// zero-padded); then for each block of MC rows of op(A) (read in place, see
// Sgemm) the micro-kernel computes each mr×nr tile of C from mr rows of A
// (in L1/L2) and one B panel (in L1) with all its accumulators in
// registers, applying alpha and beta as it stores. The first KC block
// applies beta; later ones accumulate (beta 1). Tiles cut by the edges of C
// go through a small buffer, so every kernel call is a full mr×nr tile.
//
// SgemmSrc takes bf16 operands too, widened as they are packed; SgemmDot
// (dot.go) multiplies two bf16 operands on AVX512_BF16 pair kernels.
//
// Sgemm is serial: pkg/blas splits large products over goroutines by rows
// (or columns) of C, each part packing its own blocks, as it does for
// OpenBLAS set to one thread.
package gemm

import (
	"runtime"
	"sync"
	"unsafe"
)

const (
	// MR is the micro-tile's rows.
	MR = mr
	// NR is the micro-tile's columns.
	NR = nr
	mr = 6  // rows of a micro-tile (broadcast from A)
	nr = 16 // columns of a micro-tile (two AVX vectors of B)
	// kcBlock steps of k per block: a B panel (nr·kcBlock floats, 16 KiB)
	// stays in L1 while the A block streams from L2.
	kcBlock = 256
	// mcBlock rows of A per block (mcBlock·kcBlock floats, 144 KiB): stays
	// in L2 while the B panels stream past it.
	mcBlock = 24 * mr
	// ncBlock columns of B per packed block (4 MiB): L3.
	ncBlock = 256 * nr
	// packMinN is the narrowest C for which A is packed: each A block is
	// then read by at least 16 B panels, and one contiguous stream beats
	// reading A in place (measured on the 1024×384 and 1024×512 forward
	// products, ~1.5x). Narrower products (attention, the C = 128
	// layers) read A in place and skip the packing.
	packMinN = 16 * nr
)

// ISAAVX512 is the instruction set Asm names for the AVX-512 micro-kernel.
const ISAAVX512 = "AVX-512F"

// Kernel computes one mr×nr tile: C = alpha·(A·Bp) + beta·C, where
// A[i][p] (i < mr, p < k) is at a[i·rsa + p·csa] (a packed panel has rsa 1
// and csa mr; rows of a row-major A, rsa lda and csa 1), Bp is a k×nr panel
// packed row by row (nr floats per step), and C a row-major tile with row
// stride ldc. When beta is 0, C is not read. k >= 1.
type Kernel func(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)

// work is one call's packing buffers, pooled (a is used when A is packed).
type work struct {
	a, b []float32
	aw   []float32             // a widened bf16 block of A (mb×kb)
	edge [mr * kcBlock]float32 // a partial panel of rows of A
	wide [nr * kcBlock]float32 // 16 rows of a transposed bf16 B, widened
	tile [mr * nr]float32      // an edge tile of C
}

var workPool = sync.Pool{New: func() any { return new(work) }}

// grow returns buf with length n, reallocated when too small.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

func roundUp(x, to int) int { return (x + to - 1) / to * to }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major, pkg/blas's
// contract) with the micro-kernel kern. The arguments must be valid (pkg/blas
// checks them), m, n, k >= 1 and alpha != 0. When beta is 0, C is not read.
//
// When C is narrow (n < packMinN), A is not packed: the kernel broadcasts
// from it in place (six sequential streams of a row-major A, or one strided
// stream of a transposed one), which saves the gather that packing a
// row-major A costs when each block is reused by only a few B panels (as in
// attention: 1.5x on its per-head products); only a last partial panel of
// rows is packed (zero-padded) so that every kernel call reads mr rows.
// Wider products pack A into k-major panels of mr rows.
func Sgemm(kern Kernel, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SgemmSrc(kern, transA, transB, m, n, k, alpha, Src{F32: a}, lda, Src{F32: b}, ldb, beta, c, ldc)
}

// SgemmSrc is Sgemm with operands that may hold bf16 values (see Src),
// widened to fp32 (exactly: a bf16 value is the high half of an fp32) as
// they are packed: a B block straight into its panels, an A block (mb×kb,
// in L2) into a buffer that then serves as A does, packed or in place. No
// fp32 copy of a whole operand is made, and the products are those of
// Sgemm on the widened operands, bit for bit.
func SgemmSrc(kern Kernel, transA, transB bool, m, n, k int, alpha float32, a Src, lda int, b Src, ldb int, beta float32, c []float32, ldc int) {
	w := workPool.Get().(*work)
	kc := min(k, kcBlock)
	w.b = grow(w.b, min(roundUp(n, nr), ncBlock)*kc)
	packed := n >= packMinN
	if packed {
		w.a = grow(w.a, min(roundUp(m, mr), mcBlock)*kc)
	}
	for jc := 0; jc < n; jc += ncBlock {
		nb := min(ncBlock, n-jc)
		for pc := 0; pc < k; pc += kcBlock {
			kb := min(kcBlock, k-pc)
			if b.F32 != nil {
				packB(transB, b.F32, ldb, pc, jc, kb, nb, w.b)
			} else {
				packB16(transB, b.BF16, ldb, pc, jc, kb, nb, w.b, w.wide[:])
			}
			bt := beta
			if pc > 0 {
				bt = 1
			}
			for ic := 0; ic < m; ic += mcBlock {
				mb := min(mcBlock, m-ic)
				// af[ai·ald + ap] (transposed: af[ap·ald + ai]) is the
				// block's first element: A itself, or its bf16 block widened.
				af, ald, ai, ap := a.F32, lda, ic, pc
				if af == nil {
					w.aw = widenA(transA, a.BF16, lda, ic, pc, mb, kb, w.aw)
					af, ai, ap = w.aw, 0, 0
					if ald = kb; transA {
						ald = mb
					}
				}
				if packed {
					packA(transA, af, ald, ai, ap, mb, kb, w.a)
					macro(kern, mb, nb, kb, alpha, bt, aBlock{buf: w.a, packed: true}, w, c[ic*ldc+jc:], ldc)
					continue
				}
				blk := aBlock{lda: ald, trans: transA}
				if transA {
					blk.buf = af[ap*ald+ai:]
				} else {
					blk.buf = af[ai*ald+ap:]
				}
				if r := mb % mr; r != 0 {
					// The last rows: packed once, zero-padded.
					packA(transA, af, ald, ai+mb-r, ap, r, kb, w.edge[:mr*kb])
				}
				macro(kern, mb, nb, kb, alpha, bt, blk, w, c[ic*ldc+jc:], ldc)
			}
		}
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	workPool.Put(w)
}

// aBlock is an mb×kb block of op(A): packed panels (buf, k-major, mr rows
// each), or A in place: buf starts at its first element, lda is A's row
// stride, trans says A is stored k×m, and a last partial panel of rows is
// packed in work.edge.
type aBlock struct {
	buf    []float32
	trans  bool
	packed bool
	lda    int
}

// macro runs the micro-kernel over an mb×nb block of C (c is its first
// element) from the A block and the packed B block (in w.b) of kb steps.
//
// With a two-tile kernel (wideOf: AVX-512), pairs of full B panels go
// through it, tile rows that are full, two tiles per call; edge tiles and a
// last single panel go through kern, whose arithmetic is the same.
func macro(kern Kernel, mb, nb, kb int, alpha, beta float32, blk aBlock, w *work, c []float32, ldc int) {
	tile := &w.tile
	wide := wideOf(kern)
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		bp := &w.b[jr*kb]
		// pair: this panel and the next are full (wide computes both);
		// paired: this one is that next panel (its full tiles are done).
		pair := wide != nil && jr%(2*nr) == 0 && nb-jr >= 2*nr
		paired := wide != nil && jr%(2*nr) == nr && nn == nr
		for ir := 0; ir < mb; ir += mr {
			mm := min(mr, mb-ir)
			if paired && mm == mr {
				continue
			}
			var ap *float32
			rsa, csa := 1, mr
			switch {
			case blk.packed:
				ap = &blk.buf[ir*kb]
			case mm == mr && blk.trans:
				ap, rsa, csa = &blk.buf[ir], 1, blk.lda
			case mm == mr:
				ap, rsa, csa = &blk.buf[ir*blk.lda], blk.lda, 1
			default:
				ap = &w.edge[0] // the block's last rows, packed (rsa 1, csa mr)
			}
			if mm == mr && pair {
				wide(kb, ap, rsa, csa, bp, &c[ir*ldc+jr], ldc, alpha, beta)
				continue
			}
			if mm == mr && nn == nr {
				kern(kb, ap, rsa, csa, bp, &c[ir*ldc+jr], ldc, alpha, beta)
				continue
			}
			// An edge tile: the kernel writes a full tile to the buffer,
			// then its mm×nn corner goes to C.
			kern(kb, ap, rsa, csa, bp, &tile[0], nr, alpha, 0)
			storeEdge(c[ir*ldc+jr:], ldc, tile[:], mm, nn, beta)
		}
	}
}

// storeEdge writes the mm×nn corner of an edge tile (rows of nr in tile)
// to c (row stride ldc): c = tile + beta·c, or the tile where beta is 0.
func storeEdge(c []float32, ldc int, tile []float32, mm, nn int, beta float32) {
	for i := range mm {
		row := c[i*ldc : i*ldc+nn]
		src := tile[i*nr : i*nr+nn]
		if beta == 0 {
			copy(row, src)
			continue
		}
		for j, v := range src {
			row[j] = v + beta*row[j]
		}
	}
}

// packA packs op(A)[ic:ic+mb, pc:pc+kb] into panels of mr rows, each
// k-major (dst[panel·mr·kb + p·mr + i]); rows past mb are zero.
func packA(trans bool, a []float32, lda, ic, pc, mb, kb int, dst []float32) {
	for ir := 0; ir < mb; ir += mr {
		mm := min(mr, mb-ir)
		d := dst[ir*kb : ir*kb+mr*kb]
		if trans {
			// A is stored k×m: the mr values of one step are contiguous.
			for p := range kb {
				src := a[(pc+p)*lda+ic+ir:]
				o := d[p*mr : p*mr+mr]
				if mm == mr {
					o[0], o[1], o[2], o[3], o[4], o[5] = src[0], src[1], src[2], src[3], src[4], src[5]
					continue
				}
				copy(o, src[:mm])
				clear(o[mm:])
			}
			continue
		}
		// A is stored m×k: gather one value from each of mr rows.
		if mm == mr {
			base := (ic+ir)*lda + pc
			r0 := a[base : base+kb]
			r1 := a[base+lda : base+lda+kb]
			r2 := a[base+2*lda : base+2*lda+kb]
			r3 := a[base+3*lda : base+3*lda+kb]
			r4 := a[base+4*lda : base+4*lda+kb]
			r5 := a[base+5*lda : base+5*lda+kb]
			for p := range kb {
				o := d[p*mr : p*mr+mr]
				o[0], o[1], o[2], o[3], o[4], o[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
			continue
		}
		clear(d)
		for i := range mm {
			base := (ic+ir+i)*lda + pc
			row := a[base : base+kb]
			for p, v := range row {
				d[p*mr+i] = v
			}
		}
	}
}

// packB packs op(B)[pc:pc+kb, jc:jc+nb] into panels of nr columns, each
// k-major (dst[panel·nr·kb + p·nr + j]); columns past nb are zero.
func packB(trans bool, b []float32, ldb, pc, jc, kb, nb int, dst []float32) {
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		d := dst[jr*kb : jr*kb+nr*kb]
		if !trans {
			// B is stored k×n: the nr values of one step are contiguous
			// (copied as arrays: inline vector moves, no memmove call).
			if nn == nr {
				if packBN16Asm(b, ldb, pc*ldb+jc+jr, kb, d) {
					continue
				}
				for p := range kb {
					off := (pc+p)*ldb + jc + jr
					*(*[nr]float32)(d[p*nr:]) = *(*[nr]float32)(b[off : off+nr])
				}
				continue
			}
			for p := range kb {
				o := d[p*nr : p*nr+nr]
				src := b[(pc+p)*ldb+jc+jr:]
				copy(o, src[:nn])
				clear(o[nn:])
			}
			continue
		}
		// B is stored n×k: gather one value from each of nr rows.
		if nn < nr {
			clear(d)
		}
		if nn == nr {
			packBT16(b, ldb, (jc+jr)*ldb+pc, kb, d)
			continue
		}
		for j := range nn {
			base := (jc+jr+j)*ldb + pc
			row := b[base : base+kb]
			for p, v := range row {
				d[p*nr+j] = v
			}
		}
	}
}

// packBT16 gathers 16 rows of length kb starting at b[base] (row stride
// ldb) into d, k-major.
func packBT16(b []float32, ldb, base, kb int, d []float32) {
	_ = b[base+15*ldb+kb-1]
	_ = d[kb*nr-1]
	p0 := packBT16Asm(b, ldb, base, kb, d) // the steps the assembly packed
	// Four rows at a time keeps the loop's working set in registers.
	for j0 := 0; j0 < nr; j0 += 4 {
		r0 := b[base+j0*ldb : base+j0*ldb+kb]
		r1 := b[base+(j0+1)*ldb : base+(j0+1)*ldb+kb]
		r2 := b[base+(j0+2)*ldb : base+(j0+2)*ldb+kb]
		r3 := b[base+(j0+3)*ldb : base+(j0+3)*ldb+kb]
		for p := p0; p < kb; p++ {
			o := d[p*nr+j0 : p*nr+j0+4]
			o[0], o[1], o[2], o[3] = r0[p], r1[p], r2[p], r3[p]
		}
	}
}

// KernGo is the portable micro-kernel: the tests run the blocked driver on
// it on every architecture.
func KernGo(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32) {
	as := unsafe.Slice(a, (mr-1)*rsa+(k-1)*csa+1)
	bs := unsafe.Slice(b, k*nr)
	var acc [mr][nr]float32
	for p := range k {
		bv := bs[p*nr : p*nr+nr]
		for i := range mr {
			x := as[i*rsa+p*csa]
			row := &acc[i]
			for j, y := range bv {
				row[j] += x * y
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
