package gpu

// fp8_ptr_test.go: the FP8 ops on raw addresses and explicit formats, as
// the tests call them (a q at an offset, a null q, a format outside the
// two): each runs the op's checks and launch as the exported method does,
// records its error for Sync, and returns it.

import (
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

func (d *Device) castTransposeFP8P(q, qt cuda.DevicePtr, amax, x, scale *tensor.Tensor, f tensor.FP8Format, N, C int) error {
	return d.record(d.castTransposeFP8("CastTransposeFP8", "", q, qt, amax, x, nil, scale, f, N, C, 0))
}

func (d *Device) geluCastTransposeFP8P(q, qt cuda.DevicePtr, amax, pre, scale *tensor.Tensor, N, C int) error {
	return d.record(d.castTransposeFP8("GELUCastTransposeFP8", "gelu_", q, qt, amax, pre, nil, scale, tensor.E4M3, N, C, 0))
}

func (d *Device) castTransposeDBiasFP8P(q, qt cuda.DevicePtr, amax, dbias, dy, scale *tensor.Tensor, N, C int) error {
	return d.record(d.castTransposeDBiasFP8(q, qt, amax, dbias, dy, nil, scale, N, C))
}

func (d *Device) dgeluCastTransposeDBiasFP8P(q, qt cuda.DevicePtr, amax, dbias, dy, pre, scale *tensor.Tensor, N, C int) error {
	if pre == nil {
		return d.record(errFP8NilPre)
	}
	return d.record(d.castTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale, N, C))
}

func (d *Device) layerNormFP8P(q, qt cuda.DevicePtr, amax, mean, rstd, inp, weight, bias, scale *tensor.Tensor, N, C int) error {
	return d.record(d.layerNormFP8(nil, q, qt, amax, mean, rstd, inp, nil, weight, bias, scale, N, C))
}

func (d *Device) residualLayerNormFP8P(res *tensor.Tensor, q, qt cuda.DevicePtr, amax, mean, rstd, a, b, weight, bias, scale *tensor.Tensor, N, C int) error {
	if res == nil {
		return d.record(errFP8NilRes)
	}
	return d.record(d.layerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale, N, C))
}

func (d *Device) matmulFP8P(out *tensor.Tensor, a, b cuda.DevicePtr, fa, fb tensor.FP8Format, invA, invB *tensor.Tensor, N, C, OC int) error {
	return d.record(d.matmulFP8("MatmulFP8", false, out, a, b, fa, fb, nil, invA, invB, N, C, OC))
}

func (d *Device) matmulFP8AddP(out *tensor.Tensor, a, b cuda.DevicePtr, fa, fb tensor.FP8Format, invA, invB *tensor.Tensor, N, C, OC int) error {
	return d.record(d.matmulFP8("MatmulFP8Add", true, out, a, b, fa, fb, nil, invA, invB, N, C, OC))
}

func (d *Device) fp8ScaleUpdateP(st, meta, recs *tensor.Tensor, K, H, margin int) error {
	return d.record(d.fp8ScaleUpdate(st, meta, recs, K, H, margin))
}

func (d *Device) layerNormBackwardCastFP8P(dinp, dweight, dbias *tensor.Tensor, q, qt cuda.DevicePtr, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *tensor.Tensor, N, C int) error {
	return d.record(d.layerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale, N, C))
}
