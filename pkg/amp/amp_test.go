package amp

import (
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

func TestScalerSemantics(t *testing.T) {
	s := NewGradScaler(true)
	if s.LossScale() != 65536 || s.GrowthInterval != 2000 {
		t.Fatalf("defaults: scale %g interval %d", s.LossScale(), s.GrowthInterval)
	}
	s.GrowthInterval = 3
	for i := 0; i < 2; i++ {
		if s.Update(true) {
			t.Fatal("a finite step was skipped")
		}
	}
	if s.Scale != 65536 {
		t.Fatalf("grew early: %g", s.Scale)
	}
	s.Update(true)
	if s.Scale != 131072 || s.GoodSteps != 0 {
		t.Fatalf("after 3 clean steps: scale %g good %d, want 131072 0", s.Scale, s.GoodSteps)
	}
	s.Update(true)
	if !s.Update(false) {
		t.Fatal("an inf step was not skipped")
	}
	if s.Scale != 65536 || s.GoodSteps != 0 || s.Skipped != 1 {
		t.Fatalf("after inf: scale %g good %d skipped %d", s.Scale, s.GoodSteps, s.Skipped)
	}
	off := NewGradScaler(false)
	if off.LossScale() != 1 || off.Update(true) || !off.Update(false) {
		t.Fatal("a disabled scaler must scale by 1 and skip only non-finite steps")
	}
}

func TestPolicyTable(t *testing.T) {
	for _, p := range []Policy{FP32, BF16, FP16, FP8} {
		q, err := ParsePolicy(p.String())
		if err != nil || q != p {
			t.Fatalf("round trip %v: %v %v", p, q, err)
		}
		for _, k := range []Kind{Master, ParamGrad, OptState, Residual, Stats} {
			if p.DType(k) != tensor.F32 {
				t.Errorf("%v keeps kind %d in %v, want f32", p, k, p.DType(k))
			}
		}
		if len(p.Ops()) < 8 {
			t.Errorf("%v: op table too short", p)
		}
	}
	if BF16.DType(Activation) != tensor.BF16 || FP16.DType(Working) != tensor.F16 || FP32.DType(Activation) != tensor.F32 {
		t.Error("16-bit kinds in the wrong dtype")
	}
	if !FP16.NeedsScaler() || BF16.NeedsScaler() {
		t.Error("only fp16 needs the scaler")
	}
	if _, err := ParsePolicy("fp4"); err == nil {
		t.Error("unknown policy accepted")
	}
}
