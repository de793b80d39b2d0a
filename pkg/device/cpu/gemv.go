package cpu

// gemv.go: the linear layer of a few rows, as decoding runs it (one row a
// sequence). A GEMM would pack (copy) the weights before multiplying, which
// for a row or two reads them twice or more; here every weight is read once,
// four weight rows at a time against each input row while those rows sit in
// L1 (two weight rows against four input rows where a batch has two or
// more: gemvPairs4), and the weight rows are split into contiguous ranges
// over the worker goroutines. Decoding is bound by the weights' bytes, so
// this is the loop that sets its speed. The AVX2 kernels prefetch the weight rows 16
// rows ahead of those they read: a quad of rows is four short interleaved
// streams, which the hardware prefetchers pick up too late (without it,
// bf16 weights took as long as fp32 ones: the same number of rows, half the
// bytes). The one-row and the four-row kernels add each sum in the same
// order, so a batch gives each row the bits it gets alone.

import (
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// gemvMaxRows is the most rows of input that Matmul sends to gemv (above
// it a GEMM's blocking reuses each weight enough to win).
const gemvMaxRows = 8

// gemvOK reports whether Matmul of N rows against weight w takes the gemv
// path: the fused form, few rows, fp32 or bf16 weights.
func (d *Device) gemvOK(N int, w *tensor.Tensor) bool {
	return d.fused && N <= gemvMaxRows && (w.DType == tensor.F32 || w.DType == tensor.BF16)
}

// gemv computes y (N,OC) = x (N,C) · wᵀ with fp32 accumulation; w (OC,C) is
// F32 or BF16.
func (d *Device) gemv(y, x []float32, w *tensor.Tensor, N, C, OC int) {
	quads := (OC + 3) / 4
	grain := max(4, (1<<13)/max(C, 1)) // ≥ ~32 KiB of fp32 weights a chunk
	d.parallel(quads, grain, func(lo, hi int) {
		var acc [32]float32
		full := min(hi, OC/4) // whole quads of this range
		for r := 0; r < N; r++ {
			xr, yr := x[r*C:(r+1)*C], y[r*OC:(r+1)*OC]
			if R := min(4, N-r); R >= 2 && useAVX2 && C%8 == 0 && full > lo {
				// Two to four rows at once: each weight read once for them
				// (a row past R repeats the last: the same sums, the same
				// place).
				var xs, outs [4]*float32
				for i := range 4 {
					j := r + min(i, R-1)
					xs[i], outs[i] = &x[j*C], &y[j*OC+4*lo]
				}
				if w.DType == tensor.F32 {
					gemvPairs4F32AVX2(&w.F32()[4*lo*C], C, &xs, &outs, 2*(full-lo))
				} else {
					gemvPairs4BF16AVX2(&w.U16()[4*lo*C], C, &xs, &outs, 2*(full-lo))
				}
				for j := r; j < r+R; j++ {
					for q := full; q < hi; q++ {
						o := 4 * q
						gemvQuad(y[j*OC+o:j*OC+min(o+4, OC)], w, o, min(4, OC-o), x[j*C:(j+1)*C], &acc)
					}
				}
				r += R - 1
				continue
			}
			if useAVX2 && C%8 == 0 && full > lo {
				// One call over the range's whole quads, sums in registers.
				if w.DType == tensor.F32 {
					gemvRowsF32AVX2(&w.F32()[4*lo*C], C, &xr[0], &yr[4*lo], full-lo)
				} else {
					gemvRowsBF16AVX2(&w.U16()[4*lo*C], C, &xr[0], &yr[4*lo], full-lo)
				}
				for q := full; q < hi; q++ {
					o := 4 * q
					gemvQuad(yr[o:min(o+4, OC)], w, o, min(4, OC-o), xr, &acc)
				}
				continue
			}
			for q := lo; q < hi; q++ {
				o := 4 * q
				gemvQuad(yr[o:min(o+4, OC)], w, o, min(4, OC-o), xr, &acc)
			}
		}
	})
}

// gemvQuad computes out[j] = w[o+j,:]·xr for j < nr (at most 4).
func gemvQuad(out []float32, w *tensor.Tensor, o, nr int, xr []float32, acc *[32]float32) {
	C := len(xr)
	k := 0
	if useAVX2 && nr == 4 && C >= 8 {
		k = C &^ 7
		if w.DType == tensor.F32 {
			gemv4F32AVX2(&w.F32()[o*C], C, &xr[0], k, acc)
		} else {
			gemv4BF16AVX2(&w.U16()[o*C], C, &xr[0], k, acc)
		}
		for j := range 4 {
			a := acc[8*j : 8*j+8]
			out[j] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
		}
	} else {
		clear(out)
	}
	for j := range nr {
		out[j] += dotRow(w, (o+j)*C, xr, k)
	}
}

// dotRow returns Σ w[base+i]·xr[i] over i in [from, len(xr)) in fp32.
func dotRow(w *tensor.Tensor, base int, xr []float32, from int) float32 {
	var s float32
	if w.DType == tensor.F32 {
		wr := w.F32()[base : base+len(xr)]
		for i := from; i < len(xr); i++ {
			s += wr[i] * xr[i]
		}
		return s
	}
	wr := w.U16()[base : base+len(xr)]
	for i := from; i < len(xr); i++ {
		s += math.Float32frombits(uint32(wr[i])<<16) * xr[i]
	}
	return s
}
