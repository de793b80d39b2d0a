package gpu

// selftest.go: every kernel checked against the CPU reference through the
// ops that launch it, with the conformance cases of package devicetest
// (druto detect's self-test).

import (
	"fmt"
	"strings"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/devicetest"
)

// KernelTest is one kernel variant's self-test: the verdicts of the
// conformance cases that launched it.
type KernelTest struct {
	Pass      bool     `json:"pass"`
	MaxRelErr float64  `json:"max_rel_err"`
	Cases     []string `json:"tested_by"`       // the cases that launched it, e.g. "fused: LayerNorm bf16 [17 96]"
	Error     string   `json:"error,omitempty"` // the first failing case's error
	// Unused says no op launches this variant (its file is built for every
	// dtype it declares; the op runs the kernel at another): nothing to test.
	Unused bool `json:"unused,omitempty"`
}

// selfTestMode is one setting of the device's kernel choices: the fused or
// decomposed form, and the variants of the ops that have two (ops lists
// the ops whose kernels it changes; nil: every op).
type selfTestMode struct {
	name                   string
	fused, noFlash, flash2 bool
	dgeluEpi               bool // MatmulBackwardGELU's cuBLASLt epilogue form, not the kernel form
	cudnn                  bool // fused 16-bit flash attention through cuDNN (cudnn.go), not the own kernels
	ops                    []string
}

// selfTestModes are the settings that together launch every kernel: the
// fused and decomposed forms, the first flash variant (the fallback where
// variant 2 is not built), the cuBLAS attention path of the fused form, and
// MatmulBackwardGELU's epilogue form (the fused mode runs its kernel form),
// and, where cuDNN loaded, attention through cuDNN (the other modes run the
// own flash kernels).
func (d *Device) selfTestModes() []selfTestMode {
	modes := []selfTestMode{
		{name: "fused", fused: true, flash2: true},
		{name: "decomposed"},
		{name: "fused flash v1", fused: true, ops: []string{"Attention", "AttentionBackward", "AttentionBackwardStore"}},
		{name: "fused no flash", fused: true, noFlash: true, flash2: true, ops: []string{"Attention", "AttentionBackward", "AttentionBackwardStore"}},
		{name: "fused dgelu epilogue", fused: true, flash2: true, dgeluEpi: true, ops: []string{"MatmulBackwardGELU"}},
	}
	if d.dnn.h != nil && d.dnn.off == "" {
		modes = append(modes, selfTestMode{name: CuDNNSelfTestMode, fused: true, flash2: true, cudnn: true,
			ops: []string{"Attention", "AttentionBackward", "AttentionBackwardStore"}})
	}
	return modes
}

// CuDNNSelfTestMode names SelfTest's mode of attention through cuDNN: its
// results are "fused cudnn: <case>". A failing case turns cuDNN attention
// off on the device (the own kernels run, AttentionBackend says why).
const CuDNNSelfTestMode = "fused cudnn"

// forModes runs fn for each mode with the device switched to it, and
// restores the device's own settings after.
func (d *Device) forModes(fn func(m selfTestMode)) {
	fused, noFlash, flash2, epi, dnn := d.fused, d.noFlash, d.flashV2, d.dgeluEpi, d.dnn.on
	defer func() {
		d.fused, d.noFlash, d.flashV2, d.dgeluEpi, d.dnn.on = fused, noFlash, flash2, epi, dnn && d.dnn.off == ""
	}()
	for _, m := range d.selfTestModes() {
		d.fused, d.noFlash, d.flashV2, d.dgeluEpi, d.dnn.on = m.fused, m.noFlash, m.flash2, m.dgeluEpi, m.cudnn
		fn(m)
	}
}

func (m selfTestMode) has(op string) bool {
	if m.ops == nil {
		return true
	}
	for _, o := range m.ops {
		if o == op {
			return true
		}
	}
	return false
}

// SelfTest runs every case in every mode of the device (fused and
// decomposed, and the variants of the ops that have two) against ref, the
// CPU device of the fused form, or refPlain for the decomposed one, and
// records which kernels each case launched. It returns every case's
// result (named "mode: case") and each kernel's verdict keyed
// "name/dtype"; a kernel no case launched has none. The device's own
// settings are restored after.
func (d *Device) SelfTest(ref, refPlain device.Device, cases []devicetest.Case, seed uint64) ([]devicetest.Result, map[string]*KernelTest) {
	var results []devicetest.Result
	verdicts := map[string]*KernelTest{}
	d.forModes(func(m selfTestMode) {
		r := ref
		if !m.fused {
			r = refPlain
		}
		for i, c := range cases {
			if !m.has(c.Contract.Op) {
				continue
			}
			d.trace = map[kernelKey]bool{}
			res := devicetest.Run(d, r, c, seed+uint64(i))
			res.Case = m.name + ": " + res.Case
			if m.cudnn && !res.Pass && d.dnn.off == "" {
				d.dnnOff(fmt.Sprintf("self-test %s: %s", res.Case, firstLine(res.Error)))
			}
			launched := d.trace
			d.trace = nil
			results = append(results, res)
			for k := range launched {
				key := k.name + "/" + k.dt.String()
				v := verdicts[key]
				if v == nil {
					v = &KernelTest{Pass: true}
					verdicts[key] = v
				}
				v.Cases = append(v.Cases, res.Case)
				v.MaxRelErr = max(v.MaxRelErr, res.MaxRelErr)
				if !res.Pass && v.Pass {
					v.Pass, v.Error = false, fmt.Sprintf("%s: %s", res.Case, firstLine(res.Error))
				}
			}
		}
	})
	return results, verdicts
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
