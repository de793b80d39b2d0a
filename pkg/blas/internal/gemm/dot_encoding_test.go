//go:build amd64 && !purego

package gemm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestDotEncodings checks the hand-encoded VDPBF16PS instructions of
// kernel_dot_amd64.s (Go's assembler does not know the instruction): each
// "#define DPr_Zb_Zacc BYTE ..." must be the bytes GNU as gives for the Go
// form in the comment above it (VDPBF16PS.BCST addr, Zb, Zacc), and name
// the operands it encodes. It needs binutils (as, objdump) and skips
// without them.
func TestDotEncodings(t *testing.T) {
	src, err := os.ReadFile("kernel_dot_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("as"); err != nil {
		testreq.Skip(t, "DRUTO_BINUTILS_TESTS", "no GNU as to check the VDPBF16PS encodings against")
	}
	if _, err := exec.LookPath("objdump"); err != nil {
		testreq.Skip(t, "DRUTO_BINUTILS_TESTS", "no objdump to check the VDPBF16PS encodings against")
	}
	goForm := regexp.MustCompile(`^// VDPBF16PS\.BCST \((SI|R11)\)(?:\(R10\*([12])\))?, Z(\d+), Z(\d+)$`)
	def := regexp.MustCompile(`^#define DP(\d)_Z(\d+)_Z(\d+) ((?:BYTE \$0x[0-9a-f]{2}(?:; )?)+)$`)
	att := map[string]string{"SI": "%rsi", "R11": "%r11"}
	lines := strings.Split(string(src), "\n")
	var asm bytes.Buffer
	var want [][]string
	var names []string
	for i := 1; i < len(lines); i++ {
		d := def.FindStringSubmatch(lines[i])
		if d == nil {
			continue
		}
		f := goForm.FindStringSubmatch(lines[i-1])
		if f == nil {
			t.Fatalf("line %d: %s has no Go form above it", i+1, d[0][:20])
		}
		// The macro's name must match its operands: row r's address
		// (rows 0-2 from SI, 3-5 from R11, scaled by 0, 1, 2 rows).
		row := map[string]int{"SI": 0, "R11": 3}[f[1]]
		if f[2] != "" {
			row += int(f[2][0] - '0')
		}
		if fmt.Sprint(row) != d[1] || f[3] != d[2] || f[4] != d[3] {
			t.Errorf("line %d: DP%s_Z%s_Z%s encodes %s", i+1, d[1], d[2], d[3], lines[i-1])
		}
		addr := "(" + att[f[1]] + ")"
		if f[2] != "" {
			addr = "(" + att[f[1]] + ",%r10," + f[2] + ")"
		}
		fmt.Fprintf(&asm, "vdpbf16ps %s{1to16}, %%zmm%s, %%zmm%s\n", addr, f[3], f[4])
		var bs []string
		for _, b := range strings.Split(d[4], ";") {
			bs = append(bs, strings.TrimPrefix(strings.TrimSpace(b), "BYTE $0x"))
		}
		want = append(want, bs)
		names = append(names, "DP"+d[1]+"_Z"+d[2]+"_Z"+d[3])
	}
	if len(want) < 17 {
		t.Fatalf("found %d VDPBF16PS encodings, want the 17 the kernels use", len(want))
	}
	dir := t.TempDir()
	s, o := filepath.Join(dir, "dp.s"), filepath.Join(dir, "dp.o")
	if err := os.WriteFile(s, asm.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("as", s, "-o", o).CombinedOutput(); err != nil {
		testreq.Skip(t, "DRUTO_BINUTILS_TESTS", "as cannot assemble VDPBF16PS here: %v: %s", err, out)
	}
	out, err := exec.Command("objdump", "-d", o).Output()
	if err != nil {
		t.Fatal(err)
	}
	insn := regexp.MustCompile(`^\s+[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t`)
	var got [][]string
	for _, l := range strings.Split(string(out), "\n") {
		if m := insn.FindStringSubmatch(l); m != nil {
			got = append(got, strings.Fields(m[1]))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("objdump shows %d instructions, want %d", len(got), len(want))
	}
	for i := range want {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("%s: bytes %v, GNU as gives %v", names[i], want[i], got[i])
		}
	}
}
