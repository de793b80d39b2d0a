package main

import (
	"flag"
	"os"

	"github.com/druto/druto"
	"github.com/druto/druto/pkg/device"
)

// backend holds the flags that choose the device.
type backend struct {
	name    *string
	fused   *bool
	threads *int
	report  druto.Report // the detect report of the last open
}

func backendFlags(fs *flag.FlagSet) *backend {
	return &backend{
		name:    fs.String("backend", "auto", "auto (GPU when one works, else CPU), cpu or gpu"),
		fused:   fs.Bool("fused", os.Getenv("DRUTO_FUSED") != "0", "fused kernels (false: the decomposed baseline; env DRUTO_FUSED=0)"),
		threads: fs.Int("threads", 0, "CPU threads (0: all cores)"),
	}
}

// open returns the device and why it was chosen.
func (b *backend) open() (device.Device, string, error) {
	dev, rep, err := druto.Open(druto.Options{Backend: *b.name, Fused: *b.fused, Threads: *b.threads})
	if err != nil {
		return nil, "", err
	}
	b.report = rep
	return dev, rep.Reason, nil
}
