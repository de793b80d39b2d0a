package gpu

// gelu.go: GELUBackward and the elementwise GELU forward and bias add that
// matmul.go's decomposed form (and its fallback when a cuBLASLt epilogue is
// unavailable) runs after the GEMM: the launchers of kernels/gelu.cu.
// Every tensor is the working dtype T.
//
// For matmul.go:
//
//	d.biasAdd(out, bias, N, OC)          out (N,OC) += bias (OC), one pass, in place
//	d.geluForward(out, inp, n)           out = gelu(inp), one fused pass (out may be inp)
//	d.geluForwardDecomposed(out, inp, n) the same as eager PyTorch runs it: eight passes
//	                                     through an fp32 scratch buffer
//
// GELUBackward's fused form is one pass (gelu_backward2); the decomposed
// form runs the derivative's nine elementwise passes through fp32 scratch
// buffers, as autograd of the composite would.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// The passes of gelu_forward_pass and gelu_backward_pass.
const (
	geluForwardPasses  = 8
	geluBackwardPasses = 9
)

// geluArgs validates an elementwise GELU op over n elements of one dtype
// (GELUBackward's contract; the forward is Matmul's epilogue).
func (d *Device) geluArgs(op string, n int, ts ...*tensor.Tensor) bool {
	c := &device.Ops.GELUBackward
	if len(ts) == 2 {
		c = &device.Ops.Cast // out, inp: n float elements each
	}
	return d.check(c, []int{n}, ts...) && d.checkDT(op, ts[0].DType, ts...)
}

// GELUBackward computes dinp = gelu'(inp)·dout elementwise over n elements,
// overwriting dinp (which may be dout).
// dinp (n), inp (n), dout (n), all T
func (d *Device) GELUBackward(dinp, inp, dout *tensor.Tensor, n int) {
	const op = "gelu backward"
	if !d.geluArgs(op, n, dinp, inp, dout) || n == 0 {
		return
	}
	dt := inp.DType
	if d.fused {
		// 16-byte accesses (16/es elements a thread and step) where every
		// pointer is 16-byte aligned, else the scalar path
		vec := 0
		if p, q, r := uint64(d.ptr(dinp)), uint64(d.ptr(inp)), uint64(d.ptr(dout)); p%16 == 0 && q%16 == 0 && r%16 == 0 {
			vec = 1
		}
		// gelu_backward2: a persistent grid, the next vector's loads in flight
		per := int64(geluBlock * 16 / dt.Size())
		nb := min(int64(d.residentBlocks("gelu_backward2", dt, geluBlock, 0)*d.sms()), (int64(n)+per-1)/per)
		d.run("gelu_backward2", dt, grid1(int(max(1, nb))), cuda.D1(geluBlock), 0, d.ptr(dinp), d.ptr(inp), d.ptr(dout), int64(n), vec)
		return
	}
	x2, t, r := d.buf("gelu.x2", n*4), d.buf("gelu.t", n*4), d.buf("gelu.r", n*4)
	if x2 == 0 || t == 0 || r == 0 {
		return
	}
	g := d.ewGrid(int64(n), 1)
	d.batch(func() {
		for op := range geluBackwardPasses {
			if !d.run("gelu_backward_pass", dt, g, cuda.D1(geluBlock), 0, op, x2, t, r, d.ptr(inp), d.ptr(dout), d.ptr(dinp), int64(n)) {
				return
			}
		}
	})
}

// geluForward computes out = gelu(inp) over n elements in one pass (out may
// be inp). out (n), inp (n), both T. It records an error and reports false
// on failure.
func (d *Device) geluForward(out, inp *tensor.Tensor, n int) bool {
	if !d.geluArgs("gelu", n, out, inp) {
		return false
	}
	if n == 0 {
		return true
	}
	dt := inp.DType
	es := dt.Size()
	return d.run("gelu_forward", dt, d.ewGrid(int64(n), 4), cuda.D1(geluBlock), 0, d.ptr(out), d.ptr(inp), int64(n),
		vec4(d.ptr(out), es, d.ptr(inp), es))
}

// geluForwardDecomposed computes out = gelu(inp) over n elements as the
// composite's eight elementwise passes (x³, ×0.044715, +x, ×√(2/π), tanh,
// +1, ×x, ×0.5) through an fp32 scratch buffer; out is written by the last
// pass only, so it may be inp. It records an error and reports false on
// failure.
func (d *Device) geluForwardDecomposed(out, inp *tensor.Tensor, n int) bool {
	if !d.geluArgs("gelu", n, out, inp) {
		return false
	}
	if n == 0 {
		return true
	}
	t := d.buf("gelu.t", n*4)
	if t == 0 {
		return false
	}
	dt, g, ok := inp.DType, d.ewGrid(int64(n), 1), true
	d.batch(func() {
		for op := range geluForwardPasses {
			if ok = d.run("gelu_forward_pass", dt, g, cuda.D1(geluBlock), 0, op, t, d.ptr(inp), d.ptr(out), int64(n)); !ok {
				return
			}
		}
	})
	return ok
}

// biasAdd adds bias to every row of out in place: out (N,OC) += bias (OC),
// rounded to T; out and bias are T. It records an error and reports false
// on failure.
func (d *Device) biasAdd(out, bias *tensor.Tensor, N, OC int) bool {
	const op = "bias add"
	if N < 0 || OC <= 0 || out == nil || bias == nil || out.Numel() != N*OC || bias.Numel() != OC {
		d.fail(fmt.Errorf("gpu: %s: N=%d OC=%d, out %s, bias %s: %w", op, N, OC, desc(out), desc(bias), tensor.ErrShape))
		return false
	}
	if !out.DType.Float() || !d.checkDT(op, out.DType, bias) {
		if !out.DType.Float() {
			d.unsupported(op, out.DType, bias.DType)
		}
		return false
	}
	if N == 0 {
		return true
	}
	return d.run("bias_add", out.DType, d.ewGrid(int64(N)*int64(OC), 1), cuda.D1(geluBlock), 0, d.ptr(out), d.ptr(bias), N, OC)
}
