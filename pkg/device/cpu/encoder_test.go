package cpu

import (
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ntEncoderRef is the float64 forward: out[b,t,:] = wte[tok,:] + wpe[t,:].
func ntEncoderRef(wte, wpe []float64, toks []int32, B, T, C int) []float64 {
	out := make([]float64, B*T*C)
	for b := range B {
		for t := range T {
			tok := int(toks[b*T+t])
			for c := range C {
				out[(b*T+t)*C+c] = wte[tok*C+c] + wpe[t*C+c]
			}
		}
	}
	return out
}

// TestEncoderGradFD checks the forward against the float64 loop and the
// backward against central differences of L = Σ w·out.
func TestEncoderGradFD(t *testing.T) {
	const B, T, C, V, maxT = 2, 3, 5, 4, 4
	for _, f := range ntForms {
		t.Run(f.name, func(t *testing.T) {
			r := ntRNG(1)
			d := ntDev(f.fused, 2)
			wte, wte64 := ntTensor(t, tensor.F32, ntNormal(r, V*C, 1, 0), V, C)
			wpe, wpe64 := ntTensor(t, tensor.F32, ntNormal(r, maxT*C, 1, 0), maxT, C)
			tokens := ntTokens(t, r, B*T, V-1, B, T) // token V-1 never occurs: its gradient row stays 0
			tokens.I32()[0], tokens.I32()[4] = 2, 2  // a repeated token
			out := tensor.New(tensor.F32, B, T, C)
			ntPoison(out)
			d.Encoder(out, wte, wpe, tokens, B, T, C)
			ntSync(t, d)
			ntClose(t, "out", ntF64(out), ntEncoderRef(wte64, wpe64, tokens.I32(), B, T, C), tensor.F32, 1)

			w, w64 := ntTensor(t, tensor.F32, ntNormal(r, B*T*C, 1, 0), B, T, C)
			dwte, dwpe := tensor.New(tensor.F32, V, C), tensor.New(tensor.F32, maxT, C)
			d.EncoderBackward(dwte, dwpe, w, tokens, B, T, C)
			ntSync(t, d)
			loss := func() float64 { return ntDot(w64, ntEncoderRef(wte64, wpe64, tokens.I32(), B, T, C)) }
			// Each gradient element is a sum of at most B·T float32 values:
			// the F32 tolerance holds as is.
			ntClose(t, "dwte", ntF64(dwte), ntFD(wte64, loss), tensor.F32, 1)
			ntClose(t, "dwpe", ntF64(dwpe), ntFD(wpe64, loss), tensor.F32, 1)
		})
	}
}

// TestEncoderParity runs the fused and decomposed forms on the same random
// inputs in every dtype, outputs poisoned first (forward) or filled with the
// same random prior gradient (backward, which accumulates).
func TestEncoderParity(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, N := range ntRowCounts {
			for _, C := range ntWidths {
				B, T := 1, N
				if N%16 == 0 {
					B, T = N/16, 16
				}
				const V = 50
				t.Run(ntName(dt, N, C), func(t *testing.T) {
					r := ntRNG(uint64(N*10007 + C))
					wte, _ := ntTensor(t, dt, ntNormal(r, V*C, 1, 0), V, C)
					wpe, _ := ntTensor(t, dt, ntNormal(r, (T+3)*C, 1, 0), T+3, C)
					tokens := ntTokens(t, r, B*T, V, B, T)
					dout, _ := ntTensor(t, dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
					prior := ntNormal(r, V*C, 1, 0)
					priorPos := ntNormal(r, (T+3)*C, 1, 0)
					var outs, dwtes, dwpes [2]*tensor.Tensor
					for k, f := range ntForms {
						d := ntDev(f.fused, 2)
						outs[k] = tensor.New(dt, B, T, C)
						ntPoison(outs[k])
						d.Encoder(outs[k], wte, wpe, tokens, B, T, C)
						dwtes[k], _ = ntTensor(t, dt, prior, V, C)
						dwpes[k], _ = ntTensor(t, dt, priorPos, T+3, C)
						d.EncoderBackward(dwtes[k], dwpes[k], dout, tokens, B, T, C)
						ntSync(t, d)
					}
					// The forward is one rounded add either way: identical bits.
					// (ntCloseT also fails on poison left in either.)
					ntCloseT(t, "out", outs[0], outs[1], dt, 1)
					if !ntSameBits(outs[0], outs[1]) {
						t.Errorf("out: fused and decomposed differ in bits")
					}
					// Backward sums the same values in another grouping, at most
					// N terms of O(1): scale the tolerance by 1 + N/16.
					sc := 1 + float64(N)/16
					ntCloseT(t, "dwte", dwtes[0], dwtes[1], dt, sc)
					ntCloseT(t, "dwpe", dwpes[0], dwpes[1], dt, sc)
				})
			}
		}
	}
}

// TestEncoderBackwardDeterministic checks that heavily repeated tokens give
// the same bits across runs and thread counts, in both forms and dtypes.
func TestEncoderBackwardDeterministic(t *testing.T) {
	const B, T, C, V = 8, 64, 33, 5
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, f := range ntForms {
			r := ntRNG(7)
			dout, _ := ntTensor(t, dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
			tokens := ntTokens(t, r, B*T, V, B, T)
			prior := ntNormal(r, V*C, 0.1, 0)
			var first *tensor.Tensor
			var firstPos *tensor.Tensor
			for run, threads := range []int{1, 2, 2, 1, 3} {
				d := ntDev(f.fused, threads)
				dwte, _ := ntTensor(t, dt, prior, V, C)
				dwpe := tensor.New(dt, T, C)
				d.EncoderBackward(dwte, dwpe, dout, tokens, B, T, C)
				ntSync(t, d)
				if run == 0 {
					first, firstPos = dwte, dwpe
					continue
				}
				if !ntSameBits(first, dwte) || !ntSameBits(firstPos, dwpe) {
					t.Errorf("%s %s: run %d with %d threads differs in bits from run 0", dt, f.name, run, threads)
				}
			}
		}
	}
}

// TestEncoderBackwardAccumulates checks dwte, dwpe += (not =) in both forms.
func TestEncoderBackwardAccumulates(t *testing.T) {
	const B, T, C, V = 3, 5, 6, 4
	for _, f := range ntForms {
		r := ntRNG(3)
		d := ntDev(f.fused, 2)
		dout, _ := ntTensor(t, tensor.F32, ntNormal(r, B*T*C, 1, 0), B, T, C)
		tokens := ntTokens(t, r, B*T, V, B, T)
		p0, p064 := ntTensor(t, tensor.F32, ntNormal(r, V*C, 1, 0), V, C)
		q0, q064 := ntTensor(t, tensor.F32, ntNormal(r, T*C, 1, 0), T, C)
		z, zq := tensor.New(tensor.F32, V, C), tensor.New(tensor.F32, T, C)
		d.EncoderBackward(p0, q0, dout, tokens, B, T, C)
		d.EncoderBackward(z, zq, dout, tokens, B, T, C)
		ntSync(t, d)
		want, wantq := ntF64(z), ntF64(zq)
		for i := range want {
			want[i] += p064[i]
		}
		for i := range wantq {
			wantq[i] += q064[i]
		}
		ntClose(t, f.name+" dwte", ntF64(p0), want, tensor.F32, 1)
		ntClose(t, f.name+" dwpe", ntF64(q0), wantq, tensor.F32, 1)
	}
}

// TestEncoderBadToken checks that a token outside the vocabulary records an
// error instead of panicking, for both ops.
func TestEncoderBadToken(t *testing.T) {
	const B, T, C, V = 1, 2, 3, 4
	for _, f := range ntForms {
		d := ntDev(f.fused, 2)
		wte, wpe := tensor.New(tensor.F32, V, C), tensor.New(tensor.F32, T, C)
		out := tensor.New(tensor.F32, B, T, C)
		for _, bad := range []int32{V, -1} {
			tokens, _ := tensor.FromI32([]int32{0, bad}, B, T)
			d.Encoder(out, wte, wpe, tokens, B, T, C)
			if err := d.Sync(); err == nil {
				t.Errorf("%s: Encoder with token %d: no error", f.name, bad)
			}
			d.EncoderBackward(wte, wpe, out, tokens, B, T, C)
			if err := d.Sync(); err == nil {
				t.Errorf("%s: EncoderBackward with token %d: no error", f.name, bad)
			}
		}
		if err := d.Sync(); err != nil {
			t.Errorf("%s: Sync did not clear the error: %v", f.name, err)
		}
	}
}
