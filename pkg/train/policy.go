package train

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// AutoPolicy is the precision that trains fastest on dev (ChoosePolicy
// says why).
func AutoPolicy(dev device.Device) amp.Policy {
	p, _ := ChoosePolicy(dev)
	return p
}

// bf16Doter is a CPU device that says whether it multiplies bf16 natively
// (cpu.Device.BF16Dot: the switch druto detect reports too).
type bf16Doter interface {
	BF16Dot() (isa string, ok bool)
}

// PolicyChoice is ChoosePolicy's decision and what it rests on.
type PolicyChoice struct {
	Policy       amp.Policy
	GPU          bool    // a GPU: the choice follows its compute capability
	Major, Minor int     // the GPU's compute capability
	Native       bool    // a CPU with native bf16 dot products
	ISA          string  // their instruction set (AVX512_BF16)
	BF16Share    float64 // a bf16 matmul's time over an fp32 one's (0: not measured)
	Err          error   // why the matmuls could not be measured
}

// Format returns the reason as a fmt format in English and its arguments
// (nbui translates the format for a Bangla notebook).
func (c PolicyChoice) Format() (string, []any) {
	switch {
	case c.GPU && c.Policy == amp.BF16:
		return "bf16: the GPU (sm_%d%d) has bf16 tensor cores", []any{c.Major, c.Minor}
	case c.GPU:
		return "fp16 with loss scaling: the GPU (sm_%d%d) has fp16 tensor cores and no bf16 ones", []any{c.Major, c.Minor}
	case !c.Native && c.ISA == "":
		return "fp32: this CPU has no native bf16 dot products (AVX512_BF16), so bf16 would be widened to fp32 before every product, which costs time", nil
	case c.Err != nil:
		return "fp32: the bf16 matmul could not be measured: %v", []any{c.Err}
	case c.Policy == amp.BF16:
		return "bf16: this CPU multiplies bf16 natively (%s), and a bf16 matmul took %.0f%% of an fp32 one's time here", []any{c.ISA, 100 * c.BF16Share}
	}
	return "fp32: this CPU multiplies bf16 natively (%s), but a bf16 matmul took %.0f%% of an fp32 one's time here, not enough to pay for the casts", []any{c.ISA, 100 * c.BF16Share}
}

// String is the reason in English.
func (c PolicyChoice) String() string {
	f, args := c.Format()
	return fmt.Sprintf(f, args...)
}

// ChoosePolicy returns the precision that trains fastest on dev and why,
// in a sentence (Choose has the details).
func ChoosePolicy(dev device.Device) (amp.Policy, string) {
	c := Choose(dev)
	return c.Policy, c.String()
}

// Choose decides the precision that trains fastest on dev:
//   - on a GPU, bf16 from compute capability 8.0 on, fp16 (with loss
//     scaling) before;
//   - on a CPU with native bf16 dot products (AVX512_BF16), bf16 when a bf16
//     matmul measured here is at least bf16Gain faster than an fp32 one (the
//     linear layers are most of a step's time), else fp32;
//   - on any other CPU, fp32: bf16 would be widened to fp32 before every
//     product, which costs time and saves none.
//
// The measurement runs once per device name (well under a second on two
// cores) and is kept on disk (policyCache), so that every process on the
// machine, a notebook run again among them, makes the same choice: two
// timings under different load could fall on either side of bf16Gain.
func Choose(dev device.Device) PolicyChoice {
	if g, ok := dev.(interface{ Capability() (major, minor int) }); ok {
		major, minor := g.Capability()
		c := PolicyChoice{Policy: amp.FP16, GPU: true, Major: major, Minor: minor}
		if major >= 8 {
			c.Policy = amp.BF16
		}
		return c
	}
	c := PolicyChoice{Policy: amp.FP32}
	d, ok := dev.(bf16Doter)
	if !ok {
		return c
	}
	c.ISA, c.Native = d.BF16Dot()
	if !c.Native {
		c.ISA = ""
		return c
	}
	f32, bf16, err := measuredMatmuls(dev)
	if err != nil {
		c.Err = err
		return c
	}
	c.BF16Share = bf16.Seconds() / f32.Seconds()
	if c.BF16Share <= 1/bf16Gain {
		c.Policy = amp.BF16
	}
	return c
}

// bf16Gain is how much faster a bf16 matmul must be than an fp32 one for
// ChoosePolicy to pick bf16 on a CPU: the step also casts weights and
// activations, which the matmuls must win back.
const bf16Gain = 1.15

// matmulSeconds times one n×n×n matmul on dev in dt, the fastest of a few
// after a warm-up (the fastest: other processes only ever slow it down).
// Tests replace it to fake a CPU's speed.
var matmulSeconds = func(dev device.Device, dt tensor.DType, n int) (time.Duration, error) {
	var ts []*tensor.Tensor
	for range 3 {
		t, err := dev.Alloc(dt, n, n)
		if err != nil {
			for _, t := range ts {
				dev.Free(t)
			}
			return 0, err
		}
		ts = append(ts, t)
	}
	defer func() {
		for _, t := range ts {
			dev.Free(t)
		}
	}()
	rng := tensor.NewRNG(1)
	host := tensor.New(dt, n, n)
	vals := make([]float32, n*n)
	for _, t := range ts[:2] {
		for i := range vals {
			vals[i] = 2*rng.Float32() - 1
		}
		if err := host.SetF32(vals); err != nil {
			return 0, err
		}
		dev.Upload(t, host)
	}
	best := time.Duration(1<<63 - 1)
	for i := range 5 {
		start := time.Now()
		dev.Matmul(ts[2], nil, ts[0], ts[1], nil, n, n, n, device.None)
		if err := dev.Sync(); err != nil {
			return 0, err
		}
		if d := time.Since(start); i > 0 && d < best {
			best = d
		}
	}
	return best, nil
}

// policyMatmulN is the size of the matmuls ChoosePolicy times: as wide as
// a small model's linear layers, a few tens of milliseconds on two cores.
const policyMatmulN = 512

var measured sync.Map // device name -> [2]time.Duration

// policyCache is the file that keeps the measured matmul times by device
// name across processes (os.UserCacheDir()/druto/cpu-policy.json); empty:
// this process only (tests that fake the timings).
var policyCache = func() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "druto", "cpu-policy.json")
}()

// measuredMatmuls returns the fp32 and bf16 matmul times of dev, measured
// once per device name: from this process's map, else from policyCache,
// else measured now and added to both, unless another process kept its
// timing meanwhile, which is then taken (a cache that cannot be read or
// written is only a lost saving).
func measuredMatmuls(dev device.Device) (f32, bf16 time.Duration, err error) {
	name := dev.Name()
	if v, ok := measured.Load(name); ok {
		d := v.([2]time.Duration)
		return d[0], d[1], nil
	}
	disk := map[string][2]time.Duration{}
	if policyCache != "" {
		if b, err := os.ReadFile(policyCache); err == nil {
			_ = json.Unmarshal(b, &disk)
		}
		if d, ok := disk[name]; ok && d[0] > 0 && d[1] > 0 {
			measured.Store(name, d)
			return d[0], d[1], nil
		}
	}
	if f32, err = matmulSeconds(dev, tensor.F32, policyMatmulN); err != nil {
		return 0, 0, err
	}
	if bf16, err = matmulSeconds(dev, tensor.BF16, policyMatmulN); err != nil {
		return 0, 0, err
	}
	d := [2]time.Duration{f32, bf16}
	if policyCache != "" {
		// The first timing kept wins: a process that timed meanwhile
		// (another notebook, a test) takes the kept one, so that all agree.
		if b, err := os.ReadFile(policyCache); err == nil {
			now := map[string][2]time.Duration{}
			if json.Unmarshal(b, &now) == nil {
				if k, ok := now[name]; ok && k[0] > 0 && k[1] > 0 {
					measured.Store(name, k)
					return k[0], k[1], nil
				}
				disk = now
			}
		}
	}
	measured.Store(name, d)
	if policyCache != "" {
		disk[name] = d
		if b, err := json.Marshal(disk); err == nil && os.MkdirAll(filepath.Dir(policyCache), 0o755) == nil {
			tmp := policyCache + fmt.Sprintf(".%d.tmp", os.Getpid())
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, policyCache) // atomic: a reader sees the old file or the new one
			}
			_ = os.Remove(tmp)
		}
	}
	return f32, bf16, nil
}
