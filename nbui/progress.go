package nbui

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/druto/druto/pkg/train"
)

// UpdateEvery is the shortest time between two renders of a Progress in a
// notebook; evaluation, sample and final steps always render.
const UpdateEvery = 200 * time.Millisecond

// Progress is a live display of a training run: a bar, the step, the loss,
// the latest validation loss, the learning rate, throughput, the time a step
// takes, the time spent and an estimate of the time left, and the latest
// sample. In a notebook it is one output block updated in place; elsewhere
// it prints a line at the first step, every tenth of the run, on evaluation
// steps and at the end. Pass its Update method to train.Trainer.Run.
type Progress struct {
	lang  string
	total int
	id    string
	start time.Time
	shown time.Time // last notebook render

	m          train.Metric // the latest step
	steps      int          // steps seen
	val        float32
	valStep    int
	sample     string
	sampleStep int
	nextTenth  int // text mode: the next tenth of the run to print at
	finished   bool
}

// NewProgress returns a display for a run of total steps in language lang.
func NewProgress(lang string, total int) *Progress {
	return &Progress{lang: lang, total: max(total, 1), id: newID(), start: time.Now(), nextTenth: 1}
}

// Update records step m and renders when it is time to.
func (p *Progress) Update(m train.Metric) {
	p.m = m
	p.steps++
	special := m.Step >= p.total
	if m.ValLoss != 0 {
		p.val, p.valStep, special = m.ValLoss, m.Step, true
	}
	if m.Sample != "" {
		p.sample, p.sampleStep, special = m.Sample, m.Step, true
	}
	if out.notebook() {
		if special || time.Since(p.shown) >= UpdateEvery {
			p.render()
		}
		return
	}
	tenth := m.Step * 10 / p.total
	if p.steps == 1 || special || tenth >= p.nextTenth {
		p.nextTenth = tenth + 1
		fmt.Fprintln(out.writer(), p.line())
		if m.Sample != "" {
			fmt.Fprintln(out.writer(), Sprintf(p.lang, "sample at step %d:", m.Step)+"\n"+m.Sample)
		}
	}
}

// Done renders the final state with the total time; call it after Run.
func (p *Progress) Done() {
	p.finished = true
	if out.notebook() {
		p.render()
		out.flush()
		return
	}
	fmt.Fprintln(out.writer(), p.doneLine())
}

func (p *Progress) elapsed() time.Duration { return time.Since(p.start) }

// left estimates the time to the last step from the mean wall time of the
// steps seen (evaluations and samples included).
func (p *Progress) left() time.Duration {
	if p.steps == 0 || p.m.Step >= p.total {
		return 0
	}
	per := p.elapsed() / time.Duration(p.steps)
	return per * time.Duration(p.total-p.m.Step)
}

// fields are the labelled values of the latest step, in display order.
func (p *Progress) fields() [][2]string {
	m, l := p.m, p.lang
	f := [][2]string{
		{Sprintf(l, "step"), fmt.Sprintf("%d/%d", m.Step, p.total)},
		{Sprintf(l, "loss"), fmt.Sprintf("%.4f", m.Loss)},
	}
	if p.valStep > 0 {
		f = append(f, [2]string{Sprintf(l, "validation loss"), fmt.Sprintf("%.4f (%s %d)", p.val, Sprintf(l, "step"), p.valStep)})
	}
	f = append(f,
		[2]string{Sprintf(l, "learning rate"), fmt.Sprintf("%.2e", m.LR)},
		[2]string{Sprintf(l, "grad norm"), fmt.Sprintf("%.3f", m.GradNorm)},
		[2]string{Sprintf(l, "tokens/s"), fmt.Sprintf("%.0f", m.TokensPerS)},
		[2]string{Sprintf(l, "ms/step"), fmt.Sprintf("%.1f", m.MsPerStep)},
	)
	if m.LossScale != 0 && m.LossScale != 1 {
		f = append(f, [2]string{Sprintf(l, "loss scale"), fmt.Sprintf("%g (%s %d)", m.LossScale, Sprintf(l, "skipped"), m.Skipped)})
	}
	f = append(f, [2]string{Sprintf(l, "elapsed"), p.seconds(p.elapsed())})
	if !p.finished {
		f = append(f, [2]string{Sprintf(l, "left"), "~" + p.seconds(p.left())})
	}
	for i := range f {
		f[i][1] = Digits(l, f[i][1])
	}
	return f
}

func (p *Progress) seconds(d time.Duration) string { return Sprintf(p.lang, "%.1f s", d.Seconds()) }

// line is the text form of the latest step.
func (p *Progress) line() string {
	var parts []string
	for _, f := range p.fields() {
		parts = append(parts, f[0]+" "+f[1])
	}
	return strings.Join(parts, " · ")
}

func (p *Progress) doneLine() string {
	return Digits(p.lang, Sprintf(p.lang, "done: %d steps in %.1f s", p.steps, p.elapsed().Seconds()))
}

// HTML renders the display.
func (p *Progress) HTML() string {
	var b strings.Builder
	b.WriteString(`<div class="druto-progress">`)
	pct := 100 * p.m.Step / p.total
	fmt.Fprintf(&b, `<progress value="%d" max="%d" style="width:32em"></progress> %s`, p.m.Step, p.total, Digits(p.lang, fmt.Sprintf("%d%%", pct)))
	if p.finished {
		fmt.Fprintf(&b, " — <b>%s</b>", html.EscapeString(p.doneLine()))
	}
	b.WriteString(`<table style="margin-top:4px"><tr>`)
	for _, f := range p.fields() {
		fmt.Fprintf(&b, `<th style="text-align:left;padding-right:1em">%s</th>`, html.EscapeString(f[0]))
	}
	b.WriteString("</tr><tr>")
	for _, f := range p.fields() {
		fmt.Fprintf(&b, `<td style="text-align:left;padding-right:1em">%s</td>`, html.EscapeString(f[1]))
	}
	b.WriteString("</tr></table>")
	if p.sample != "" {
		fmt.Fprintf(&b, `<div>%s</div><pre style="white-space:pre-wrap">%s</pre>`,
			html.EscapeString(Digits(p.lang, Sprintf(p.lang, "sample at step %d:", p.sampleStep))), html.EscapeString(p.sample))
	}
	b.WriteString("</div>")
	return b.String()
}

// render sends the display to its block in the notebook.
func (p *Progress) render() {
	p.shown = time.Now()
	text := p.line()
	if p.finished {
		text = p.doneLine() + "\n" + text
	}
	out.display(p.id, p.HTML(), text)
}
