package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/druto/druto/nbui"
	"github.com/druto/druto/pkg/train"
)

// progress shows training progress: a bar updating in place on a terminal,
// plain lines (every 10th step and the last) otherwise, so logs stay readable.
type progress struct {
	bar       *progressbar.ProgressBar
	first     int
	last      int
	lastPrint time.Time
	fp8Warned bool // fp8Warning was printed once
}

func newProgress(done, last int) *progress {
	p := &progress{first: done, last: last}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		p.bar = progressbar.NewOptions(last,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("steps"),
		)
		p.bar.Set(done)
	}
	return p
}

func (p *progress) update(m train.Metric) {
	line := fmt.Sprintf("step %d/%d loss %.4f lr %.2e norm %.3f %.0f tok/s %.1f ms", m.Step, p.last, m.Loss, m.LR, m.GradNorm, m.TokensPerS, m.MsPerStep)
	if m.LossScale != 1 {
		line += fmt.Sprintf(" scale %g skipped %d", m.LossScale, m.Skipped)
	}
	if m.ValLoss != 0 {
		line += fmt.Sprintf(" val %.4f", m.ValLoss) + fp8Line(m)
	}
	if w := fp8Warning(m); w != "" && !p.fp8Warned {
		p.fp8Warned = true
		p.note(w)
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("loss %.3f %.0f tok/s", m.Loss, m.TokensPerS))
		p.bar.Set(m.Step)
		if m.ValLoss != 0 {
			p.note(line)
		}
		return
	}
	if m.Step == p.first+1 || m.Step%10 == 0 || m.Step == p.last || m.ValLoss != 0 {
		fmt.Fprintln(os.Stderr, line)
	}
}

// note prints a line above the bar (or plainly).
func (p *progress) note(s string) {
	if p.bar != nil {
		p.bar.Clear()
	}
	fmt.Fprintln(os.Stderr, s)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
}

// fp8UnderflowWarn is the share of the values cast to FP8 in a step that,
// flushed to zero, makes train warn once: delayed scaling with no margin
// flushes a few in 100,000 in GPT-2 training (the nonzero values under a
// tensor's smallest code), so a share this large means a tensor's range
// outgrew its format.
const fp8UnderflowWarn = 0.01

// fp8Line is an evaluation line's FP8 part: the scales' overflows and the
// last step's underflows (the logits' gradient's apart, with the head's
// dx in FP8: most of it flushes by design and fp8Warning leaves it out),
// or "" when the step logged neither.
func fp8Line(m train.Metric) string {
	if m.FP8Overflows == 0 && m.FP8Underflows == 0 && m.FP8LogitGradUnderflows == 0 {
		return ""
	}
	s := fmt.Sprintf(" fp8 overflows %d underflows %d (%.4f%%)", m.FP8Overflows, m.FP8Underflows, 100*m.FP8UnderflowShare)
	if m.FP8LogitGradUnderflows > 0 {
		s += fmt.Sprintf(", logits' gradient %d (%.2f%%)", m.FP8LogitGradUnderflows, 100*m.FP8LogitGradUnderflowShare)
	}
	return s
}

// fp8WarningFormat is fp8Warning's sentence (nbui's catalogue has it in
// Bangla, for DRUTO_LANG=bn).
const fp8WarningFormat = "druto train: at step %d, %.2f%% of the values cast to FP8 were too small for their scale and became 0.\n" +
	"  If the loss drifts from a bf16 run's, train with a smaller --fp8-margin, or with --amp bf16."

// fp8Warning says what to do when the step's underflow share exceeds
// fp8UnderflowWarn, else "", in the CLI's language (cliLang).
func fp8Warning(m train.Metric) string {
	if m.FP8UnderflowShare <= fp8UnderflowWarn {
		return ""
	}
	return nbui.Sprintf(cliLang(), fp8WarningFormat, m.Step, 100*m.FP8UnderflowShare)
}
