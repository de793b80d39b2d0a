package cpu

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

func randF32(rng *tensor.RNG, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Norm())
	}
	return v
}

func hostOf(t *testing.T, dt tensor.DType, v []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	x := tensor.New(dt, shape...)
	if err := x.SetF32(v); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestGemv: Matmul of a few rows (the gemv path) against a float64
// reference, fp32 and bf16 weights, with the AVX2 kernels and without,
// widths that are and are not multiples of 8 and of 4 output rows, one row
// and batches of 2 to 5 (gemvPairs4 takes up to four rows at once).
func TestGemv(t *testing.T) {
	rng := tensor.NewRNG(1)
	for _, avx := range []bool{false, useAVX2} {
		saved := useAVX2
		useAVX2 = avx
		for _, sz := range [][3]int{{1, 768, 37}, {3, 64, 8}, {8, 13, 5}, {2, 1, 1}, {5, 200, 130}, {4, 512, 262}} {
			N, C, OC := sz[0], sz[1], sz[2]
			for _, wdt := range []tensor.DType{tensor.F32, tensor.BF16} {
				x, w, bias := randF32(rng, N*C), randF32(rng, OC*C), randF32(rng, OC)
				d := New(device.Options{Fused: true, Threads: 2})
				out := tensor.New(tensor.F32, N, OC)
				wt := hostOf(t, wdt, w, OC, C)
				w = wt.ToF32()
				d.Matmul(out, nil, hostOf(t, tensor.F32, x, N, C), wt, hostOf(t, tensor.F32, bias, OC), N, C, OC, device.None)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				want := make([]float64, N*OC)
				for r := range N {
					for o := range OC {
						s := float64(bias[o])
						for c := range C {
							s += float64(x[r*C+c]) * float64(w[o*C+c])
						}
						want[r*OC+o] = s
					}
				}
				got := out.F32()
				for i := range want {
					tol := 1e-5 * math.Sqrt(float64(C)) * (1 + math.Abs(want[i]))
					if math.Abs(float64(got[i])-want[i]) > tol {
						t.Fatalf("avx %v %v N%d C%d OC%d: out[%d] %v, want %v", avx, wdt, N, C, OC, i, got[i], want[i])
					}
				}
			}
		}
		useAVX2 = saved
	}
}

// TestGemvBatchBitsAlone: a batch of rows through the gemv path gives each
// row the bits it gets alone (the four-row kernel adds in the one-row
// kernel's order), fp32 and bf16 weights, batches of 2 to 6 rows.
func TestGemvBatchBitsAlone(t *testing.T) {
	rng := tensor.NewRNG(5)
	const C, OC = 768, 130
	for _, wdt := range []tensor.DType{tensor.F32, tensor.BF16} {
		wt := hostOf(t, wdt, randF32(rng, OC*C), OC, C)
		d := New(device.Options{Fused: true, Threads: 2})
		for N := 2; N <= 6; N++ {
			x := randF32(rng, N*C)
			out := tensor.New(tensor.F32, N, OC)
			d.Matmul(out, nil, hostOf(t, tensor.F32, x, N, C), wt, nil, N, C, OC, device.None)
			for r := range N {
				one := tensor.New(tensor.F32, 1, OC)
				d.Matmul(one, nil, hostOf(t, tensor.F32, x[r*C:(r+1)*C], 1, C), wt, nil, 1, C, OC, device.None)
				for o, v := range one.F32() {
					if got := out.F32()[r*OC+o]; math.Float32bits(got) != math.Float32bits(v) {
						t.Fatalf("%v N%d: row %d out[%d] %v batched, %v alone", wdt, N, r, o, got, v)
					}
				}
			}
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecodeOps: EncoderAt and KVAppend place exactly the right values, and
// AttentionDecode appends its row's key and value (over a cache row made
// NaN) and equals a float64 softmax over the cached positions, with the
// AVX2 kernels and without, head sizes with and without a tail.
func TestDecodeOps(t *testing.T) {
	rng := tensor.NewRNG(2)
	for _, avx := range []bool{false, useAVX2} {
		saved := useAVX2
		useAVX2 = avx
		for _, sz := range [][4]int{{2, 64, 4, 9}, {3, 30, 3, 5}, {1, 8, 1, 1}} {
			B, C, NH, S := sz[0], sz[1], sz[2], sz[3]
			hs := C / NH
			d := New(device.Options{Fused: true, Threads: 2})
			kc, vc := tensor.New(tensor.F32, B, NH, S, hs), tensor.New(tensor.F32, B, NH, S, hs)
			// Fill every position through KVAppend, one step at a time.
			qkvs := make([][]float32, S)
			for p := range S {
				qkvs[p] = randF32(rng, B*3*C)
				pos := make([]int32, B)
				for b := range pos {
					pos[b] = int32(p)
				}
				pt, _ := tensor.FromI32(pos, B)
				d.KVAppend(kc, vc, hostOf(t, tensor.F32, qkvs[p], B, 1, 3*C), pt, B, 1, C, NH, S)
			}
			lens := make([]int32, B)
			for b := range lens {
				lens[b] = int32(rng.Intn(S))
			}
			// Row b of the step is qkvs[lens[b]]'s: its append must put
			// back what KVAppend wrote there, here made NaN first.
			q := make([]float32, B*3*C)
			for b := range B {
				copy(q[b*3*C:(b+1)*3*C], qkvs[lens[b]][b*3*C:])
				for h := range NH {
					at := ((b*NH+h)*S + int(lens[b])) * hs
					for c := range hs {
						kc.F32()[at+c], vc.F32()[at+c] = float32(math.NaN()), float32(math.NaN())
					}
				}
			}
			out := tensor.New(tensor.F32, B, C)
			lt, _ := tensor.FromI32(lens, B)
			d.AttentionDecode(out, hostOf(t, tensor.F32, q, B, 3*C), kc, vc, lt, B, C, NH, S)
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			for b := range B {
				for h := range NH {
					n := int(lens[b]) + 1
					sc := make([]float64, n)
					mx := math.Inf(-1)
					for j := range n {
						k := qkvs[j][b*3*C+C+h*hs:]
						if got := kc.F32()[((b*NH+h)*S+j)*hs]; got != k[0] {
							t.Fatalf("KVAppend: k[%d,%d,%d] %v, want %v", b, h, j, got, k[0])
						}
						for c := range hs {
							sc[j] += float64(q[b*3*C+h*hs+c]) * float64(k[c])
						}
						sc[j] /= math.Sqrt(float64(hs))
						mx = math.Max(mx, sc[j])
					}
					var sum float64
					for j := range sc {
						sc[j] = math.Exp(sc[j] - mx)
						sum += sc[j]
					}
					for c := range hs {
						var want float64
						for j := range n {
							want += sc[j] / sum * float64(qkvs[j][b*3*C+2*C+h*hs+c])
						}
						got := out.F32()[b*C+h*hs+c]
						if math.Abs(float64(got)-want) > 2e-5*(1+math.Abs(want)) {
							t.Fatalf("avx %v B%d C%d NH%d S%d: out[%d,%d,%d] %v, want %v", avx, B, C, NH, S, b, h, c, got, want)
						}
					}
				}
			}
			// EncoderAt: wte[tok] + wpe[pos], exactly.
			wte, wpe := randF32(rng, 11*C), randF32(rng, S*C)
			toks, _ := tensor.FromI32([]int32{3, 10}, 2)
			pos, _ := tensor.FromI32([]int32{int32(S - 1), 0}, 2)
			eo := tensor.New(tensor.F32, 2, C)
			d.EncoderAt(eo, hostOf(t, tensor.F32, wte, 11, C), hostOf(t, tensor.F32, wpe, S, C), toks, pos, 2, C)
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			for c := range C {
				if eo.F32()[c] != wte[3*C+c]+wpe[(S-1)*C+c] || eo.F32()[C+c] != wte[10*C+c]+wpe[c] {
					t.Fatalf("EncoderAt channel %d", c)
				}
			}
		}
		useAVX2 = saved
	}
	// Positions outside the cache are errors, not writes past it.
	d := New(device.Options{Fused: true})
	kc := tensor.New(tensor.F32, 1, 1, 4, 8)
	pos, _ := tensor.FromI32([]int32{3}, 1)
	d.KVAppend(kc, kc, tensor.New(tensor.F32, 1, 2, 24), pos, 1, 2, 8, 1, 4)
	if err := d.Sync(); err == nil {
		t.Error("KVAppend past the cache's end accepted")
	}
}

// TestSampleHead: the fused head chooses by SampleRow over x·wteᵀ and
// advances each row's state; a row in a state outside the table is an error.
func TestSampleHead(t *testing.T) {
	rng := tensor.NewRNG(4)
	B, C, V := 3, 16, 40
	d := New(device.Options{Fused: true, Threads: 2})
	x, wte := randF32(rng, B*C), randF32(rng, V*C)
	table := make([]int32, 2*V)
	for i := range V {
		table[i] = device.TableEntry(i%2, 0)
		table[V+i] = device.TableNo
		if i%3 == 0 {
			table[V+i] = device.TableEntry(0, 1)
		}
	}
	rows := make([]int32, B*device.RowLen)
	for b := range B {
		rows[b*device.RowLen+device.RowState] = int32(b % 2)
		rows[b*device.RowLen+device.RowLeft] = 5
		rows[b*device.RowLen+device.RowSeedLo] = int32(b + 1)
	}
	ids, logits := tensor.New(tensor.I32, B), tensor.New(tensor.F32, B, V)
	tt, _ := tensor.FromI32(table, 2, V)
	rt, _ := tensor.FromI32(append([]int32(nil), rows...), B, device.RowLen)
	o := device.Sampling{Temperature: 1, TopK: 7}
	d.SampleHead(ids, logits, hostOf(t, tensor.F32, x, B, C), hostOf(t, tensor.F32, wte, V, C), tt, rt, B, C, V, 2, o)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	var sc device.SampleScratch
	for b := range B {
		l := make([]float32, V)
		for v := range V {
			var s float64
			for c := range C {
				s += float64(x[b*C+c]) * float64(wte[v*C+c])
			}
			l[v] = float32(s)
		}
		st := rows[b*device.RowLen+device.RowState]
		want, e := device.SampleRow(l, table[int(st)*V:(int(st)+1)*V], 5, o, device.Uniform(uint64(b+1), 0), &sc)
		if int(ids.I32()[b]) != want {
			t.Errorf("row %d: id %d, want %d", b, ids.I32()[b], want)
		}
		r := rt.I32()[b*device.RowLen:]
		if r[device.RowState] != e&device.TableNext || r[device.RowLeft] != 4 || r[device.RowStep] != 1 {
			t.Errorf("row %d state after the draw: %v", b, r[:device.RowLen])
		}
	}
	rt.I32()[device.RowState] = 2
	d.SampleHead(ids, logits, hostOf(t, tensor.F32, x, B, C), hostOf(t, tensor.F32, wte, V, C), tt, rt, B, C, V, 2, o)
	if err := d.Sync(); err == nil {
		t.Error("a row in state 2 of a 2-state table was sampled")
	}
}
