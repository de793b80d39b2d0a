package gpt

// The PyTorch reference state file: pkg/gpt/testdata/gpt_tiny_state.bin,
// written by scripts/torch_reference.py (format documented there and in
// scripts/README.md). This file holds its reader and checks the file on its
// own terms (sizes, finiteness, loss against logits, the AdamW step against
// the gradients); the model-vs-torch comparison uses readRefState.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

const (
	refMagic      = 20261202
	refVersion    = 1
	refHeaderInts = 256
	refHyperFloat = 8
	refStatePath  = "testdata/gpt_tiny_state.bin"
)

// errRefState marks a state file that does not follow the format.
var errRefState = errors.New("gpt: bad reference state file")

// refState is the content of a reference state file: one forward, backward
// and AdamW step of a tiny GPT-2 computed by PyTorch in float32.
type refState struct {
	V, MaxT, L, NH, C int // model config
	B, T              int // batch and sequence length of tokens/targets
	P                 int // number of parameters (flat layout, tied head once)

	LR, Beta1, Beta2, Eps, WeightDecay float32 // the AdamW step's hyper-parameters

	Tokens      []int32   // (B,T) inputs
	Targets     []int32   // (B,T) next-token targets
	Params      []float32 // (P) parameters before the step, in druto's flat layout
	Logits      []float32 // (B,T,V)
	Loss        float32   // mean cross-entropy over B*T positions
	Grads       []float32 // (P) gradients of Loss
	ParamsAfter []float32 // (P) parameters after one AdamW step
}

// refLayout is the state file's flat parameter layout: druto's, which the
// parity test (torch_test.go) proves against PyTorch's numbers.
func refLayout(s *refState) *tensor.Layout {
	return Config{Vocab: s.V, MaxSeq: s.MaxT, Layers: s.L, Channels: s.C}.Layout()
}

// readRefState reads and validates the state file at path: magic, version,
// positive sizes, P equal to the flat layout's count, and the exact file size.
func readRefState(path string) (*refState, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gpt: reading reference state: %w", err)
	}
	return parseRefState(raw)
}

// parseRefState decodes the bytes of a state file (see readRefState).
func parseRefState(raw []byte) (*refState, error) {
	const headerBytes = 4 * (refHeaderInts + refHyperFloat)
	if len(raw) < headerBytes {
		return nil, fmt.Errorf("%w: %d bytes, shorter than its %d-byte header", errRefState, len(raw), headerBytes)
	}
	hdr := make([]int32, refHeaderInts)
	if err := binary.Read(bytes.NewReader(raw[:4*refHeaderInts]), binary.LittleEndian, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", errRefState, err)
	}
	if hdr[0] != refMagic {
		return nil, fmt.Errorf("%w: magic %d, want %d", errRefState, hdr[0], refMagic)
	}
	if hdr[1] != refVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", errRefState, hdr[1], refVersion)
	}
	for i := 2; i <= 9; i++ {
		if hdr[i] <= 0 {
			return nil, fmt.Errorf("%w: header[%d] = %d, want > 0", errRefState, i, hdr[i])
		}
	}
	s := &refState{
		V: int(hdr[2]), MaxT: int(hdr[3]), L: int(hdr[4]), NH: int(hdr[5]), C: int(hdr[6]),
		B: int(hdr[7]), T: int(hdr[8]), P: int(hdr[9]),
	}
	if s.C%s.NH != 0 || s.T > s.MaxT {
		return nil, fmt.Errorf("%w: C=%d NH=%d T=%d maxT=%d", errRefState, s.C, s.NH, s.T, s.MaxT)
	}
	if n := refLayout(s).Total; n != s.P {
		return nil, fmt.Errorf("%w: P=%d but the layout of V=%d maxT=%d L=%d C=%d has %d", errRefState, s.P, s.V, s.MaxT, s.L, s.C, n)
	}
	bt := s.B * s.T
	want := int64(headerBytes) + 4*int64(2*bt+s.P+bt*s.V+1+s.P+s.P)
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("%w: %d bytes, want %d for this header", errRefState, len(raw), want)
	}

	r := bytes.NewReader(raw[4*refHeaderInts:])
	hyper := make([]float32, refHyperFloat)
	loss := make([]float32, 1)
	s.Tokens = make([]int32, bt)
	s.Targets = make([]int32, bt)
	s.Params = make([]float32, s.P)
	s.Logits = make([]float32, bt*s.V)
	s.Grads = make([]float32, s.P)
	s.ParamsAfter = make([]float32, s.P)
	for _, dst := range []any{hyper, s.Tokens, s.Targets, s.Params, s.Logits, loss, s.Grads, s.ParamsAfter} {
		if err := binary.Read(r, binary.LittleEndian, dst); err != nil {
			return nil, fmt.Errorf("%w: %v", errRefState, err)
		}
	}
	s.LR, s.Beta1, s.Beta2, s.Eps, s.WeightDecay = hyper[0], hyper[1], hyper[2], hyper[3], hyper[4]
	s.Loss = loss[0]
	return s, nil
}

func TestRefStateFile(t *testing.T) {
	s, err := readRefState(refStatePath)
	if err != nil {
		t.Fatal(err)
	}
	// The configuration scripts/torch_reference.py documents.
	gotCfg := [8]int{s.V, s.MaxT, s.L, s.NH, s.C, s.B, s.T, s.P}
	wantCfg := [8]int{256, 16, 2, 4, 32, 2, 16, 34176}
	if gotCfg != wantCfg {
		t.Fatalf("config V,maxT,L,NH,C,B,T,P = %v, want %v", gotCfg, wantCfg)
	}
	if s.LR != 1e-3 || s.Beta1 != 0.9 || s.Beta2 != 0.95 || s.Eps != 1e-8 || s.WeightDecay != 0.1 {
		t.Fatalf("hyper-parameters lr %g betas (%g, %g) eps %g wd %g", s.LR, s.Beta1, s.Beta2, s.Eps, s.WeightDecay)
	}
	bt := s.B * s.T
	if len(s.Tokens) != bt || len(s.Targets) != bt || len(s.Logits) != bt*s.V ||
		len(s.Params) != s.P || len(s.Grads) != s.P || len(s.ParamsAfter) != s.P {
		t.Fatalf("array sizes tokens %d targets %d logits %d params %d grads %d after %d",
			len(s.Tokens), len(s.Targets), len(s.Logits), len(s.Params), len(s.Grads), len(s.ParamsAfter))
	}
	for i := range s.Tokens {
		if s.Tokens[i] < 0 || int(s.Tokens[i]) >= s.V || s.Targets[i] < 0 || int(s.Targets[i]) >= s.V {
			t.Fatalf("position %d: token %d target %d outside [0,%d)", i, s.Tokens[i], s.Targets[i], s.V)
		}
	}
	for name, a := range map[string][]float32{
		"params": s.Params, "logits": s.Logits, "loss": {s.Loss}, "grads": s.Grads, "params_after": s.ParamsAfter,
	} {
		for i, v := range a {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s[%d] = %g is not finite", name, i, v)
			}
		}
	}

	// loss = mean over positions of -log softmax(logits)[target], in float64.
	loss := meanCrossEntropy(s.Logits[:bt*s.V], s.Targets, s.V)
	// F32 tolerance at scale 0.1: |d| <= 1e-7 + 1e-6·|loss|.
	if err := tensor.Close([]float64{float64(s.Loss)}, []float64{loss}, tensor.F32, 0.1); err != nil {
		t.Fatalf("stored loss %.9g vs %.9g recomputed from the logits: %v", s.Loss, loss, err)
	}
	t.Logf("loss %.9g (recomputed %.9g, ln V %.6f)", s.Loss, loss, math.Log(float64(s.V)))

	// Every gradient segment is non-zero (each parameter is used), and one
	// AdamW step from zero moments, recomputed in float64, gives ParamsAfter:
	// p' = p·(1-lr·wd) - lr·ĝ/(|ĝ|+eps), ĝ = m/(1-β1) = g, sqrt(v/(1-β2)) = |g|.
	want := make([]float64, s.P)
	got := make([]float64, s.P)
	for _, seg := range refLayout(s).Segments {
		wd := 0.0
		if seg.Decay {
			wd = float64(s.WeightDecay)
		}
		var gnorm float64
		for i := seg.Offset; i < seg.Offset+seg.Numel(); i++ {
			g, p := float64(s.Grads[i]), float64(s.Params[i])
			gnorm += g * g
			lr, eps := float64(s.LR), float64(s.Eps)
			want[i] = p*(1-lr*wd) - lr*g/(math.Abs(g)+eps)
			got[i] = float64(s.ParamsAfter[i])
		}
		if gnorm == 0 {
			t.Errorf("gradient of %s is all zero", seg.Name)
		}
	}
	if err := tensor.Close(got, want, tensor.F32, 1); err != nil {
		t.Fatalf("params_after vs one AdamW step from params and grads: %v", err)
	}
}

// TestReadRefStateRejects checks that a damaged file is refused with errRefState.
func TestReadRefStateRejects(t *testing.T) {
	raw, err := os.ReadFile(refStatePath)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)-4] },
		"extra":     func(b []byte) []byte { return append(b, 0, 0, 0, 0) },
		"short":     func(b []byte) []byte { return b[:100] },
		"magic":     func(b []byte) []byte { binary.LittleEndian.PutUint32(b[0:], 1); return b },
		"version":   func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 2); return b },
		"P":         func(b []byte) []byte { binary.LittleEndian.PutUint32(b[36:], 34175); return b },
		"zero C":    func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 0); return b },
	}
	dir := t.TempDir()
	for name, f := range damage {
		path := filepath.Join(dir, "state.bin")
		if err := os.WriteFile(path, f(append([]byte(nil), raw...)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readRefState(path); !errors.Is(err, errRefState) {
			t.Errorf("%s: err = %v, want errRefState", name, err)
		}
	}
	if _, err := readRefState(filepath.Join(dir, "missing.bin")); err == nil || errors.Is(err, errRefState) {
		t.Errorf("missing file: err = %v, want a read error", err)
	}
}

// meanCrossEntropy is the mean over rows of -log softmax(row)[target], in
// float64, of the rows of V logits.
func meanCrossEntropy(logits []float32, targets []int32, V int) float64 {
	var sum float64
	n := len(logits) / V
	for i := range n {
		row := logits[i*V : (i+1)*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		sum += mx + math.Log(z) - float64(row[targets[i]])
	}
	return sum / float64(n)
}
