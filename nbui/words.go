package nbui

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/plotting"
)

// Word translates a data word a table or a plot shows (a mode such as
// "fused+bf16", an op of the precision policy, a class of the step
// profile, a run label such as "tiny, fused") into lang: the catalogue's
// text for the whole word, else with its dtypes as %s, else for each part
// of a ", "- or "+"-joined word; a word the catalogue lacks (a dtype, a
// kernel's name) stays as it is.
func Word(lang, s string) string {
	if lang != "bn" {
		return s
	}
	if bn, ok := bangla[s]; ok {
		return bn
	}
	// A dtype is data, not a word: "bf16 inputs, fp32 accumulate" is
	// looked up as "%s inputs, %s accumulate".
	var dtypes []any
	pattern := dtypeRE.ReplaceAllStringFunc(s, func(d string) string { dtypes = append(dtypes, d); return "%s" })
	if bn, ok := bangla[pattern]; ok && len(dtypes) > 0 {
		return fmt.Sprintf(bn, dtypes...)
	}
	for _, sep := range []string{", ", "+"} { // "tiny, fused", "fused+bf16"
		if strings.Contains(s, sep) {
			parts := strings.Split(s, sep)
			for i, p := range parts {
				parts[i] = Word(lang, p)
			}
			return strings.Join(parts, sep)
		}
	}
	return s
}

var dtypeRE = regexp.MustCompile(`\b(fp32|bf16|fp16|f32)\b`)

// English returns the catalogue's English texts (the keys of the one
// message table), for tests that look for English left in Bangla output.
func English() []string {
	out := make([]string, 0, len(bangla))
	for en := range bangla {
		out = append(out, en)
	}
	return out
}

// banglaDigits are ০ to ৯.
const banglaDigits = "০১২৩৪৫৬৭৮৯"

// Digits writes the numbers in s in lang's digits: for "bn", every word
// (a run between spaces) that reads as a number — digits with . , : / - + ×
// % ~ (, ), an exponent e between digits, and Bangla letters such as the
// counter টি — gets Bangla digits. Words with Latin letters (fp32, sm_90,
// a path, a file name, a git revision) keep theirs.
func Digits(lang, s string) string {
	if lang != "bn" || !strings.ContainsAny(s, "0123456789") {
		return s
	}
	words := strings.SplitAfter(s, " ")
	for i, w := range words {
		if numberWord(w) {
			var b strings.Builder
			for _, r := range w {
				if r >= '0' && r <= '9' {
					b.WriteString(string([]rune(banglaDigits)[r-'0']))
					continue
				}
				b.WriteRune(r)
			}
			words[i] = b.String()
		}
	}
	return strings.Join(words, "")
}

// numberWord reports whether w (one word of a text) is a number to write in
// Bangla digits.
func numberWord(w string) bool {
	rs := []rune(strings.TrimSpace(w))
	digits := 0
	for i, r := range rs {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case unicode.Is(unicode.Bengali, r), strings.ContainsRune(".,:/-+×%~()[]–।", r):
		case (r == 'e' || r == 'E') && i > 0 && i+1 < len(rs) && rs[i-1] >= '0' && rs[i-1] <= '9' &&
			(rs[i+1] == '-' || rs[i+1] == '+' || rs[i+1] >= '0' && rs[i+1] <= '9'):
		default:
			return false
		}
	}
	return digits > 0
}

// Memory formats the bytes one training step holds in lang: parameters,
// gradients, optimizer state, activations and the total.
func Memory(lang string, m gpt.Memory) string {
	return Sprintf(lang, "parameters %s, gradients %s, optimizer %s, activations %s, total %s",
		mib(uint64(max(m.Params, 0))), mib(uint64(max(m.Grads, 0))), mib(uint64(max(m.Optimizer, 0))),
		mib(uint64(max(m.Activations, 0))), mib(uint64(max(m.Total(), 0))))
}

// PeakNote says in lang how the peak that MFU divides by was found, from
// a bench report's note ("measured f32 matmul 1024^3 on this device"); a
// note of another form is shown as it is.
func PeakNote(lang, note string) string {
	var dt string
	var n int
	if k, err := fmt.Sscanf(note, "measured %s matmul %d^3 on this device", &dt, &n); err == nil && k == 2 {
		return Sprintf(lang, "measured %s matmul %d^3 on this device", dt, n)
	}
	return note
}

// PlotOptions are the plotting options of a notebook in lang: its labels,
// its digits and its data words (modes, op classes) from the catalogue.
func PlotOptions(lang string) []plotting.Option {
	return []plotting.Option{plotting.Lang(lang), plotting.BanglaDigits(lang == "bn"),
		plotting.Words(func(s string) string { return Word(lang, s) })}
}

// reasons are the sentences druto.Detect and druto.Open give as a report's
// Reason or an error (druto.go), as formats: Reason finds the one a
// sentence was made from and writes it in the notebook's language.
var reasons = withFallbackCut([]string{
	"no GPU support in this build (built with CGO_ENABLED=0); using the CPU",
	"no CUDA driver (libcuda.so.1 not found or not loadable); using the CPU",
	"CUDA driver %s found but no CUDA device; using the CPU",
	"%s found but the GPU device could not be made (see errors); using the CPU",
	"%s found but a training step on it does not match the CPU reference under %s (see step_checks); using the CPU",
	"%s found but not every kernel built and passed its self-test (see kernels); using the CPU",
	"%s (sm_%s) is usable: every kernel built and the self-tests pass",
	"the cpu backend was asked for",
	"druto: no usable GPU: %s; ask for the cpu backend (or auto, which falls back to the CPU)",
})

// cpuFallback ends the reasons auto gives when it falls back to the CPU;
// druto.Open's error for the gpu backend gives them without it.
const cpuFallback, cpuFallbackBn = "; using the CPU", "; সিপিইউ ব্যবহার হচ্ছে"

// withFallbackCut returns rs and, after them, each reason that ends in
// cpuFallback without it, with its Bangla added to the catalogue likewise.
func withFallbackCut(rs []string) []string {
	for _, r := range rs {
		if core, ok := strings.CutSuffix(r, cpuFallback); ok {
			rs = append(rs, core)
			bangla[core] = strings.TrimSuffix(bangla[r], cpuFallbackBn)
		}
	}
	return rs
}

// reasonREs are reasons as regular expressions, each %s a group.
var reasonREs = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, f := range reasons {
		parts := strings.Split(f, "%s")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		out = append(out, regexp.MustCompile("^"+strings.Join(parts, "(.+?)")+"$"))
	}
	return out
}()

// Reason writes a sentence of druto's detection (a Report's Reason, Open's
// error) in lang; the parts it fills in (a GPU's name, a version, a nested
// reason) are translated in turn. A sentence of another form stays as it is.
func Reason(lang, s string) string {
	if lang != "bn" {
		return s
	}
	for i, re := range reasonREs {
		m := re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		args := make([]any, len(m)-1)
		for j, a := range m[1:] {
			args[j] = Reason(lang, a)
		}
		return Sprintf(lang, reasons[i], args...)
	}
	return s
}
