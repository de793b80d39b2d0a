package gpu

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestLayerNormEnv: DRUTO_LAYERNORM picks the kernels; anything else is
// one clear error.
func TestLayerNormEnv(t *testing.T) {
	for v, want := range map[string]bool{"": lnAsyncDefault, "sync": false, "async": true} {
		t.Setenv(LayerNormEnv, v)
		got, err := layerNormEnv()
		if err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", LayerNormEnv, v, got, err, want)
		}
	}
	t.Setenv(LayerNormEnv, "fast")
	if _, err := layerNormEnv(); err == nil || !strings.Contains(err.Error(), "want sync or async") {
		t.Errorf("%s=fast: %v", LayerNormEnv, err)
	}
}

// TestLayerNormAsyncLaunches: with lnAsync set the fused ops launch the
// async kernels (the backward followed by layernorm_reduce) with the plan's
// stages, and layernorm.cu's kernels where the rows do not fit them (C not
// a multiple of 4, wider than 1024, a misaligned row).
func TestLayerNormAsyncLaunches(t *testing.T) {
	bf, f32 := tensor.BF16, tensor.F32
	run := func(stages, N, C int, fn func(d *Device, N, C int)) []launch {
		got, err := hooked(t, true, func(d *Device) {
			d.lnAsync, d.lnStages = true, stages
			fn(d, N, C)
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	names := func(ls []launch) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.kernel)
		}
		return strings.Join(s, " ")
	}
	fwd := func(d *Device, N, C int) {
		d.LayerNorm(dev(bf, N, C), dev(f32, N), dev(f32, N), dev(f32, N, C), dev(bf, C), dev(bf, C), N, C)
	}
	res := func(d *Device, N, C int) {
		d.ResidualLayerNorm(dev(f32, N, C), dev(bf, N, C), dev(f32, N), dev(f32, N), dev(f32, N, C), dev(bf, N, C), dev(bf, C), dev(bf, C), N, C)
	}
	bwd := func(d *Device, N, C int) {
		d.LayerNormBackward(dev(f32, N, C), dev(f32, C), dev(f32, C), dev(bf, N, C), dev(f32, N, C), dev(bf, C), dev(f32, N), dev(f32, N), N, C)
	}
	for _, c := range []struct {
		fn          func(d *Device, N, C int)
		async, sync string
		stages      int // the default's
	}{
		{fwd, "layernorm_forward_async_rf32", "layernorm_forward_rf32", 4},
		{res, "residual_layernorm_forward_async_rf32", "residual_layernorm_forward_rf32", 3},
		{bwd, "layernorm_backward_async_rf32 layernorm_reduce", "layernorm_backward_rf32 layernorm_reduce", 3},
	} {
		got := run(0, 1000, 768, c.fn)
		if s := names(got); s != c.async {
			t.Errorf("async, C 768: %s; want %s", s, c.async)
			continue
		}
		// the last three arguments: N, C, stages
		args := got[0].args
		if n := len(args); args[n-3] != 1000 || args[n-2] != 768 || args[n-1] != c.stages {
			t.Errorf("%s: N, C, stages %v; want 1000, 768, %d", got[0].kernel, args[n-3:], c.stages)
		}
		if a := run(2, 1000, 768, c.fn)[0].args; a[len(a)-1] != 2 {
			t.Errorf("%s with lnStages 2: stages %v", got[0].kernel, a[len(a)-1])
		}
		for _, C := range []int{766, 1028} {
			if s := names(run(0, 10, C, c.fn)); s != c.sync {
				t.Errorf("async, C %d: %s; want %s", C, s, c.sync)
			}
		}
	}
	// a misaligned row: the view starts one element in
	got, err := hooked(t, true, func(d *Device) {
		d.lnAsync = true
		N, C := 10, 768
		inp := dev(f32, N*C+1).MustView(1, N*C)
		d.LayerNorm(dev(bf, N, C), dev(f32, N), dev(f32, N), inp, dev(bf, C), dev(bf, C), N, C)
	})
	if err != nil || names(got) != "layernorm_forward_rf32" {
		t.Errorf("async, misaligned input: %s, %v", names(got), err)
	}
}

// TestLayerNormAsyncPlan: every fast-path row (C % 4 == 0, C <= 1024) of
// every dtype pair gets at least 2 stages within the granted shared
// memory (except the all-fp32 backward past C 980, whose 12 KB rows do
// not fit two stages of four warps in 96 KB: layernorm.cu's kernel runs
// it), the sizes are the kernel's layout (checked against the values
// the host emulator runs with), and the backward's slots hold the warps'
// sums at the end.
func TestLayerNormAsyncPlan(t *testing.T) {
	if got := lnAsyncSmem(lnaForward, 768, 4, 2, 4); got != 2*768*4+4*4*3072 {
		t.Errorf("forward C 768 f32 rows, 4 stages: %d bytes", got)
	}
	if got := lnAsyncSmem(lnaResidual, 4, 4, 2, 2); got != 2*4*4+4*2*32 { // 16 + 8 rounded to 32
		t.Errorf("residual C 4, 2 stages: %d bytes", got)
	}
	if got := lnAsyncSmem(lnaBackward, 768, 4, 2, 3); got != 768*4+4*3*(2*768*4+768*2+16) {
		t.Errorf("backward C 768, 3 stages: %d bytes", got)
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
		for _, r := range []tensor.DType{dt, tensor.F32} {
			for C := 4; C <= lnFastMaxC; C += 4 {
				for kind := lnaForward; kind <= lnaBackward; kind++ {
					d := &Device{fused: true, lnAsync: true}
					launchHook = func(string, tensor.DType, []any) {} // built2 and residentBlocks without a GPU
					stages, smem, nb, ok := d.lnAsyncPlan("k", kind, dt, 5000, C, r.Size())
					launchHook = nil
					if kind == lnaBackward && dt == tensor.F32 && C > 980 {
						if ok {
							t.Errorf("f32 backward C %d: planned %d stages in %d bytes", C, stages, smem)
						}
						continue
					}
					if !ok || stages < 2 || smem > lnAsyncMaxSmem || nb < 1 {
						t.Fatalf("%s/%s C %d kind %d: stages %d, %d bytes, %d blocks, %v", dt, r, C, kind, stages, smem, nb, ok)
					}
					if kind == lnaBackward && smem-C*4 < (lnAsyncBlock/32)*2*C*4 {
						t.Fatalf("%s/%s C %d: backward slots %d bytes hold fewer than the warps' sums", dt, r, C, smem-C*4)
					}
				}
			}
		}
	}
}

// TestLayerNormAsyncGrid: the grid never exceeds the resident blocks,
// covers every row, and gives no warp more rows than the resident grid
// would.
func TestLayerNormAsyncGrid(t *testing.T) {
	if nb := lnAsyncGrid(16384, 528); nb != 512 {
		t.Errorf("GPT-2 rows, 528 resident blocks: %d blocks, want 512", nb)
	}
	warps := lnAsyncBlock / 32
	for _, N := range []int{1, 3, 4, 5, 100, 1000, 16384, 20000, 123457} {
		for _, res := range []int{1, 7, 132, 528, 1056} {
			nb := lnAsyncGrid(N, res)
			per := (N + nb*warps - 1) / (nb * warps)
			best := (N + res*warps - 1) / (res * warps)
			if nb < 1 || nb > res || nb*warps*per < N || per != max(1, best) {
				t.Errorf("N %d, %d resident: %d blocks, %d rows a warp (best %d)", N, res, nb, per, best)
			}
		}
	}
}
