package gpu

// lnfixed_test.go: the fixed-width layernorm kernels (lnFixed): which
// widths and row types take them, their argument lists against the PTX
// (any machine), and on a GPU their results against the kernels of
// run-time C (forward and residual bit for bit, backward dinp bit for bit
// and dweight/dbias to rounding).

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/tensor"
)

// TestLNWidths: every width of lnCWidths has its forward kernels in
// layernorm.cu for every dtype, the backward exactly up to lnCBackMax.
func TestLNWidths(t *testing.T) {
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, v := range vs {
		have[v.Kernel+"/"+v.DType.String()] = true
	}
	for _, dt := range []string{"f32", "bf16", "f16"} {
		for _, C := range lnCWidths {
			for _, base := range []string{"layernorm_forward_rf32", "residual_layernorm_forward_rf32", "layernorm_backward_rf32"} {
				k := fmt.Sprintf("%s_c%d/%s", base, C, dt)
				want := !strings.HasPrefix(base, "layernorm_backward") || C <= lnCBackMax
				if have[k] != want {
					t.Errorf("%s: in layernorm.cu %v, want %v", k, have[k], want)
				}
			}
		}
	}
}

// TestLaunchFixedWidth: fused layernorm of fp32 rows at the fixed widths
// launches the _cC kernels (argument lists checked against the PTX), other
// widths, 16-bit rows, a misaligned row pointer, the decomposed form and
// noFixed the kernels of run-time C.
func TestLaunchFixedWidth(t *testing.T) {
	sigs := signatures(t)
	F, H := tensor.F32, tensor.BF16
	const N = 37
	type op struct {
		name string
		call func(d *Device, C int, rows tensor.DType, off uintptr)
	}
	ops := []op{
		{"layernorm_forward_rf32", func(d *Device, C int, rows tensor.DType, off uintptr) {
			d.LayerNorm(dev(H, N, C), dev(F, N), dev(F, N), shifted(dev(rows, N, C), off), dev(H, C), dev(H, C), N, C)
		}},
		{"residual_layernorm_forward_rf32", func(d *Device, C int, rows tensor.DType, off uintptr) {
			d.ResidualLayerNorm(dev(rows, N, C), dev(H, N, C), dev(F, N), dev(F, N), shifted(dev(rows, N, C), off), dev(H, N, C), dev(H, C), dev(H, C), N, C)
		}},
		{"layernorm_backward_rf32", func(d *Device, C int, rows tensor.DType, off uintptr) {
			d.LayerNormBackward(dev(rows, N, C), dev(F, C), dev(F, C), dev(H, N, C), shifted(dev(rows, N, C), off), dev(H, C), dev(F, N), dev(F, N), N, C)
		}},
	}
	for _, o := range ops {
		for _, C := range []int{64, 128, 256, 384, 512, 768, 1024} {
			for _, rows := range []tensor.DType{F, H} {
				for _, off := range []uintptr{0, 4} {
					for _, noFixed := range []bool{false, true} {
						name := fmt.Sprintf("%s C=%d rows %s offset %d noFixed %v", o.name, C, rows, off, noFixed)
						got, err := hooked(t, true, func(d *Device) { d.noFixed = noFixed; o.call(d, C, rows, off) })
						if err != nil {
							t.Errorf("%s: %v", name, err)
							continue
						}
						names := checkSigs(t, name, sigs, got)
						fixed := slices.Contains(lnCWidths, C) && rows == F && off == 0 && !noFixed &&
							(!strings.HasPrefix(o.name, "layernorm_backward") || C <= lnCBackMax)
						want := o.name
						if fixed {
							want = fmt.Sprintf("%s_c%d", o.name, C)
						}
						if rows != F {
							want = strings.TrimSuffix(o.name, "_rf32")
						}
						if len(names) == 0 || names[0] != want {
							t.Errorf("%s: launches %v, want %s first", name, names, want)
						}
					}
				}
			}
		}
	}
}

// shifted is t moved by off bytes (a misaligned row pointer).
func shifted(t *tensor.Tensor, off uintptr) *tensor.Tensor {
	return tensor.OnDevice(t.DType, t.Dev+off, t.Shape...)
}

// TestGPULayerNormFixedWidth: the fixed-width kernels against the kernels
// of run-time C on the same inputs, at every width, with rows enough for
// several rows a warp in the backward's persistent grid.
func TestGPULayerNormFixedWidth(t *testing.T) {
	g := gpuDev(t, true)
	rng := testRNG(t)
	F, H := tensor.F32, tensor.BF16
	ran := 0
	for _, C := range lnCWidths {
		N := 3*lnCBackBlock/32*g.sms() + 5
		if C >= 768 {
			N = 2*lnCBackBlock/32*g.sms() + 3
		}
		built := func(base string) bool { return g.funcs[kernelKey{fmt.Sprintf("%s_c%d", base, C), H}] != nil }
		a, b := randHost(rng, F, 0.5, 2, N, C), randHost(rng, H, 0, 1, N, C)
		w, bias := randHost(rng, H, 1, 0.2, C), randHost(rng, H, 0, 0.1, C)
		same := func(what string, got, want []float32) {
			t.Helper()
			bad := 0
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					if bad++; bad <= 3 {
						t.Errorf("C=%d %s[%d]: fixed %v, run-time C %v", C, what, i, got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("C=%d %s: %d of %d differ", C, what, bad, len(got))
			}
		}
		run := func(noFixed bool, fn func()) {
			g.noFixed = noFixed
			defer func() { g.noFixed = false }()
			fn()
		}
		if built("layernorm_forward_rf32") {
			ran++
			var outs [2][]float32
			var stats [2][]float32
			for i, nf := range []bool{false, true} {
				out, mean, rstd := toGPU(t, g, tensor.New(H, N, C)), toGPU(t, g, tensor.New(F, N)), toGPU(t, g, tensor.New(F, N))
				run(nf, func() { g.LayerNorm(out, mean, rstd, toGPU(t, g, a), toGPU(t, g, w), toGPU(t, g, bias), N, C) })
				outs[i] = toHost(t, g, out).ToF32()
				stats[i] = append(toHost(t, g, mean).ToF32(), toHost(t, g, rstd).ToF32()...)
			}
			same("layernorm out", outs[0], outs[1])
			same("layernorm mean, rstd", stats[0], stats[1])
		} else {
			t.Logf("C=%d: layernorm_forward_rf32_c%d not built on %s", C, C, g.Name())
		}
		if built("residual_layernorm_forward_rf32") {
			var got [2][]float32
			for i, nf := range []bool{false, true} {
				res, out, mean, rstd := toGPU(t, g, tensor.New(F, N, C)), toGPU(t, g, tensor.New(H, N, C)), toGPU(t, g, tensor.New(F, N)), toGPU(t, g, tensor.New(F, N))
				run(nf, func() {
					g.ResidualLayerNorm(res, out, mean, rstd, toGPU(t, g, a), toGPU(t, g, b), toGPU(t, g, w), toGPU(t, g, bias), N, C)
				})
				got[i] = slices.Concat(toHost(t, g, res).ToF32(), toHost(t, g, out).ToF32(), toHost(t, g, mean).ToF32(), toHost(t, g, rstd).ToF32())
			}
			same("residual layernorm res, out, mean, rstd", got[0], got[1])
		}
		if C <= lnCBackMax && built("layernorm_backward_rf32") {
			mean, rstd := randHost(rng, F, 0.5, 0.1, N), randHost(rng, F, 1, 0.1, N)
			dinp0, dw0, db0 := randHost(rng, F, 0, 1, N, C), randHost(rng, F, 0, 1, C), randHost(rng, F, 0, 1, C)
			var di, dwb [2][]float32
			for i, nf := range []bool{false, true} {
				dinp, dw, db := toGPU(t, g, dinp0), toGPU(t, g, dw0), toGPU(t, g, db0)
				run(nf, func() {
					// the run-time C form without TMA: layernorm_backward_rf32
					g.noTMA = nf
					defer func() { g.noTMA = false }()
					g.LayerNormBackward(dinp, dw, db, toGPU(t, g, b), toGPU(t, g, a), toGPU(t, g, w), toGPU(t, g, mean), toGPU(t, g, rstd), N, C)
				})
				di[i] = toHost(t, g, dinp).ToF32()
				dwb[i] = append(toHost(t, g, dw).ToF32(), toHost(t, g, db).ToF32()...)
			}
			same("layernorm backward dinp", di[0], di[1])
			var rms float64
			for _, v := range dwb[1] {
				rms += float64(v) * float64(v)
			}
			rms = math.Sqrt(rms / float64(len(dwb[1])))
			for i := range dwb[0] {
				if d := math.Abs(float64(dwb[0][i] - dwb[1][i])); d > 1e-5*rms || math.IsNaN(float64(dwb[0][i])) {
					t.Errorf("C=%d dweight/dbias[%d]: fixed %v, run-time C %v (rms %.3g)", C, i, dwb[0][i], dwb[1][i], rms)
					break
				}
			}
		} else if C <= lnCBackMax {
			t.Logf("C=%d: layernorm_backward_rf32_c%d not built on %s (its shared memory)", C, C, g.Name())
		}
	}
	if ran == 0 {
		t.Fatalf("%s built no fixed-width layernorm kernel", g.Name())
	}
}
