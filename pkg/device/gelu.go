package device

import "github.com/druto/druto/pkg/tensor"

// GELUer is implemented by devices that run the tanh-form GELU on its own,
// out of a Matmul's epilogue: activation recomputation (gpt.RecomputeGELU)
// keeps only the pre-activation of the MLP and recomputes gelu(pre) during
// backward. A device without it recomputes through the fc Matmul with its
// GELU epilogue instead (the same values, one GEMM more). Contract:
// GELUForward.
type GELUer interface {
	// GELU computes out = gelu(inp) elementwise over n elements, as the
	// GELU epilogue of Matmul computes it from an fp32 pre-activation (out
	// may be inp). In fp32 the bits equal the epilogue's; in 16 bits gelu
	// reads the rounded pre-activation (one rounding more, within the
	// op's tolerance).
	// out (n), inp (n), both the same float dtype
	GELU(out, inp *T, n int)
}

// GELUForward is the contract of GELUer.GELU: tanhf's ulps in fp32 (as
// GELUBackward), two roundings in 16 bits.
var GELUForward = Contract{Op: "GELU", Sizes: []string{"n"},
	Params: []Param{p("out", Float, Out, prod(0)), p("inp", Float, In, prod(0))},
	Iface:  "GELUer", Class: "gelu/bias",
	Tol: func(dt tensor.DType, _ []int) float64 {
		return map[bool]float64{true: 8, false: 2}[dt == tensor.F32]
	}}
