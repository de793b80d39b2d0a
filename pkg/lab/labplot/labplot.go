// Package labplot draws the figures of the course labs. A lab notebook
// imports it only in the cell that shows a figure, so that the cells
// before it build without gonum/plot (package lab alone keeps each cell's
// program small).
package labplot

import (
	"fmt"

	"github.com/druto/druto/pkg/lab"
	"github.com/druto/druto/plotting"
)

// Scaler shows lab 3's figure: the loss scale of the student's
// ScalerUpdate and of druto's GradScaler over a simulated fp16 run with a
// loss spike (lab.SimulateScaler), the skipped steps marked, then a line
// that says whether the two agree. Outside a notebook it prints the line.
func Scaler(lang string, fn lab.ScalerUpdateFunc) error {
	ref, yours, summary := lab.SimulateScaler(lang, fn)
	traces := []plotting.ScaleTrace{{Label: ref.Label, Scale: ref.Scale, Skipped: ref.Skipped}}
	if len(yours.Scale) > 0 {
		traces = append(traces, plotting.ScaleTrace{Label: yours.Label, Scale: yours.Scale, Skipped: yours.Skipped})
	}
	p, err := plotting.LossScale(traces, plotting.Lang(lang), plotting.BanglaDigits(lang == "bn"))
	if err != nil {
		return err
	}
	if err := plotting.Show(p); err != nil {
		return err
	}
	fmt.Println(summary)
	return nil
}
