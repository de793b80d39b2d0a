package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// encoderShape is a test shape of the embedding and how its tokens are
// drawn: "uniform" in [0,V), "hot" (every other token V-1), "one" (every
// token V-1) or "zipf" (Zipf s=1 over the ids below min(V,256), as bytes of
// text are: a byte-level corpus in a BPE vocabulary).
type encoderShape struct {
	B, T, C, V int
	dist       string
}

// encoderShapes: single elements; few ids (V 3, V 1: long runs over many
// segments); the small preset's step (V 256); C 1100 (two channel trips of
// a segment block) with hot tokens; GPT-2's vocabulary (two sort passes) with
// uniform, byte-Zipf (8 sort tiles: the look-back) and single-id tokens, at
// small C so the test stays cheap (the kernels' indexing does not depend on
// C beyond the channel trips); B·T 67015 (17 tiles, no multiple of a tile
// or a segment) at V 2^20 (three passes).
var encoderShapes = []encoderShape{{1, 1, 1, 1, "uniform"}, {3, 17, 96, 3, "uniform"}, {2, 17, 1000, 50, "uniform"},
	{2, 700, 32, 1, "one"}, {3, 600, 20, 5, "hot"}, {4, 1000, 40, 1000, "hot"}, {32, 256, 256, 256, "zipf"},
	{2, 300, 1100, 70, "hot"}, {2, 1024, 96, 50304, "uniform"}, {32, 1024, 8, 50304, "zipf"}, {4, 1024, 24, 50304, "one"},
	{65, 1031, 4, 1 << 20, "uniform"}}

// encoderTokens returns n tokens in [0,V) drawn as dist says.
func encoderTokens(rng *tensor.RNG, n, V int, dist string) *tensor.Tensor {
	tok := tensor.New(tensor.I32, n)
	ids := min(V, 256)
	var zipf []float64 // cumulative weights 1/(r+1)
	for r := range ids {
		w := 1 / float64(r+1)
		if r > 0 {
			w += zipf[r-1]
		}
		zipf = append(zipf, w)
	}
	for i := range tok.I32() {
		v := rng.Intn(V)
		switch dist {
		case "hot":
			if i%2 == 0 {
				v = V - 1
			}
		case "one":
			v = V - 1
		case "zipf":
			u, r := rng.Float64()*zipf[ids-1], 0
			for r < ids-1 && zipf[r] < u {
				r++
			}
			v = (r*37 + 11) % ids // the ranks scattered over the ids
		}
		tok.I32()[i] = int32(v)
	}
	return tok
}

// encoderSplitIDs returns, for the plan's segments, which ids have their
// sorted positions in more than one segment (their sums are combined from
// partial rows: not the CPU's order), the largest count of such an id and
// that of any id.
func encoderSplitIDs(pl encPlan, tok *tensor.Tensor, V int) (split []bool, maxSplit, maxAny int) {
	count := make([]int, V)
	for _, v := range tok.I32() {
		count[v]++
	}
	split = make([]bool, V)
	start := 0
	for v, n := range count {
		if n > 0 && start/pl.L != (start+n-1)/pl.L {
			split[v], maxSplit = true, max(maxSplit, n)
		}
		maxAny = max(maxAny, n)
		start += n
	}
	return split, maxSplit, maxAny
}

// TestGPUEncoder checks Encoder and EncoderBackward (accumulating into
// random gradients) against the CPU reference: the forward is one fp32
// addition per element (bit-identical); the fused backward must give the
// CPU's bits for dwpe and for every id whose sorted positions lie in one
// segment, and the others within k·eps for an id seen k times (partial
// sums). The scratch is NaN-poisoned before each of two runs, which must
// give the same bits.
func TestGPUEncoder(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range shortTo(encoderShapes, 8) {
				B, T, C, V := sh.B, sh.T, sh.C, sh.V
				maxT := T + 3
				name := fmt.Sprintf("B%d_T%d_C%d_V%d_%s", B, T, C, V, sh.dist)
				tok := encoderTokens(rng, B*T, V, sh.dist)
				gtok := toGPU(t, g, tok)
				if V*C <= 1<<20 { // the forward: cheap, and independent of the token distribution
					wte, wpe := randHost(rng, dt, 0, 1, V, C), randHost(rng, dt, 0, 1, maxT, C)
					want := tensor.New(tensor.F32, B, T, C)
					ref.Encoder(want, wte, wpe, tok, B, T, C)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					out := poisoned(t, g, tensor.F32, B, T, C)
					gwte, gwpe := toGPU(t, g, wte), toGPU(t, g, wpe)
					g.Encoder(out, gwte, gwpe, gtok, B, T, C)
					got := toHost(t, g, out)
					check(t, "encoder", dt, fused, name, "out", got, want, tensor.F32, 1)
					if string(got.Raw()) != string(want.Raw()) {
						t.Logf("encoder %s %s %s: out not bit-identical to the CPU", dt, formName(fused), name)
					}
					freeAll(g, out, gwte, gwpe)
				}

				// Backward: fp32 gradients, dout in the working dtype.
				pl := g.encoderPlan(B*T, V)
				// Tolerance: the fused form sums split ids, the decomposed
				// form every id, from zero before adding dwte (k·eps apart
				// for an id seen k times).
				split, maxSplit, maxAny := encoderSplitIDs(pl, tok, V)
				teScale := max(1, float64(maxSplit)/8)
				if !fused {
					teScale = max(1, float64(maxAny)/8)
				}
				dout := randHost(rng, dt, 0, 1, B, T, C)
				dwte0, dwpe0 := randHost(rng, tensor.F32, 0, 1, V, C), randHost(rng, tensor.F32, 0, 1, maxT, C)
				wantTe, wantPe := clone(dwte0), clone(dwpe0)
				ref.EncoderBackward(wantTe, wantPe, dout, tok, B, T, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gdout := toGPU(t, g, dout)
				var first [2]string
				for run := range 2 {
					dwte, dwpe := toGPU(t, g, dwte0), toGPU(t, g, dwpe0)
					nSorted, nCounts, nPart := pl.scratchBytes(B*T, C)
					for _, s := range []struct {
						name  string
						bytes int
					}{{"encoder.sorted", nSorted}, {"encoder.counts", nCounts}, {"encoder.part", nPart}} {
						if err := g.Stream().Memset8(g.scratch(s.name, s.bytes), byte(0xff-run), uint64(s.bytes)); err != nil {
							t.Fatal(err)
						}
					}
					g.EncoderBackward(dwte, dwpe, gdout, gtok, B, T, C)
					gotTe, gotPe := toHost(t, g, dwte), toHost(t, g, dwpe)
					freeAll(g, dwte, dwpe)
					if run == 1 {
						if first != [2]string{string(gotTe.Raw()), string(gotPe.Raw())} {
							t.Errorf("encoder_backward %s %s %s: two runs gave different bits", dt, formName(fused), name)
						}
						break
					}
					first = [2]string{string(gotTe.Raw()), string(gotPe.Raw())}
					check(t, "encoder_backward", dt, fused, name, "dwte", gotTe, wantTe, tensor.F32, teScale)
					check(t, "encoder_backward", dt, fused, name, "dwpe", gotPe, wantPe, tensor.F32, 1)
					if !fused {
						continue
					}
					if string(gotPe.Raw()) != string(wantPe.Raw()) {
						t.Errorf("encoder_backward %s fused %s: dwpe not the CPU's bits", dt, name)
					}
					g32, w32, wrong := gotTe.Raw(), wantTe.Raw(), 0
					for v := range V {
						if !split[v] && string(g32[4*v*C:4*(v+1)*C]) != string(w32[4*v*C:4*(v+1)*C]) {
							if wrong++; wrong <= 3 {
								t.Errorf("encoder_backward %s fused %s: dwte row %d (an id in one segment) not the CPU's bits", dt, name, v)
							}
						}
					}
				}
				freeAll(g, gdout, gtok)
			}
		}
	}
}

// freeAll frees device tensors.
func freeAll(g *Device, ts ...*tensor.Tensor) {
	for _, t := range ts {
		g.Free(t)
	}
}

// TestEncoderPlan (no GPU): the backward's plan on an H200 (132 SMs, the
// guess without a context): passes by vocabulary size, one key a thread
// for GPT-2's batch, about two segments an SM, the segments covering B·T;
// a vocabulary past the kernels' index range is an error naming the op.
func TestEncoderPlan(t *testing.T) {
	d := &Device{}
	for _, c := range []struct{ BT, V, passes, tiles, L int }{
		{16384, 50304, 2, 64, 64}, {8192, 256, 1, 32, 32}, {8192, 257, 2, 32, 32}, {1, 1, 1, 1, 32},
		{67015, 1 << 20, 3, 131, 256}, {1 << 20, 1<<24 + 1, 4, 256, 4000},
	} {
		pl := d.encoderPlan(c.BT, c.V)
		if pl.passes != c.passes || pl.tiles != c.tiles || pl.L != c.L {
			t.Errorf("encoderPlan(%d, %d) = %+v, want %d passes, %d tiles, segments of %d", c.BT, c.V, pl, c.passes, c.tiles, c.L)
		}
		if pl.L%encSegAlign != 0 || pl.segs*pl.L < c.BT || (pl.segs-1)*pl.L >= c.BT || pl.tiles*encThreads*pl.items < c.BT ||
			pl.items < 1 || pl.items > encItems || c.V-1 > int(pl.kmask()) {
			t.Errorf("encoderPlan(%d, %d) = %+v: does not cover the positions or the ids", c.BT, c.V, pl)
		}
	}
	const B, T, C, V = 2, 17, 1, 1<<30 + 1
	_, err := hooked(t, true, func(d *Device) {
		d.EncoderBackward(dev(tensor.F32, V, C), dev(tensor.F32, T, C), dev(tensor.F32, B, T, C), dev(tensor.I32, B, T), B, T, C)
	})
	if !errors.Is(err, tensor.ErrShape) || !strings.Contains(err.Error(), "encoder backward") {
		t.Errorf("EncoderBackward with V 2^30+1: %v, want an ErrShape naming the op", err)
	}
}
