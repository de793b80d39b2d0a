package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/tensor"
)

// fp8ScaleCase is one run of the scale update: its formats, recipe and
// amaxes (steps × K); fp8Under gives each step's underflow counts.
type fp8ScaleCase struct {
	formats []tensor.FP8Format
	recipe  amp.FP8Recipe
	steps   int
	amaxes  []float32
}

// fp8ScaleCases covers windows shorter and longer than the run (the ring
// wraps), a window of 1, current scaling, margins and both formats, with K
// tensors and steps steps each (the emulator runs a host thread per CUDA
// thread: it takes fewer).
func fp8ScaleCases(K, steps int) []fp8ScaleCase {
	var cs []fp8ScaleCase
	for i, r := range []amp.FP8Recipe{
		{History: 1}, {History: 5, Margin: 1}, {History: 200},
		{History: 1024}, {Current: true}, {Current: true, Margin: 64},
	} {
		K := K + 2*(i%2)
		f := make([]tensor.FP8Format, K)
		for k := range f {
			f[k] = fp8Formats[k%len(fp8Formats)]
		}
		cs = append(cs, fp8ScaleCase{f, r, steps, devicetest.FP8Amaxes(uint64(100+i), steps, K)})
	}
	return cs
}

// fp8Under is the underflow count the producers of tensor k leave at step
// s of a case: varied, some past 2^31 (the update saturates them).
func fp8Under(s, k int) uint32 { return uint32(s*2654435761+k*40503) >> uint(k%3) }

// pending packs step s's (amax, underflows) pairs of c for the layout's
// amax[K][2], and sets them on ref.
func (c fp8ScaleCase) pending(s int, ref *amp.FP8Scales) []float32 {
	K := len(c.formats)
	p := make([]float32, 2*K)
	for k := range K {
		a, u := c.amaxes[s*K+k], fp8Under(s, k)
		p[2*k], p[2*k+1] = a, math.Float32frombits(u)
		ref.SetPending(k, a, u)
	}
	return p
}

// checkFP8Scales compares a state after a step with the reference's, bit
// for bit (NaN cannot occur: non-finite amaxes never enter).
func checkFP8Scales(t *testing.T, name string, step int, got []float32, gotMeta []int32, ref *amp.FP8Scales) bool {
	t.Helper()
	for i, w := range ref.St {
		if math.Float32bits(got[i]) != math.Float32bits(w) {
			t.Errorf("%s step %d: st[%d] = %g (%#x), reference %g (%#x) (K %d, H %d)", name, step, i, got[i], math.Float32bits(got[i]), w, math.Float32bits(w), ref.K, ref.H)
			return false
		}
	}
	for i, w := range ref.Meta {
		if gotMeta != nil && gotMeta[i] != w {
			t.Errorf("%s step %d: meta[%d] = %d, reference %d", name, step, i, gotMeta[i], w)
			return false
		}
	}
	return true
}

// TestFP8ScaleDefines: the kernel's meta layout is amp's.
func TestFP8ScaleDefines(t *testing.T) {
	for name, want := range map[string]int{"FP8_META": amp.FP8MetaLen, "FP8_META_FORMAT": amp.FP8MetaFormat,
		"FP8_META_NEXT": amp.FP8MetaNext, "FP8_META_FILLED": amp.FP8MetaFilled, "FP8_META_BAD": amp.FP8MetaBad, "FP8_META_UNDER": amp.FP8MetaUnder} {
		if got, err := kernels.Define("fp8scale.cu", name); err != nil || got != want {
			t.Errorf("fp8scale.cu %s = %d, %v; amp says %d", name, got, err, want)
		}
	}
}

// TestFP8ScaleEmulatorMatchesAmp runs kernels/fp8scale.cu compiled for the
// host (kernels/emu/fp8scale, -DDRUTO_EMU) against amp.UpdateFP8Scales
// after every step of fp8ScaleCases, blocks in order and in reverse; in
// reverse every odd step updates only the odd records, listed last to
// first (fp8_scale_update's record list, amp.UpdateFP8ScalesOf).
// Needs g++ (not cgo).
func TestFP8ScaleEmulatorMatchesAmp(t *testing.T) {
	bin := emulatorOf(t, "fp8scale", tensor.F32, []tensor.DType{tensor.F32})
	runEmu(t, bin, nil, "selftest")
	for ci, c := range fp8ScaleCases(5, 24) {
		for _, reverse := range []int{0, 1} {
			ref, err := amp.NewFP8Scales(c.formats, c.recipe)
			if err != nil {
				t.Fatal(err)
			}
			K, H := ref.K, ref.H
			var in []byte
			for k := range K {
				in = binary.LittleEndian.AppendUint32(in, uint32(ref.Meta[k*amp.FP8MetaLen+amp.FP8MetaFormat]))
			}
			var pend [][]float32
			for s := range c.steps {
				pend = append(pend, c.pending(s, ref))
				for _, v := range pend[s] {
					in = binary.LittleEndian.AppendUint32(in, math.Float32bits(v))
				}
			}
			// c.pending set ref's pending pairs; the reference starts over
			// and takes them step by step below.
			if ref, err = amp.NewFP8Scales(c.formats, c.recipe); err != nil {
				t.Fatal(err)
			}
			out := runEmu(t, bin, in, "io", fmt.Sprint(K), fmt.Sprint(H), fmt.Sprint(c.recipe.Margin), fmt.Sprint(c.steps), fmt.Sprint(reverse), fmt.Sprint(reverse))
			var odd []int32
			for k := K - 1; k >= 0; k-- {
				if k%2 == 1 {
					odd = append(odd, int32(k))
				}
			}
			n := K * (4 + H)
			if want := 4 * (c.steps*n + K*amp.FP8MetaLen); len(out) != want {
				t.Fatalf("case %d: %d bytes out, want %d", ci, len(out), want)
			}
			name := fmt.Sprintf("emulated case %d %+v reverse %d", ci, c.recipe, reverse)
			got := make([]float32, n)
			for s := range c.steps {
				c.pending(s, ref)
				if reverse == 1 && s%2 == 1 {
					amp.UpdateFP8ScalesOf(ref.St, ref.Meta, K, H, ref.Margin, odd)
				} else {
					ref.Update()
				}
				for i := range got {
					got[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*(s*n+i):]))
				}
				if !checkFP8Scales(t, name, s, got, nil, ref) {
					break
				}
			}
			meta := make([]int32, K*amp.FP8MetaLen)
			for i := range meta {
				meta[i] = int32(binary.LittleEndian.Uint32(out[4*(c.steps*n+i):]))
			}
			checkFP8Scales(t, name, c.steps, got, meta, ref)
		}
	}
}

// TestLaunchFP8ScaleUpdate checks the launch against the PTX signature and
// the block size on any machine.
func TestLaunchFP8ScaleUpdate(t *testing.T) {
	sigs := signatures(t)
	st, meta, recs := dev(tensor.F32, 150*(4+16)), dev(tensor.I32, 150*amp.FP8MetaLen), dev(tensor.I32, 7)
	var blocks []cuda.Dim3
	blockHook = func(_ string, b cuda.Dim3) { blocks = append(blocks, b) }
	got, err := hooked(t, true, func(d *Device) {
		if err := d.fp8ScaleUpdateP(st, meta, nil, 150, 16, 3); err != nil {
			t.Error(err)
		}
		if err := d.fp8ScaleUpdateP(st, meta, recs, 150, 16, 3); err != nil {
			t.Error(err)
		}
	})
	blockHook = nil
	if err != nil {
		t.Fatal(err)
	}
	names := checkSigs(t, "fp8_scale_update", sigs, got)
	if len(names) != 2 || names[0] != "fp8_scale_update" || names[1] != "fp8_scale_update" || got[0].dt != tensor.F32 {
		t.Fatalf("launches %v, want fp8_scale_update/f32 twice", names)
	}
	for i, r := range []cuda.DevicePtr{0, cuda.DevicePtr(recs.Dev)} {
		if a := got[i].args; a[0] != cuda.DevicePtr(st.Dev) || a[1] != cuda.DevicePtr(meta.Dev) || a[2] != r || a[3] != 150 || a[4] != 16 || a[5] != 3 {
			t.Errorf("launch %d: args %v, want st, meta, recs %v, K 150, H 16, margin 3", i, a, r)
		}
	}
	if len(blocks) != 2 || blocks[0] != cuda.D1(fp8sBlock) {
		t.Errorf("blocks %v, want two launches of %d threads", blocks, fp8sBlock)
	}
}

// TestGPUFP8ScaleUpdate: the kernel on the GPU against amp.UpdateFP8Scales
// after every step of fp8ScaleCases (every odd step with a record list:
// the odd records, last to first, against amp.UpdateFP8ScalesOf), and its
// argument errors.
func TestGPUFP8ScaleUpdate(t *testing.T) {
	g := gpuDev(t, true)
	for ci, c := range fp8ScaleCases(150, 120) {
		ref, err := amp.NewFP8Scales(c.formats, c.recipe)
		if err != nil {
			t.Fatal(err)
		}
		K, H := ref.K, ref.H
		hst, _ := tensor.FromF32(ref.St, len(ref.St))
		hmeta, _ := tensor.FromI32(ref.Meta, len(ref.Meta))
		st, meta := toGPU(t, g, hst), toGPU(t, g, hmeta)
		name := fmt.Sprintf("case %d %+v", ci, c.recipe)
		for s := range c.steps {
			am, _ := tensor.FromF32(c.pending(s, ref), 2*K)
			g.Upload(st.MustView(0, 2*K), am)
			var recs *tensor.Tensor // odd steps: the odd records, last to first
			var odd []int32
			if s%2 == 1 {
				for k := K - 1; k >= 0; k-- {
					if k%2 == 1 {
						odd = append(odd, int32(k))
					}
				}
				h, _ := tensor.FromI32(odd, len(odd))
				recs = toGPU(t, g, h)
			}
			if err := g.fp8ScaleUpdateP(st, meta, recs, K, H, c.recipe.Margin); err != nil {
				t.Fatalf("%s step %d: %v", name, s, err)
			}
			if recs != nil {
				amp.UpdateFP8ScalesOf(ref.St, ref.Meta, K, H, ref.Margin, odd)
			} else {
				ref.Update()
			}
			if !checkFP8Scales(t, name, s, toHost(t, g, st).F32(), toHost(t, g, meta).I32(), ref) {
				break
			}
		}
	}
	F, I := tensor.F32, tensor.I32
	for _, c := range []struct {
		name         string
		st, meta     *tensor.Tensor
		K, H, margin int
	}{
		{"st too short", toGPU(t, g, tensor.New(F, 7)), toGPU(t, g, tensor.New(I, 2*amp.FP8MetaLen)), 2, 0, 0},
		{"meta f32", toGPU(t, g, tensor.New(F, 8)), toGPU(t, g, tensor.New(F, 2*amp.FP8MetaLen)), 2, 0, 0},
		{"host st", tensor.New(F, 8), toGPU(t, g, tensor.New(I, 2*amp.FP8MetaLen)), 2, 0, 0},
		{"margin 65", toGPU(t, g, tensor.New(F, 8)), toGPU(t, g, tensor.New(I, 2*amp.FP8MetaLen)), 2, 0, 65},
	} {
		if err := g.fp8ScaleUpdateP(c.st, c.meta, nil, c.K, c.H, c.margin); !errors.Is(err, ErrFP8Args) {
			t.Errorf("%s: %v, want ErrFP8Args", c.name, err)
		}
		_ = g.Sync()
	}
}
