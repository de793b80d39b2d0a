package bench

import (
	"errors"
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
)

// ErrNoMode is Sweep's error when no mode was timed (none given, or every
// one skipped by Options.Skip).
var ErrNoMode = errors.New("bench: no mode to time")

// Sweep times every case under every mode into one report. open gives the
// device of a mode (fused or decomposed); each is closed, when it can be,
// before the next opens. The peak is measured on each mode's device and
// the highest is the MFU denominator of every record. When a config is
// timed at several batch sizes, its baseline is the largest batch's, so
// that speed-ups compare one shape. Options' hooks, where set, skip modes
// and see the first device and every record.
func Sweep(open func(fused bool) (device.Device, error), cases []Case, modes []Mode, o Options) (*Report, error) {
	var rep *Report
	var cfgs []gpt.Config // each record's model, for its MFU
	for _, m := range modes {
		dev, err := open(m.Fused)
		if err != nil {
			return nil, err
		}
		err = func() error {
			if o.Skip != nil && o.Skip(m) {
				return nil
			}
			peak, note := Peak(dev)
			if rep == nil {
				rep = NewReport(dev.Name())
				rep.PeakFLOPs, rep.PeakNote = peak, note
				if o.Start != nil {
					if err := o.Start(dev, rep); err != nil {
						return err
					}
				}
			}
			rep.PeakFLOPs = max(rep.PeakFLOPs, peak)
			for _, c := range cases {
				r, err := StepTimes(dev, c, m, o, rep.PeakFLOPs)
				if err != nil {
					return fmt.Errorf("%s %s: %w", c.Name, m, err)
				}
				if o.Each != nil {
					if err := o.Each(dev, c, m, &r); err != nil {
						return err
					}
				}
				rep.Records = append(rep.Records, r)
				cfgs = append(cfgs, c.Config)
			}
			return nil
		}()
		// free the mode's device memory before the next opens
		if c, ok := dev.(interface{ Close() error }); ok {
			if cerr := c.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if rep == nil {
		return nil, ErrNoMode
	}
	largest := map[string]int{}
	for _, r := range rep.Records {
		largest[r.Config] = max(largest[r.Config], r.Batch)
	}
	for i := range rep.Records {
		r := &rep.Records[i]
		r.Baseline = r.Baseline && r.Batch == largest[r.Config]
		if r.MFU > 0 && rep.PeakFLOPs > 0 { // against the run's highest peak
			r.MFU = cfgs[i].FLOPsPerToken(r.Seq) * r.TokensPerS / rep.PeakFLOPs
		}
	}
	return rep, nil
}
