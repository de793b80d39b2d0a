package kernels

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestPTXUpToDate fails when a .cu changed without its PTX being
// regenerated (go generate ./kernels), or a PTX file has no source.
func TestPTXUpToDate(t *testing.T) {
	vs, err := Variants()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, v := range vs {
		want[v.PTXFile()] = true
		src, err := v.RawSource()
		if err != nil {
			t.Fatal(err)
		}
		ptx, err := v.PTX()
		if err != nil {
			t.Errorf("%s: no embedded PTX %s; run go generate ./kernels (nvcc 11.8, see shared/GPU.md)", v, v.PTXFile())
			continue
		}
		h, err := ParsePTXHeader(ptx)
		if err != nil {
			t.Errorf("%s: %v", v.PTXFile(), err)
			continue
		}
		if h.SourceSHA256 != SourceHash(src) {
			t.Errorf("%s was made from another version of %s (sha256 %.12s…, the source is %.12s…): run go generate ./kernels",
				v.PTXFile(), v.File, h.SourceSHA256, SourceHash(src))
		}
		incs := Includes(src)
		for _, inc := range incs {
			hdr, err := sources.ReadFile(inc)
			if err != nil {
				t.Errorf("%s includes %s: %v", v.File, inc, err)
				continue
			}
			if got := h.Headers[inc]; got != SourceHash(hdr) {
				t.Errorf("%s was made from another version of %s (sha256 %.12s…, the header is %.12s…): run go generate ./kernels",
					v.PTXFile(), inc, got, SourceHash(hdr))
			}
		}
		if len(h.Headers) != len(incs) {
			t.Errorf("%s records headers %v, the source includes %v: run go generate ./kernels", v.PTXFile(), h.Headers, incs)
		}
		if h.Source != v.File || h.DType != v.DType.String() {
			t.Errorf("%s: header names %s/%s, want %s/%s", v.PTXFile(), h.Source, h.DType, v.File, v.DType)
		}
		target := ".target sm_" + strings.TrimPrefix(v.PTXArch(), "compute_")
		if !bytes.Contains(ptx, []byte(target+"\n")) || !bytes.Contains(ptx, []byte(".entry "+v.Kernel)) {
			t.Errorf("%s: not %s PTX with entry %s", v.PTXFile(), v.PTXArch(), v.Kernel)
		}
		if !strings.Contains(h.Build, "-arch="+v.PTXArch()+" ") || !strings.Contains(h.Build, v.Define()) {
			t.Errorf("%s: built with %q", v.PTXFile(), h.Build)
		}
	}
	files, err := ptxFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[f] {
			t.Errorf("%s belongs to no kernel variant: delete it or add its dtype to the source", f)
		}
	}
}

// TestVariants: layernorm_forward exists for the three float dtypes.
func TestVariants(t *testing.T) {
	vs, err := Variants()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.String())
	}
	got := strings.Join(names, " ")
	for _, w := range []string{"layernorm_forward/f32", "layernorm_forward/bf16", "layernorm_forward/f16"} {
		if !strings.Contains(got, w) {
			t.Errorf("variants %q lack %s", got, w)
		}
	}
	v := Variant{Kernel: "k", File: "x.cu", DType: BF16}
	if v.Define() != "-DDTYPE=DRUTO_BF16" || v.PTXFile() != "ptx/x_bf16.ptx" {
		t.Fatalf("define %q, ptx %q", v.Define(), v.PTXFile())
	}
	if _, _, _, err := directives([]byte("// druto:kernel k\n")); err == nil {
		t.Fatal("a source without druto:dtypes accepted")
	}
	if _, _, _, err := directives([]byte("// druto:kernel k\n// druto:dtypes i32\n")); err == nil {
		t.Fatal("an integer storage dtype accepted")
	}
	for _, c := range []struct {
		arch      string // the druto:arch line's value, "" for none
		bf16, f16 int
	}{{"", 75, 75}, {"80", 80, 80}, {"bf16:80", 80, 75}, {"bf16:80 f16:75", 80, 75}, {"f16:75 86", 86, 75}} {
		src := "// druto:kernel k\n// druto:dtypes bf16 f16\n"
		if c.arch != "" {
			src += "// druto:arch " + c.arch + "\n"
		}
		_, _, a, err := directives([]byte(src))
		if err != nil || a[BF16] != c.bf16 || a[F16] != c.f16 {
			t.Fatalf("druto:arch %q: archs %v, %v; want bf16 %d, f16 %d", c.arch, a, err, c.bf16, c.f16)
		}
	}
	for _, bad := range []string{"sm_80", "70", "x", "bf16:70", "i32:80", "bf16:"} {
		if _, _, _, err := directives([]byte("// druto:kernel k\n// druto:dtypes bf16\n// druto:arch " + bad + "\n")); err == nil {
			t.Fatalf("druto:arch %s accepted", bad)
		}
	}
	flash, flash2, fp8 := false, false, false
	for _, v := range vs {
		if v.File == "flash_attention.cu" {
			flash = true
			want := 80 // bf16 mma.m16n8k16 needs sm_80
			if v.DType == F16 {
				want = 75 // f16 runs as two m16n8k8 on sm_75
			}
			if v.MinArch != want || v.PTXArch() != fmt.Sprintf("compute_%d", want) {
				t.Errorf("%s: MinArch %d (%s), want %d", v, v.MinArch, v.PTXArch(), want)
			}
		} else if v.File == "flash_attention2.cu" {
			flash2 = flash2 || v.File == "flash_attention2.cu"
			if v.MinArch != 80 { // bf16/f16 mma.m16n8k16 (and flash2's cp.async): sm_80, both dtypes
				t.Errorf("%s: MinArch %d, want 80", v, v.MinArch)
			}
		} else if v.File == "fp8.cu" || v.File == "crossentropy_fp8.cu" || v.File == "adamw_fp8.cu" {
			fp8 = fp8 || v.File == "fp8.cu"
			if v.MinArch != 90 { // cvt.rn.satfinite.e4m3x2/e5m2x2: sm_90 in PTX ISA 7.8 (sm_89 from 8.1)
				t.Errorf("%s: MinArch %d, want 90", v, v.MinArch)
			}
		} else if v.MinArch != DefaultMinArch {
			t.Errorf("%s: MinArch %d, want %d", v, v.MinArch, DefaultMinArch)
		}
	}
	if !flash || !flash2 || !fp8 {
		t.Errorf("flash_attention.cu variants %v, flash_attention2.cu variants %v, fp8.cu variants %v: want all", flash, flash2, fp8)
	}
}

// TestExpand: an include line is replaced by the header between #line
// directives; other lines, and sources without includes, pass unchanged.
func TestExpand(t *testing.T) {
	hdrs := fstest.MapFS{"a.cuh": {Data: []byte("int a;\n")}, "b.cuh": {Data: []byte("#include \"a.cuh\"\n")}}
	src := []byte("x\n#include \"a.cuh\"\ny\n")
	got, err := Expand("k.cu", src, hdrs)
	if err != nil {
		t.Fatal(err)
	}
	want := "x\n#line 1 \"a.cuh\"\nint a;\n#line 3 \"k.cu\"\ny\n"
	if string(got) != want {
		t.Fatalf("expanded\n%s\nwant\n%s", got, want)
	}
	if inc := Includes(src); len(inc) != 1 || inc[0] != "a.cuh" {
		t.Fatalf("includes %v", inc)
	}
	plain := []byte("#include <x.h>\nint k;\n")
	if got, err := Expand("k.cu", plain, hdrs); err != nil || string(got) != string(plain) {
		t.Fatalf("a source without druto headers changed: %q, %v", got, err)
	}
	if _, err := Expand("k.cu", []byte("#include \"missing.cuh\"\n"), hdrs); err == nil {
		t.Fatal("a missing header accepted")
	}
	if _, err := Expand("k.cu", []byte("#include \"b.cuh\"\n"), hdrs); err == nil {
		t.Fatal("a nested include accepted")
	}
	// Every embedded source expands, and what NVRTC gets has no druto include left.
	vs, err := Variants()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		s, err := v.Source()
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if Includes(s) != nil {
			t.Fatalf("%s: expanded source still includes %v", v, Includes(s))
		}
	}
}

// TestPDLKernelsWait checks that every kernel a "// druto:pdl" line names
// is declared on a druto:kernel line and begins with pdl_enter(): launched
// as a programmatic dependent launch, a kernel that touched memory before
// griddepcontrol.wait would race with the kernel before it.
func TestPDLKernelsWait(t *testing.T) {
	vs, err := Variants()
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, v := range vs {
		declared[v.File+":"+v.Kernel] = true
	}
	files, err := fs.Glob(sources, "*.cu")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		src, err := sources.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		weights := PDLWeights(src)
		for k := range PDLKernels(src) {
			n++
			if !declared[f+":"+k] {
				t.Errorf("%s: druto:pdl names %s, which no druto:kernel line declares", f, k)
				continue
			}
			if w, ok := weights[k]; ok {
				if bad := readsBeforePDL(text, k, w); bad != "" {
					t.Errorf("%s: %s is on the druto:pdl-weights line with %v, but %s", f, k, w, bad)
				}
			} else if !beginsWithPDL(text, k) {
				t.Errorf("%s: %s is on the druto:pdl line but does not begin with pdl_enter();", f, k)
			}
		}
	}
	early := "extern \"C\" __global__ void k2(float* __restrict__ out, const float* __restrict__ w, const float* x, int n) {\n" +
		"    float a = w[threadIdx.x];\n    pdl_enter();\n    out[0] = a + x[0];\n}\n"
	if readsBeforePDL(early, "k2", []string{"w"}) != "" || readsBeforePDL(strings.Replace(early, "w[threadIdx.x]", "x[threadIdx.x]", 1), "k2", []string{"w"}) == "" ||
		readsBeforePDL(strings.Replace(early, "    pdl_enter();\n", "", 1), "k2", []string{"w"}) == "" {
		t.Error("readsBeforePDL does not tell a kernel that reads only its weights before pdl_enter() from one that reads more")
	}
	late := "extern \"C\" __global__ void k1(float* p) {\n    p[0] = 1;\n    pdl_enter();\n}\n"
	if beginsWithPDL(late, "k1") || !beginsWithPDL(strings.Replace(late, "p[0] = 1;\n    pdl_enter();", "pdl_enter();", 1), "k1") {
		t.Error("beginsWithPDL does not tell a kernel that writes before pdl_enter() from one that begins with it")
	}
	if n < 20 {
		t.Errorf("only %d kernels are launched as programmatic dependent launches; want the fused step's (at least 20)", n)
	}
	for _, v := range vs {
		if v.Kernel == "layernorm_forward_rf32" && !v.PDL {
			t.Errorf("%s: Variant.PDL is false", v)
		}
	}
}

// readsBeforePDL returns "" when kernel k's body calls pdl_enter() and the
// code before that names no pointer parameter of k but those of allowed,
// else what is wrong.
func readsBeforePDL(src, k string, allowed []string) string {
	m := regexp.MustCompile(`__global__ void(?: __launch_bounds__\([^)]*\))?\s+` + k + `\(([^{;]*)\)\s*\{`).FindStringSubmatchIndex(src)
	if m == nil {
		return "its definition was not found"
	}
	params, body := src[m[2]:m[3]], src[m[1]:]
	before, _, found := strings.Cut(body, "pdl_enter();")
	if !found {
		return "it does not call pdl_enter()"
	}
	for _, p := range strings.Split(params, ",") {
		if !strings.Contains(p, "*") {
			continue
		}
		f := strings.Fields(strings.NewReplacer("*", " ").Replace(p))
		name := f[len(f)-1]
		if !slices.Contains(allowed, name) && regexp.MustCompile(`(^|[^.\w])`+name+`\b`).MatchString(before) {
			return "it uses " + name + " before pdl_enter()"
		}
	}
	return ""
}

// beginsWithPDL reports whether kernel k's body in src starts with
// pdl_enter(); (directly, or in the body of the macro that defines it).
func beginsWithPDL(src, k string) bool {
	body := regexp.MustCompile(`__global__ void(?: __launch_bounds__\([^)]*\))?\s+` + k + `\(([^{;]*)\)\s*\{\s*pdl_enter\(\);`)
	if body.MatchString(src) {
		return true
	}
	// A macro: NAME(k, ...) expanded from `#define NAME(name, ...)` whose
	// kernel body begins with pdl_enter().
	call := regexp.MustCompile(`(?m)^([A-Z_][A-Z0-9_]*)\(` + k + `\b`).FindStringSubmatch(src)
	if call == nil {
		return false
	}
	def := regexp.MustCompile(`#define ` + call[1] + `\(name[^)]*\)[\s\\]*extern "C" __global__ void name\([^{;]*\)\s*\{[\s\\]*pdl_enter\(\);`)
	return def.MatchString(src)
}
