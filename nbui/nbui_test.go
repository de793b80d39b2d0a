package nbui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/druto/druto"
	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// fakeSink records what the helpers send.
type fakeSink struct {
	nb      bool
	text    bytes.Buffer
	shown   []shownOutput
	flushes int
}

type shownOutput struct{ id, html, text string }

func (f *fakeSink) notebook() bool { return f.nb }
func (f *fakeSink) display(id, html, text string) {
	f.shown = append(f.shown, shownOutput{id, html, text})
}
func (f *fakeSink) writer() io.Writer { return &f.text }
func (f *fakeSink) flush()            { f.flushes++ }

func useSink(t *testing.T, notebook bool) *fakeSink {
	t.Helper()
	f := &fakeSink{nb: notebook}
	old := out
	out = f
	t.Cleanup(func() { out = old })
	return f
}

func TestLang(t *testing.T) {
	t.Setenv(sessionEnv, "")
	for _, c := range []struct{ env, dir, want string }{
		{"", "/r/notebooks/bn", "bn"},
		{"", "/r/notebooks/en", "en"},
		{"", "/somewhere", "en"},
		{"bn", "/r/notebooks/en", "bn"},
		{"en", "/r/notebooks/bn", "en"},
		{"fr", "/r/notebooks/bn", "bn"}, // unknown override ignored
	} {
		t.Setenv(LangEnv, c.env)
		t.Setenv("GONB_DIR", c.dir)
		if got := Lang(); got != c.want {
			t.Errorf("Lang() with %s=%q GONB_DIR=%q = %q, want %q", LangEnv, c.env, c.dir, got, c.want)
		}
	}
}

func TestLangFromNotebook(t *testing.T) {
	t.Setenv(LangEnv, "")
	t.Setenv(sessionEnv, "")
	dir := t.TempDir() // a folder of one's own, not named bn
	t.Setenv("GONB_DIR", dir)
	writeFile(t, filepath.Join(dir, "lesson.ipynb"), `{"metadata": {"druto": {"lang": "bn"}}, "cells": []}`)
	if got := Lang(); got != "bn" {
		t.Errorf("a folder's one notebook with druto.lang bn: Lang() = %q", got)
	}
	writeFile(t, filepath.Join(dir, "other-en.ipynb"), `{"metadata": {}, "cells": []}`)
	if got := Lang(); got != "en" {
		t.Errorf("two notebooks that disagree: Lang() = %q, want the default en", got)
	}
	t.Setenv(sessionEnv, "lesson.ipynb") // the server names the notebook
	if got := Lang(); got != "bn" {
		t.Errorf("%s names lesson.ipynb: Lang() = %q, want bn", sessionEnv, got)
	}
	for name, want := range map[string]string{"x.bn.ipynb": "bn", "x-bn.ipynb": "bn", "x_en.ipynb": "en", "bnx.ipynb": ""} {
		if got := notebookLang(filepath.Join(dir, name)); got != want {
			t.Errorf("notebookLang(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestRepo(t *testing.T) {
	t.Setenv(RepoEnv, "")
	t.Setenv("GONB_DIR", "/x/druto/notebooks/bn")
	// From its own source: the druto copy this test is built from.
	if got, err := filepath.Abs(".."); err != nil || Repo() != got {
		t.Errorf("Repo() = %q, want the folder above nbui, %q", Repo(), got)
	}
	t.Setenv(RepoEnv, "/elsewhere/druto/")
	if got := Repo(); got != "/elsewhere/druto" {
		t.Errorf("Repo() with %s = %q, want /elsewhere/druto", RepoEnv, got)
	}
}

func TestRunDir(t *testing.T) {
	base := t.TempDir()
	t.Setenv(OutEnv, base)
	dir, err := RunDir("03-train")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "03-train"); dir != want {
		t.Errorf("RunDir = %q, want %q", dir, want)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("RunDir did not create %s: %v", dir, err)
	}
	nb := t.TempDir()
	t.Setenv(OutEnv, "")
	t.Setenv("GONB_DIR", nb)
	if dir, err := RunDir("x"); err != nil || dir != filepath.Join(nb, "runs", "x") {
		t.Errorf("RunDir without %s = %q, %v; want runs/x beside the notebook", OutEnv, dir, err)
	}
	for _, bad := range []string{"", "a/b", "../up"} {
		if _, err := RunDir(bad); err == nil {
			t.Errorf("RunDir(%q) succeeded, want an error", bad)
		}
	}
}

func TestSprintf(t *testing.T) {
	if got := Sprintf("en", "Why: %s", "x"); got != "Why: x" {
		t.Errorf("en: %q", got)
	}
	if got := Sprintf("bn", "Why: %s", "x"); got != "কারণ: x" {
		t.Errorf("bn: %q", got)
	}
	if got := Sprintf("bn", "not in the table %d", 3); got != "not in the table 3" {
		t.Errorf("missing entry: %q", got)
	}
	if got := Sprintf("bn", "done: %d steps in %.1f s", 300, 51.25); got != "শেষ: 51.2 সেকেন্ডে 300 ধাপ" {
		t.Errorf("reordered arguments: %q", got)
	}
	if got := Sprintf("en", "GPU utilisation (%)"); got != "GPU utilisation (%)" {
		t.Errorf("no arguments: format must come back as is, got %q", got)
	}
}

var verbRE = regexp.MustCompile(`%(\[\d+\])?[-+# 0]*\d*(\.\d+)?(\[\d+\])?([a-zA-Z%])`)

// verbs returns the sorted verb letters of a format.
func verbs(f string) []string {
	var vs []string
	for _, m := range verbRE.FindAllStringSubmatch(f, -1) {
		vs = append(vs, m[4])
	}
	slices.Sort(vs)
	return vs
}

func TestMessagesKeepVerbs(t *testing.T) {
	if len(bangla) < 50 {
		t.Fatalf("message table has %d entries; expected the full table", len(bangla))
	}
	for en, bn := range bangla {
		if !slices.Equal(verbs(en), verbs(bn)) {
			t.Errorf("%q -> %q: verbs %v, want %v", en, bn, verbs(bn), verbs(en))
		}
		if bn == "" {
			t.Errorf("%q has an empty translation", en)
		}
	}
}

func TestTable(t *testing.T) {
	tb := NewTable("bn", "kernel", "compile ms", "not translated").WithCaption("The run's folder: %s", "/tmp/<x>")
	tb.Add("layernorm<b>", 12.5, "a\tb")
	tb.Add("short") // padded
	if want := []string{"কার্নেল", "কম্পাইল (মি.সে.)", "not translated"}; !slices.Equal(tb.Header, want) {
		t.Errorf("header %q, want %q", tb.Header, want)
	}
	if tb.Caption != "রানের ফোল্ডার: /tmp/<x>" {
		t.Errorf("caption %q", tb.Caption)
	}
	if len(tb.Rows[1]) != 3 {
		t.Errorf("short row not padded: %q", tb.Rows[1])
	}
	h := tb.HTML()
	for _, want := range []string{"layernorm&lt;b&gt;", "/tmp/&lt;x&gt;", `<td style="text-align:right">১২.৫</td>`, "<th style=\"text-align:left\">কার্নেল</th>"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML lacks %q:\n%s", want, h)
		}
	}
	if strings.Contains(h, "<b>") {
		t.Errorf("HTML did not escape a cell: %s", h)
	}
	txt := tb.Text()
	lines := strings.Split(strings.TrimRight(txt, "\n"), "\n")
	if len(lines) != 4 || lines[0] != tb.Caption || !strings.HasPrefix(lines[2], "layernorm<b>") || strings.Contains(txt, "\t") {
		t.Errorf("Text:\n%s", txt)
	}
	// Columns line up: the second column starts at the same rune offset.
	col := func(l, s string) int { return len([]rune(l[:strings.Index(l, s)])) }
	if col(lines[1], "কম্পাইল") != col(lines[2], "১২.৫") {
		t.Errorf("columns not aligned:\n%s", txt)
	}
}

func TestNumeric(t *testing.T) {
	for s, want := range map[string]bool{"12": true, "1.5e-07": true, "3.10×": true, "25.5%": true, "-": false, "": false, "sm_90": false, "9.0 (sm_90)": false} {
		if numeric(s) != want {
			t.Errorf("numeric(%q) = %v", s, !want)
		}
	}
}

func TestShowOutsideNotebook(t *testing.T) {
	f := useSink(t, false)
	tb := NewTable("en", "a", "b")
	tb.Add(1, 2)
	tb.Show()
	Note("en", "Why: %s", "because")
	if len(f.shown) != 0 {
		t.Errorf("sent %d outputs outside a notebook", len(f.shown))
	}
	if got := f.text.String(); !strings.Contains(got, "a  b") || !strings.HasSuffix(got, "Why: because\n") {
		t.Errorf("plain text output:\n%s", got)
	}
}

func TestShowInNotebook(t *testing.T) {
	f := useSink(t, true)
	tb := NewTable("en", "a")
	tb.Add("x")
	tb.Show()
	Note("bn", "Why: %s", "<x>\ny")
	if f.text.Len() != 0 {
		t.Errorf("wrote %q to stdout inside a notebook", f.text.String())
	}
	if len(f.shown) != 2 || f.shown[0].id != "" || !strings.HasPrefix(f.shown[0].html, "<table") || f.shown[0].text != tb.Text() {
		t.Fatalf("table output: %+v", f.shown)
	}
	if got := f.shown[1].html; got != "<p>কারণ: &lt;x&gt;<br>y</p>" {
		t.Errorf("note HTML %q", got)
	}
	if f.flushes != 2 {
		t.Errorf("flushed %d times, want after each of 2 outputs", f.flushes)
	}
}

func metric(step int) train.Metric {
	m := train.Metric{Step: step, Loss: 5 - float32(step)/100, LR: 1e-3, GradNorm: 1, TokensPerS: 1000, MsPerStep: 10, LossScale: 1}
	if step%50 == 0 {
		m.ValLoss = 4
	}
	if step == 100 {
		m.Sample = "রিনা <b>"
	}
	return m
}

func TestProgressNotebook(t *testing.T) {
	f := useSink(t, true)
	p := NewProgress("bn", 100)
	for s := 1; s <= 100; s++ {
		p.Update(metric(s))
	}
	p.Done()
	// Step 1 (first render), 50 (validation), 100 (validation, sample, last)
	// and Done at least; the clock may allow more.
	if len(f.shown) < 4 {
		t.Fatalf("rendered %d times, want >= 4", len(f.shown))
	}
	for _, s := range f.shown {
		if s.id != f.shown[0].id || s.id == "" {
			t.Fatalf("renders use ids %q and %q: the display must update one block in place", f.shown[0].id, s.id)
		}
	}
	last := f.shown[len(f.shown)-1]
	for _, want := range []string{`<progress value="100" max="100"`, "শেষ:", "১০০ ধাপ", "রিনা &lt;b&gt;", "যাচাই-ক্ষতি", "৪.০০০০ (ধাপ ১০০)"} {
		if !strings.Contains(last.html, want) {
			t.Errorf("final render lacks %q:\n%s", want, last.html)
		}
	}
	if strings.Contains(last.html, "বাকি") {
		t.Errorf("final render still shows the time left")
	}
	if f.flushes != 1 {
		t.Errorf("Done flushed %d times, want 1", f.flushes)
	}
	if f.text.Len() != 0 {
		t.Errorf("wrote to stdout in a notebook: %q", f.text.String())
	}
}

func TestProgressText(t *testing.T) {
	f := useSink(t, false)
	p := NewProgress("en", 100)
	for s := 1; s <= 100; s++ {
		m := metric(s)
		m.LossScale = 1024
		p.Update(m)
	}
	p.Done()
	if len(f.shown) != 0 {
		t.Errorf("sent outputs outside a notebook")
	}
	lines := strings.Split(strings.TrimRight(f.text.String(), "\n"), "\n")
	var steps []string
	for _, l := range lines {
		if strings.HasPrefix(l, "step ") {
			steps = append(steps, strings.Fields(l)[1])
		}
	}
	// The first step and every tenth (10, 20, ..., 100), of which 50 and 100
	// are also validation steps.
	want := []string{"1/100", "10/100", "20/100", "30/100", "40/100", "50/100", "60/100", "70/100", "80/100", "90/100", "100/100"}
	if !slices.Equal(steps, want) {
		t.Errorf("printed steps %v, want %v", steps, want)
	}
	all := f.text.String()
	for _, want := range []string{"loss scale 1024 (skipped 0)", "validation loss 4.0000 (step 50)", "sample at step 100:\nরিনা <b>", "done: 100 steps in"} {
		if !strings.Contains(all, want) {
			t.Errorf("text lacks %q:\n%s", want, all)
		}
	}
}

func testReport() druto.Report {
	return druto.Report{
		Backend: "cpu", Reason: "why not", GPUSupport: true, GPUUsable: true, Millis: 12,
		Host:      druto.Host{OS: "linux", Arch: "amd64", Go: "go1.26", CPUs: 2},
		Driver:    &druto.Driver{CUDA: "13.0", Version: "580.1", Path: "/lib/libcuda.so.1"},
		Libraries: []gpu.LibInfo{{Name: "cuda", Found: true, Path: "/lib/libcuda.so.1", Version: "13.0"}, {Name: "nvml", Error: "not loaded"}},
		Devices:   []druto.Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA H200", Major: 9, SMs: 132, TotalMem: 140 << 30}, CC: "9.0", Arch: "sm_90", FreeBytes: 139 << 30}},
		Kernels: []druto.Kernel{
			{Name: "layernorm_forward", DType: "f32", Arch: "sm_90", Status: gpu.FromNVRTC, CompileMS: 168.5,
				Attr:     &gpu.FuncAttributes{Registers: 32, MaxThreads: 1024},
				SelfTest: &gpu.KernelTest{Pass: true, MaxRelErr: 1e-7, Cases: []string{"fused: LayerNorm f32 [17 96]", "fused: LayerNorm f32 [3 37]"}}},
			{Name: "layernorm_forward", DType: "bf16", Arch: "sm_90", Status: gpu.FromPTX, Fallback: "NVRTC not loaded\nmore",
				Attr:     &gpu.FuncAttributes{Registers: 30},
				SelfTest: &gpu.KernelTest{Pass: false, MaxRelErr: 0.5, Cases: []string{"fused: LayerNorm bf16 [17 96]"}, Error: "element 3: 1 vs 2\n..."}},
			{Name: "softmax", DType: "f16", Status: gpu.Unavailable, Error: "no PTX"},
		},
		StepChecks: []train.StepCheck{
			{StepDiff: gpt.StepDiff{Policy: "fp32", LossRelErr: 1e-7, GradRelErr: 1e-6, Worst: "wte", WorstErr: 2e-6, Limit: 1e-4}, Pass: true},
			{StepDiff: gpt.StepDiff{Policy: "bf16", LossRelErr: 1e-3, GradRelErr: 0.1, Worst: "h.1.mlp.c_fc.weight", WorstErr: 0.2, Limit: 0.0625}},
			{StepDiff: gpt.StepDiff{Policy: "fp16", Limit: 0.0078}, Error: "gpu: matmul: not supported\nmore"},
		},
	}
}

func TestReportTables(t *testing.T) {
	r := testReport()
	sum := ReportTable("en", r).Text()
	for _, want := range []string{"backend", "why not", "linux/amd64, 2 CPUs, go1.26", "CUDA 13.0, 580.1 (/lib/libcuda.so.1)", "12 ms"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	libs := LibraryTable("bn", r)
	if len(libs.Rows) != 2 || libs.Rows[0][1] != "হ্যাঁ" || libs.Rows[1][3] != `"not loaded"` {
		t.Errorf("libraries: %q", libs.Rows)
	}
	dev := DeviceTable("en", r)
	if len(dev.Rows) != 1 || dev.Rows[0][2] != "9.0 (sm_90)" || dev.Rows[0][4] != "140.0 GiB" || dev.Rows[0][5] != "139.0 GiB" {
		t.Errorf("devices: %q", dev.Rows)
	}
	k := KernelTable("en", r.Kernels)
	if len(k.Rows) != 3 {
		t.Fatalf("kernels: %d rows", len(k.Rows))
	}
	if got := k.Rows[0]; got[3] != "nvrtc-compiled" || got[4] != "168.5" || got[6] != "32" || got[10] != "pass" || got[11] != "1.00e-07" {
		t.Errorf("kernel row 0: %q", got)
	}
	if got := k.Rows[1]; got[10] != "FAIL" || got[12] != "NVRTC not loaded" {
		t.Errorf("kernel row 1: %q", got)
	}
	if got := k.Rows[2]; got[6] != "-" || got[10] != "-" || got[12] != "no PTX" {
		t.Errorf("kernel row 2: %q", got)
	}
	st := SelfTestTable("en", r.Kernels, true)
	if len(st.Rows) != 2 || st.Rows[1][4] != "FAIL: element 3: 1 vs 2" || st.Rows[0][2] != "2" {
		t.Errorf("self-tests: %q", st.Rows)
	}
	if failed := SelfTestTable("en", r.Kernels, false); len(failed.Rows) != 1 || failed.Rows[0][1] != "bf16" {
		t.Errorf("failed self-tests: %q", failed.Rows)
	}
	if p, n := SelfTestCounts(r.Kernels); p != 1 || n != 2 {
		t.Errorf("SelfTestCounts = %d, %d; want 1, 2", p, n)
	}
	sc := StepCheckTable("bn", r.StepChecks)
	if len(sc.Rows) != 3 || sc.Rows[2][7] != "এই জিপিইউতে চলে না: gpu: matmul: not supported" || sc.Rows[0][0] != "fp32" || sc.Rows[0][7] != "পাস" || sc.Rows[1][3] != "h.1.mlp.c_fc.weight" ||
		sc.Rows[1][7] != "ব্যর্থ" || sc.Rows[1][4] != "2.00e-01" {
		t.Errorf("step checks: %q", sc.Rows)
	}
	f := useSink(t, true)
	ShowReport("bn", r)
	// summary, libraries, devices, kernels, the count note, the failed cases, step checks
	if len(f.shown) != 7 || f.shown[4].text != "২টি কার্নেলের মধ্যে ১টি সেলফ-টেস্ট পাস করেছে।" {
		t.Errorf("ShowReport of a GPU report showed %d outputs: %+v", len(f.shown), f.shown)
	}
	f.shown = nil
	ShowReport("en", druto.Report{Backend: "cpu", Libraries: r.Libraries})
	if len(f.shown) != 2 {
		t.Errorf("ShowReport of a CPU report showed %d tables, want 2", len(f.shown))
	}
}

func TestBenchTable(t *testing.T) {
	rep := &bench.Report{Device: "cpu", Date: "2026-12-02", Git: "0123456789abcdef", Records: []bench.Record{
		{Config: "tiny", Mode: "decomposed+fp32", Baseline: true, Batch: 8, Seq: 128, StepMs: 200, Memory: bench.Memory{Params: 1 << 20}},
		{Config: "tiny", Mode: "fused+fp32", Batch: 8, Seq: 128, StepMs: 100, MFU: 0.25},
		{Config: "tiny", Mode: "fused+fp32", Batch: 2, Seq: 128, StepMs: 40},
	}}
	tb := BenchTable("bn", rep)
	if tb.Caption != "cpu, 2026-12-02 (git 0123456789ab)" {
		t.Errorf("caption %q", tb.Caption)
	}
	if got := tb.Rows[0][3]; got != "ডিকম্পোজড+fp32 (বেসলাইন)" {
		t.Errorf("baseline mode cell %q", got)
	}
	ups := []string{tb.Rows[0][8], tb.Rows[1][8], tb.Rows[2][8]}
	if !slices.Equal(ups, []string{"1.00×", "2.00×", "-"}) {
		t.Errorf("speed-ups %q: only rows of the baseline's shape get one", ups)
	}
	if tb.Rows[1][7] != "25.00%" || tb.Rows[0][7] != "-" || tb.Rows[0][9] != "1.0 MiB" {
		t.Errorf("MFU / memory cells: %q", tb.Rows)
	}
}

func TestPolicyTable(t *testing.T) {
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		tb := PolicyTable("en", p)
		if len(tb.Rows) != len(p.Ops()) || len(tb.Rows) == 0 {
			t.Errorf("%s: %d rows for %d ops", p, len(tb.Rows), len(p.Ops()))
		}
		if !strings.Contains(tb.Caption, p.String()) {
			t.Errorf("caption %q does not name %s", tb.Caption, p)
		}
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindResults(t *testing.T) {
	repo := t.TempDir()
	res, err := FindResults(repo)
	if err != nil || len(res.Bench)+len(res.Detect) != 0 {
		t.Fatalf("no bench/results folder: %+v, %v", res, err)
	}
	dir := filepath.Join(repo, "bench", "results")
	rep := bench.NewReport("NVIDIA H200")
	rep.Records = []bench.Record{{Config: "tiny", Mode: "decomposed+fp32", Baseline: true, Batch: 8, Seq: 128, StepMs: 1}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rep.Save(filepath.Join(dir, "h200.json")); err != nil {
		t.Fatal(err)
	}
	d := testReport()
	b, err := jsonMarshal(d)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "detect-h200.json"), string(b))
	writeFile(t, filepath.Join(dir, "notes.json"), `{"other": 1}`)
	writeFile(t, filepath.Join(dir, "run.log"), "not json")
	res, err = FindResults(repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Bench) != 1 || filepath.Base(res.Bench[0]) != "h200.json" || len(res.Detect) != 1 || filepath.Base(res.Detect[0]) != "detect-h200.json" {
		t.Errorf("FindResults = %+v", res)
	}
	got, err := ReadReport(res.Detect[0])
	if err != nil || got.Devices[0].Name != "NVIDIA H200" || len(got.Kernels) != 3 {
		t.Errorf("ReadReport: %+v, %v", got, err)
	}
	if DeviceName("bn", druto.Report{}) != "জিপিইউ নেই" || DeviceName("en", got) != "NVIDIA H200" {
		t.Errorf("DeviceName")
	}
	sum, err := DetectSummaryTable("en", res.Detect...)
	if err != nil {
		t.Fatal(err)
	}
	if row := sum.Rows[0]; len(sum.Rows) != 1 || row[4] != "1 nvrtc-compiled, 1 ptx-jit, 1 unavailable" || row[5] != "1/2" || row[6] != "5.0e-01" {
		t.Errorf("summary rows %q", sum.Rows)
	}
	writeFile(t, filepath.Join(dir, "broken.json"), "{")
	if _, err := FindResults(repo); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("broken JSON: err = %v, want one naming the file", err)
	}
	if _, err := DetectSummaryTable("en", filepath.Join(dir, "missing.json")); err == nil {
		t.Errorf("DetectSummaryTable of a missing file succeeded")
	}
}

func TestSources(t *testing.T) {
	vs, err := kernels.Variants()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, v := range vs {
		files[v.File] = true
	}
	tb, err := SourceTable("en", vs)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != len(files) {
		t.Fatalf("SourceTable has %d rows for %d files", len(tb.Rows), len(files))
	}
	for _, row := range tb.Rows {
		if !files[row[0]] || !strings.Contains(row[1], ": ") || row[2] == "" || strings.Contains(row[5], "DTYPE") ||
			!strings.HasPrefix(row[5], "nvcc") && !strings.Contains(row[4], "(missing)") {
			t.Errorf("row %q", row)
		}
	}
	d := testReport()
	d.Kernels = append(d.Kernels, druto.Kernel{Name: "layernorm_forward", DType: "bf16", Attr: &gpu.FuncAttributes{Registers: 40}},
		druto.Kernel{Name: "layernorm_backward", DType: "bf16", Attr: &gpu.FuncAttributes{Registers: 56}})
	ft, err := fusesTable("bn", vs, "/r", &d)
	if err != nil {
		t.Fatal(err)
	}
	if len(ft.Rows) != len(files) {
		t.Fatalf("FusesTable has %d rows for %d files", len(ft.Rows), len(files))
	}
	for _, row := range ft.Rows {
		if !hasBengaliText(row[1]) {
			t.Errorf("%s: what it fuses is not in Bangla: %q", row[0], row[1])
		}
		if strings.HasPrefix(row[0], "layernorm.cu") && row[3] != "30–56" {
			t.Errorf("layernorm.cu registers %q, want 30–56 from the report", row[3])
		}
	}
	if h := ft.HTML(); !strings.Contains(h, `<a href="`) || !strings.Contains(h, "kernels/layernorm.cu") {
		t.Errorf("FusesTable links no source:\n%s", h)
	}
	if ft, err := FusesTable("en", vs, ".."); err != nil || len(ft.Rows) != len(files) {
		t.Errorf("FusesTable of this checkout: %v", err)
	}
	if _, err := fusesTable("en", append(vs, kernels.Variant{File: "new.cu", Kernel: "k"}), "/r", nil); err == nil || !strings.Contains(err.Error(), "new.cu") {
		t.Errorf("a source without a description: %v", err)
	}
}

func hasBengaliText(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Bengali, r) {
			return true
		}
	}
	return false
}

func TestWordAndDigits(t *testing.T) {
	for in, want := range map[string]string{
		"fused+bf16":                             "ফিউজড+bf16",
		"decomposed+fp32":                        "ডিকম্পোজড+fp32",
		"tiny, fused":                            "tiny, ফিউজড",
		"gaps between ops":                       "অপারেশনের মাঝের ফাঁক",
		"bf16 inputs, fp32 accumulate":           "bf16 ইনপুট, fp32-এ যোগফল",
		"fp32 master + m + v, bf16 working copy": "fp32 মাস্টার + m + v, bf16 কাজের কপি",
		"layernorm_forward":                      "layernorm_forward",
	} {
		if got := Word("bn", in); got != want {
			t.Errorf("Word(bn, %q) = %q, want %q", in, got, want)
		}
		if got := Word("en", in); got != in {
			t.Errorf("Word(en, %q) = %q", in, got)
		}
	}
	for in, want := range map[string]string{
		"12/300": "১২/৩০০",
		"3টি কার্নেল, 1.5e-03, ~2.0 সেকেন্ড": "৩টি কার্নেল, ১.৫e-০৩, ~২.০ সেকেন্ড",
		"fp32 sm_90 model.safetensors":       "fp32 sm_90 model.safetensors",
		"/tmp/runs/03-train (git 0123ab)":    "/tmp/runs/03-train (git 0123ab)",
		"2026-12-02, 3.2 MiB":                "২০২৬-১২-০২, ৩.২ MiB",
	} {
		if got := Digits("bn", in); got != want {
			t.Errorf("Digits(bn, %q) = %q, want %q", in, got, want)
		}
		if got := Digits("en", in); got != in {
			t.Errorf("Digits(en, %q) = %q", in, got)
		}
	}
	m := gpt.Memory{Params: 3 << 20, Grads: 1 << 20, Optimizer: 2 << 20, Activations: 4 << 20}
	if got := Memory("bn", m); got != "প্যারামিটার 3.0 MiB, গ্রেডিয়েন্ট 1.0 MiB, অপটিমাইজার 2.0 MiB, অ্যাক্টিভেশন 4.0 MiB, মোট 10.0 MiB" {
		t.Errorf("Memory(bn) = %q", got)
	}
	if got := Memory("en", m); !strings.HasPrefix(got, "parameters 3.0 MiB") {
		t.Errorf("Memory(en) = %q", got)
	}
	if got := PeakNote("bn", "measured f32 matmul 1024^3 on this device"); got != "এই ডিভাইসে মাপা f32 ম্যাটমুল, 1024^3" {
		t.Errorf("PeakNote(bn) = %q", got)
	}
	if got := PeakNote("bn", "from the spec sheet"); got != "from the spec sheet" {
		t.Errorf("PeakNote of another note = %q", got)
	}
	// Tables, notes and the progress display write Bangla digits in bn.
	tb := NewTable("bn", "step").WithCaption("The run's folder: %s", "/tmp/r1")
	tb.Add(12, "fp32")
	if txt := tb.Text(); !strings.Contains(txt, "১২") || !strings.Contains(txt, "fp32") || !strings.Contains(txt, "/tmp/r1") {
		t.Errorf("bn table text:\n%s", txt)
	}
	f := useSink(t, true)
	p := NewProgress("bn", 300)
	p.Update(train.Metric{Step: 12, Loss: 2.5, LR: 1e-3, TokensPerS: 1000, MsPerStep: 10})
	p.Done()
	if last := f.shown[len(f.shown)-1]; strings.ContainsAny(last.text, "0123456789") {
		t.Errorf("bn progress has Latin digits: %q", last.text)
	}
}

// Example shows a table outside a notebook: aligned plain text.
func ExampleTable() {
	t := NewTable("en", "mode", "step ms")
	t.Add("decomposed+fp32", 203.15)
	t.Add("fused+fp32", 180.6)
	fmt.Print(t.Text())
	// Output:
	// mode             step ms
	// decomposed+fp32  203.2
	// fused+fp32       180.6
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func TestPolicyReason(t *testing.T) {
	for _, c := range []train.PolicyChoice{
		{Policy: amp.BF16, GPU: true, Major: 9},
		{Policy: amp.FP16, GPU: true, Major: 7, Minor: 5},
		{Policy: amp.FP32},
		{Policy: amp.BF16, Native: true, ISA: "AVX512_BF16", BF16Share: 0.6},
		{Policy: amp.FP32, Native: true, ISA: "AVX512_BF16", BF16Share: 0.95},
		{Policy: amp.FP32, Native: true, ISA: "AVX512_BF16", Err: os.ErrNotExist},
	} {
		en, bn := PolicyReason("en", c), PolicyReason("bn", c)
		if en != c.String() || bn == en || !hasBengaliText(bn) || !strings.HasPrefix(bn, c.Policy.String()) && !strings.Contains(bn, c.Policy.String()) {
			t.Errorf("%+v: en %q, bn %q", c, en, bn)
		}
	}
	f := useSink(t, true)
	ShowPolicy("bn", cpu.New(device.Options{Fused: true}))
	if len(f.shown) != 3 || !hasBengaliText(f.shown[1].text) {
		t.Errorf("ShowPolicy showed %d outputs: %+v", len(f.shown), f.shown)
	}
}

func TestCompileError(t *testing.T) {
	err := fmt.Errorf("cuda: nvrtc compile of flash_attention.cu for sm_75 failed: NVRTC_ERROR_COMPILATION (6)\n" +
		`flash_common.cuh(12): catastrophic error: #error directive: "bf16 flash attention needs sm_80"` + "\n\n1 catastrophic error detected")
	if got := compileError("bn", err); got != `বিল্ড হয়নি: "bf16 flash attention needs sm_80"` {
		t.Errorf("compileError(bn) = %q", got)
	}
	if got := compileError("en", fmt.Errorf("cuda: no NVRTC\nmore")); got != `not built: "cuda: no NVRTC"` {
		t.Errorf("compileError(en) = %q", got)
	}
}

func TestReason(t *testing.T) {
	for in, want := range map[string]string{
		"CUDA driver 12.2 found but no CUDA device; using the CPU":                                                                                      "CUDA ড্রাইভার 12.2 পাওয়া গেছে, কিন্তু কোনো CUDA ডিভাইস নেই; সিপিইউ ব্যবহার হচ্ছে",
		"druto: no usable GPU: no CUDA driver (libcuda.so.1 not found or not loadable); ask for the cpu backend (or auto, which falls back to the CPU)": "druto: ব্যবহারযোগ্য জিপিইউ নেই: CUDA ড্রাইভার নেই (libcuda.so.1 পাওয়া যায়নি বা লোড হয় না); সিপিইউ ব্যাকএন্ড বেছে নিন (অথবা auto, যা জিপিইউ না পেলে সিপিইউতে চলে)",
		"NVIDIA H200 (sm_90) is usable: every kernel built and the self-tests pass":                                                                     "NVIDIA H200 (sm_90) ব্যবহারযোগ্য: সব কার্নেল বিল্ড হয়েছে আর সেলফ-টেস্ট পাস করেছে",
		"something else": "something else",
	} {
		if got := Reason("bn", in); got != want {
			t.Errorf("Reason(bn, %q) = %q, want %q", in, got, want)
		}
		if got := Reason("en", in); got != in {
			t.Errorf("Reason(en, %q) = %q", in, got)
		}
	}
	// Every reason druto.go writes is one of Reason's formats.
	src, err := os.ReadFile("../druto.go")
	if err != nil {
		t.Fatal(err)
	}
	concat := regexp.MustCompile(`" \+ [^"]+ \+ "`)
	n := 0
	for _, m := range regexp.MustCompile(`r\.Reason = (?:fmt\.Sprintf\()?("[^\n]*")`).FindAllSubmatch(src, -1) {
		n++
		line := concat.ReplaceAllString(string(m[1]), "%s") // "CUDA driver " + r.Driver.CUDA + " found ..."
		f := strings.ReplaceAll(line[1:strings.LastIndex(line, `"`)], "%d%d", "%s")
		if !slices.Contains(reasons, f) {
			t.Errorf("druto.go's reason %q is not in nbui's reasons", f)
		}
	}
	if n < 6 {
		t.Errorf("found %d reasons in druto.go; the pattern no longer matches", n)
	}
}
