package amp

// GradScaler scales the loss so fp16 gradients do not underflow, with
// torch.amp's semantics and defaults: the scale starts at 2^16, doubles after
// GrowthInterval consecutive steps whose gradients were all finite, and halves
// on a step with any Inf/NaN gradient, which is then skipped. A disabled
// scaler always reports scale 1 and never skips.
type GradScaler struct {
	Enabled        bool
	Scale          float32 // current loss scale
	GrowthFactor   float32 // 2
	BackoffFactor  float32 // 0.5
	GrowthInterval int     // 2000
	GoodSteps      int     // consecutive finite steps since the last change
	Skipped        int     // steps skipped so far
}

// NewGradScaler returns a scaler with torch.amp's defaults.
func NewGradScaler(enabled bool) *GradScaler {
	return &GradScaler{Enabled: enabled, Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}
}

// LossScale returns the factor the loss (and so every gradient) is multiplied by.
func (s *GradScaler) LossScale() float32 {
	if s == nil || !s.Enabled {
		return 1
	}
	return s.Scale
}

// Update records whether this step's gradients were all finite and returns
// true when the optimizer step must be skipped.
func (s *GradScaler) Update(finite bool) (skip bool) {
	if s == nil || !s.Enabled {
		return !finite
	}
	if !finite {
		s.Scale *= s.BackoffFactor
		s.GoodSteps = 0
		s.Skipped++
		return true
	}
	s.GoodSteps++
	if s.GoodSteps >= s.GrowthInterval {
		s.Scale *= s.GrowthFactor
		s.GoodSteps = 0
	}
	return false
}
