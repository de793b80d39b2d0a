package main

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/druto/druto/pkg/train"
)

// progress shows training progress: a bar updating in place on a terminal,
// plain lines (every 10th step and the last) otherwise, so logs stay readable.
type progress struct {
	bar       *progressbar.ProgressBar
	first     int
	last      int
	lastPrint time.Time
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
		line += fmt.Sprintf(" val %.4f", m.ValLoss)
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
