package gpt

import (
	"fmt"
	"sort"
	"strings"

	"github.com/druto/druto/pkg/tensor"
)

// Config is the shape of a GPT-2 style model, as plain values.
type Config struct {
	Vocab    int // V: vocabulary size (256 for druto's byte-level tokens; 50304 = GPT-2's 50257 padded)
	MaxSeq   int // maxT: longest sequence (rows of the position embedding)
	Layers   int // L: transformer blocks
	Heads    int // NH: attention heads; Channels must be divisible by it
	Channels int // C: embedding width
}

// presets by name. Comments give the parameter counts.
var presets = map[string]Config{
	"tiny":      {Vocab: 256, MaxSeq: 128, Layers: 4, Heads: 4, Channels: 128},      // 0.85M
	"small":     {Vocab: 256, MaxSeq: 256, Layers: 4, Heads: 4, Channels: 256},      // 3.3M
	"gpt2-124M": {Vocab: 50304, MaxSeq: 1024, Layers: 12, Heads: 12, Channels: 768}, // 124M
}

// Presets returns the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the configuration called name.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("gpt: unknown preset %q (choose one of %s)", name, strings.Join(Presets(), ", "))
	}
	return c, nil
}

// Validate reports a configuration that cannot be built.
func (c Config) Validate() error {
	switch {
	case c.Vocab < 1 || c.MaxSeq < 1 || c.Layers < 1 || c.Heads < 1 || c.Channels < 1:
		return fmt.Errorf("gpt: every size must be positive: %+v", c)
	case c.Channels%c.Heads != 0:
		return fmt.Errorf("gpt: channels %d not divisible by heads %d", c.Channels, c.Heads)
	}
	return nil
}

// String formats the configuration compactly.
func (c Config) String() string {
	return fmt.Sprintf("V%d T%d L%d H%d C%d", c.Vocab, c.MaxSeq, c.Layers, c.Heads, c.Channels)
}

// Layout returns the flat parameter layout: wte, wpe, then per layer ln_1,
// attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (weights in the
// (out, in) layout of nn.Linear), then ln_f. Weight decay is on for every
// 2-D tensor (matrices and embeddings), off for biases and norm gains. The
// output head is tied to wte and has no segment of its own.
func (c Config) Layout() *tensor.Layout {
	C, L := c.Channels, c.Layers
	var l tensor.Layout
	l.Add("wte", true, c.Vocab, C)
	l.Add("wpe", true, c.MaxSeq, C)
	for i := 0; i < L; i++ {
		p := fmt.Sprintf("h.%d.", i)
		l.Add(p+"ln_1.weight", false, C)
		l.Add(p+"ln_1.bias", false, C)
		l.Add(p+"attn.c_attn.weight", true, 3*C, C)
		l.Add(p+"attn.c_attn.bias", false, 3*C)
		l.Add(p+"attn.c_proj.weight", true, C, C)
		l.Add(p+"attn.c_proj.bias", false, C)
		l.Add(p+"ln_2.weight", false, C)
		l.Add(p+"ln_2.bias", false, C)
		l.Add(p+"mlp.c_fc.weight", true, 4*C, C)
		l.Add(p+"mlp.c_fc.bias", false, 4*C)
		l.Add(p+"mlp.c_proj.weight", true, C, 4*C)
		l.Add(p+"mlp.c_proj.bias", false, C)
	}
	l.Add("ln_f.weight", false, C)
	l.Add("ln_f.bias", false, C)
	return &l
}

// NumParams returns the number of parameters (the tied head counted once).
func (c Config) NumParams() int { return c.Layout().Total }

// FLOPsPerToken returns the training FLOPs per token at sequence length T:
// 6N for the matmuls of forward and backward plus 12·L·C·T for attention,
// the formula druto's MFU uses.
func (c Config) FLOPsPerToken(T int) float64 {
	return 6*float64(c.NumParams()) + 12*float64(c.Layers*c.Channels*T)
}
