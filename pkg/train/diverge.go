package train

import (
	"errors"
	"fmt"
	"math"
)

// ErrDiverged is returned (wrapped) by Run when training cannot go on: a
// loss or gradients that are not finite under a policy without loss scaling
// (fp32, bf16), or, under fp16, too many steps in a row skipped for
// non-finite gradients. Run writes no
// checkpoint then; the last one written stays as it was.
var ErrDiverged = errors.New("train: the run diverged")

// maxSkipsInRow is how many consecutive skipped steps Run accepts. The fp16
// GradScaler halves its scale on each, so 50 take it from 2^16 to 2^-34,
// far below any scale that recovers.
const maxSkipsInRow = 50

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkStep decides whether the run can go on after step m; row counts
// consecutive skipped steps.
func (t *Trainer) checkStep(m *Metric, row *int) error {
	if m.StepSkipped {
		*row++
	} else {
		*row = 0
	}
	scaled := t.Scaler != nil && t.Scaler.Enabled
	switch {
	case !finite(float64(m.Loss)) && !scaled:
		return fmt.Errorf("%w at step %d: the loss is %v under %s; %s; lower the learning rate or lengthen the warm-up",
			ErrDiverged, m.Step, m.Loss, t.opts.Policy, t.keptNote())
	case m.StepSkipped && !scaled:
		// Without loss scaling there is no scale to lower: gradients
		// beyond the float range mean the weights have blown up.
		return fmt.Errorf("%w at step %d: the gradients are not finite under %s (loss %v); %s; lower the learning rate or lengthen the warm-up",
			ErrDiverged, m.Step, t.opts.Policy, m.Loss, t.keptNote())
	case *row >= maxSkipsInRow:
		return fmt.Errorf("%w at step %d: %d steps in a row had non-finite gradients (loss %v, loss scale %g); %s; lower the learning rate or lengthen the warm-up",
			ErrDiverged, m.Step, *row, m.Loss, m.LossScale, t.keptNote())
	}
	return nil
}

// keptNote says which checkpoint survives a stopped run.
func (t *Trainer) keptNote() string {
	switch {
	case t.opts.OutDir == "":
		return "no checkpoint is kept (no output folder)"
	case t.saved < 0:
		return "there is no earlier checkpoint"
	}
	return fmt.Sprintf("the checkpoint of step %d in %s is kept", t.saved, t.opts.OutDir)
}
