package nbui

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/druto/druto"
	"github.com/druto/druto/kernels"
)

// SourceTable lists the embedded CUDA sources, one row per file: its
// kernels, the dtypes it is built for, its size, and the embedded PTX with
// the command that built it (from the PTX header); a PTX file that is not
// embedded is marked missing.
func SourceTable(lang string, vs []kernels.Variant) (*Table, error) {
	t := NewTable(lang, "source", "kernels", "dtypes", "source bytes", "embedded PTX", "PTX built by")
	type file struct {
		kernels, dtypes, ptx []string
		bytes                int
		build                string
	}
	var order []string
	files := map[string]*file{}
	for _, v := range vs {
		f := files[v.File]
		if f == nil {
			src, err := v.Source()
			if err != nil {
				return nil, err
			}
			f = &file{bytes: len(src)}
			files[v.File] = f
			order = append(order, v.File)
		}
		if !slices.Contains(f.kernels, v.Kernel) {
			f.kernels = append(f.kernels, v.Kernel)
		}
		if dt := v.DType.String(); !slices.Contains(f.dtypes, dt) {
			f.dtypes = append(f.dtypes, dt)
			// A missing PTX file is shown, not fatal: the kernel then needs NVRTC.
			ptx, err := v.PTX()
			if err != nil {
				f.ptx = append(f.ptx, v.PTXFile()+" ("+Sprintf(lang, "missing")+")")
				continue
			}
			h, err := kernels.ParsePTXHeader(ptx)
			if err != nil {
				return nil, fmt.Errorf("nbui: %s: %w", v.PTXFile(), err)
			}
			f.ptx = append(f.ptx, v.PTXFile())
			// The build command without its -DDTYPE=... option, which differs per dtype.
			build, _, _ := strings.Cut(h.Build, " -DDTYPE")
			f.build = build
		}
	}
	for _, name := range order {
		f := files[name]
		t.Add(name, fmt.Sprintf("%d: %s", len(f.kernels), strings.Join(f.kernels, ", ")), strings.Join(f.dtypes, " "),
			f.bytes, strings.Join(f.ptx, " "), f.build)
	}
	return t, nil
}

// fuses says, per kernel source file, what its kernels fuse (English text
// of the catalogue: FusesTable shows it in the notebook's language).
var fuses = map[string]string{
	"adamw.cu":            "AdamW: the whole update of every parameter in one pass over a flat buffer",
	"adamw_fp8.cu":        "AdamW of the weights that FP8 products read, writing their FP8 copy and its transpose as it updates them (sm_90)",
	"attention.cu":        "attention's causal softmax (the products are cuBLAS GEMMs)",
	"cast.cu":             "conversions between fp32, bf16 and fp16",
	"crossentropy.cu":     "softmax with cross-entropy and its gradient: the logits make one round trip",
	"crossentropy_fp8.cu": "the same classifier with its gradient also cast to FP8 for the LM head's backward (sm_90)",
	"decode.cu":           "generation over a key/value cache: attention of one new row with the cache append, and the token drawn on the device",
	"encoder.cu":          "token and position embeddings added in one pass",
	"flash_attention.cu":  "causal attention without the T×T matrix (FlashAttention-2), on tensor cores",
	"flash_attention2.cu": "a second flash-attention forward and backward (sm_80 and later)",
	"fp8.cu":              "the FP8 cast with its transposed copy and amax in one pass, also straight out of layernorm (sm_90)",
	"fp8scale.cu":         "every FP8 tensor's scale from its amax history, in one launch on the GPU",
	"fp8transpose.cu":     "the byte transpose of an FP8 tensor through shared memory, for the LM head's FP8 weight gradient",
	"gelu.cu":             "GELU with the bias add of the linear layers",
	"gradnorm.cu":         "the gradients' global norm with the inf/NaN check and the scaling",
	"layernorm.cu":        "layer normalisation with the residual add before it, forward and backward",
	"matmul.cu":           "bias gradients beside cuBLAS's products in the linear layers",
	"step.cu":             "the step's scalars (learning rate, loss scale) on the GPU: no round trip to the host",
}

// FusesTable lists the embedded kernel sources, one row per file: the file
// (a link to it in repo, relative to the notebook's folder, so the comment
// that explains each kernel is one click away), what its kernels fuse, how
// many kernels it holds and, from the first detect report committed in
// repo/bench/results (a GPU machine's), the range of registers its
// kernels take per thread. A source file without a description in the
// catalogue is an error, so that a new kernel file cannot reach the
// notebook unexplained.
func FusesTable(lang string, vs []kernels.Variant, repo string) (*Table, error) {
	res, err := FindResults(repo)
	if err != nil {
		return nil, err
	}
	var r *druto.Report
	if len(res.Detect) > 0 {
		d, err := ReadReport(res.Detect[0])
		if err != nil {
			return nil, err
		}
		r = &d
	}
	return fusesTable(lang, vs, repo, r)
}

// fusesTable is FusesTable with the detect report r (nil: none).
func fusesTable(lang string, vs []kernels.Variant, repo string, r *druto.Report) (*Table, error) {
	t := NewTable(lang, "source", "what it fuses", "kernels", "registers")
	if r != nil {
		t.WithCaption("The kernel sources: what each fuses, and the registers its kernels take on %s", DeviceName(lang, *r))
	} else {
		t.WithCaption("The kernel sources and what each fuses")
	}
	var order []string
	names := map[string][]string{}
	for _, v := range vs {
		if _, ok := names[v.File]; !ok {
			order = append(order, v.File)
		}
		if !slices.Contains(names[v.File], v.Kernel) {
			names[v.File] = append(names[v.File], v.Kernel)
		}
	}
	for _, file := range order {
		what, ok := fuses[file]
		if !ok {
			return nil, fmt.Errorf("nbui: kernels/%s has no description in nbui's fuses table; add what its kernels fuse (and its Bangla to messages.go)", file)
		}
		regs := "-"
		if r != nil {
			lo, hi := 0, 0
			for _, k := range r.Kernels {
				if k.Attr == nil || !slices.Contains(names[file], k.Name) {
					continue
				}
				if lo == 0 || k.Attr.Registers < lo {
					lo = k.Attr.Registers
				}
				hi = max(hi, k.Attr.Registers)
			}
			switch {
			case hi == 0:
			case lo == hi:
				regs = fmt.Sprint(lo)
			default:
				regs = fmt.Sprintf("%d–%d", lo, hi)
			}
		}
		t.Add(Link{Text: file, URL: sourceURL(repo, file)}, Sprintf(lang, what), len(names[file]), regs)
	}
	return t, nil
}

// sourceURL is the path of kernels/file in repo, relative to the notebook's
// folder when it can be (a link that works in Jupyter and on GitHub).
func sourceURL(repo, file string) string {
	abs := filepath.Join(repo, "kernels", file)
	if rel, err := filepath.Rel(notebookDir(), abs); err == nil {
		return filepath.ToSlash(rel)
	}
	return filepath.ToSlash(abs)
}
