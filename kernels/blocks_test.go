package kernels

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestBlocks: every kernel of every embedded source has one block size,
// read from its file's #define.
func TestBlocks(t *testing.T) {
	kb, err := KernelBlocks()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"layernorm_forward", "layernorm_backward_rf32", "crossentropy_fused_l3", "gradnorm_partial2", "adamw_fused2"} {
		if kb[k] == 0 {
			t.Errorf("KernelBlocks has no block for %s", k)
		}
	}
	for k, n := range kb {
		if n <= 0 || n > 1024 || n%32 != 0 {
			t.Errorf("%s: block %d", k, n)
		}
	}
	if n, err := Block("gradnorm.cu", "GN_THREADS"); err != nil || n != kb["gradnorm_partial2"] {
		t.Errorf("Block(gradnorm.cu, GN_THREADS) = %d, %v; KernelBlocks says %d", n, err, kb["gradnorm_partial2"])
	}
}

// TestBlockErrors: the parser's refusals each name the file and macro.
func TestBlockErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"a.cu": {Data: []byte("// druto:kernel k1 k2\n// druto:block A_BLOCK k1\n#ifndef A_BLOCK\n#define A_BLOCK 128 // note\n#endif\n" +
			"#define ODD 100\n#define TWICE 64\n#define TWICE 96\n#define EXPR (2 * 64)\n")},
	}
	if n, err := blockIn(fsys, "a.cu", "A_BLOCK"); err != nil || n != 128 {
		t.Errorf("A_BLOCK = %d, %v; want 128", n, err)
	}
	for _, c := range []struct{ file, macro, want string }{
		{"a.cu", "NONE", "no line `#define NONE"},
		{"a.cu", "ODD", "not a block size"},
		{"a.cu", "TWICE", "defined twice"},
		{"a.cu", "EXPR", "no line `#define EXPR"},
		{"b.cu", "A_BLOCK", "b.cu"},
	} {
		_, err := blockIn(fsys, c.file, c.macro)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: error %v, want one containing %q", c.file, c.macro, err, c.want)
		}
	}
	// k2 has no block line
	if _, err := kernelBlocksIn(fsys); err == nil || !strings.Contains(err.Error(), "a.cu:k2") {
		t.Errorf("kernelBlocksIn: %v, want the missing a.cu:k2", err)
	}
	fsys["a.cu"].Data = append(fsys["a.cu"].Data, []byte("// druto:block A_BLOCK k2\n// druto:block TWICE k1\n")...)
	if _, err := kernelBlocksIn(fsys); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("kernelBlocksIn: %v, want TWICE's error", err)
	}
	fsys["a.cu"].Data = []byte("// druto:kernel k1 k2\n// druto:block A_BLOCK k1 k2\n#define A_BLOCK 64\n// druto:block A_BLOCK k1\n")
	if _, err := kernelBlocksIn(fsys); err == nil || !strings.Contains(err.Error(), "k1 has two block lines") {
		t.Errorf("kernelBlocksIn: %v, want k1's duplicate", err)
	}
}

// TestDefine: a shared constant that is not a block size.
func TestDefine(t *testing.T) {
	if n, err := Define("gradnorm.cu", "GN_CHUNK"); err != nil || n <= 0 || n%(32*4) != 0 {
		t.Errorf("Define(gradnorm.cu, GN_CHUNK) = %d, %v; want a positive multiple of 128", n, err)
	}
	if _, err := Define("gradnorm.cu", "NO_SUCH"); err == nil {
		t.Error("Define of a missing macro: no error")
	}
}
