package bench

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
)

// Sweep times every case under every mode into one report. open gives the
// device of a mode (fused or decomposed); each is closed, when it can be,
// before the next opens. The peak is measured on the first device. When a
// config is timed at several batch sizes, its baseline is the largest
// batch's, so that speed-ups compare one shape.
func Sweep(open func(fused bool) (device.Device, error), cases []Case, modes []Mode, o Options) (*Report, error) {
	var rep *Report
	for _, m := range modes {
		dev, err := open(m.Fused)
		if err != nil {
			return nil, err
		}
		if rep == nil {
			rep = NewReport(dev.Name())
			rep.PeakFLOPs, rep.PeakNote = Peak(dev)
		}
		for _, c := range cases {
			r, err := StepTimes(dev, c, m, o, rep.PeakFLOPs)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", c.Name, m, err)
			}
			rep.Records = append(rep.Records, r)
		}
		if c, ok := dev.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				return nil, err
			}
		}
	}
	if rep == nil {
		return nil, fmt.Errorf("bench: no mode to time")
	}
	largest := map[string]int{}
	for _, r := range rep.Records {
		largest[r.Config] = max(largest[r.Config], r.Batch)
	}
	for i := range rep.Records {
		r := &rep.Records[i]
		r.Baseline = r.Baseline && r.Batch == largest[r.Config]
	}
	return rep, nil
}
