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
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// The passes of gelu_forward_pass and gelu_backward_pass.
const (
	geluForwardPasses  = 8
	geluBackwardPasses = 9
)

// GELUBackward computes dinp = gelu'(inp)·dout elementwise over n elements,
// overwriting dinp (which may be dout).
// dinp (n), inp (n), dout (n), all T
func (d *Device) GELUBackward(dinp, inp, dout *tensor.Tensor, n int) {
	const op = "gelu backward"
	if !d.check(&device.Ops.GELUBackward, []int{n}, dinp, inp, dout) || !d.checkDT(op, inp.DType, dinp, dout) || n == 0 {
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
// be inp). out (n), inp (n), both T, as Matmul checked them. It records an
// error and reports false on failure.
func (d *Device) geluForward(out, inp *tensor.Tensor, n int) bool {
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
// pass only, so it may be inp. Arguments as geluForward's. It records an
// error and reports false on failure.
func (d *Device) geluForwardDecomposed(out, inp *tensor.Tensor, n int) bool {
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
// rounded to T; out and bias are T, as Matmul checked them. It records an
// error and reports false on failure.
func (d *Device) biasAdd(out, bias *tensor.Tensor, N, OC int) bool {
	if N == 0 {
		return true
	}
	return d.run("bias_add", out.DType, d.ewGrid(int64(N)*int64(OC), 1), cuda.D1(geluBlock), 0, d.ptr(out), d.ptr(bias), N, OC)
}

var _ device.GELUer = (*Device)(nil)

// GELU computes out = gelu(inp) over n elements (out may be inp) with the
// kernels Matmul's GELU epilogue falls back to: gelu_forward in the fused
// form, the composite's eight passes in the decomposed one.
// out (n), inp (n), both T
func (d *Device) GELU(out, inp *tensor.Tensor, n int) {
	const op = "gelu"
	if !d.check(&device.GELUForward, []int{n}, out, inp) || !d.checkDT(op, inp.DType, out) {
		return
	}
	if d.fused {
		d.geluForward(out, inp, n)
	} else {
		d.geluForwardDecomposed(out, inp, n)
	}
}
