package train

import (
	"fmt"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// GenerateEach continues prompt by n tokens with model m, handing each
// token to emit as soon as it is drawn (so a long generation can be shown
// as it goes); an error from emit stops it. The context is the last MaxSeq
// tokens, padded after its end: attention is causal, so padding does not
// change the logits at the last real position. Tokens are drawn from the
// softmax at temperature (0 picks the most likely token). Logits that are
// not finite are an error, never a token.
func GenerateEach(m *gpt.Model, rng *tensor.RNG, prompt []int32, n int, temperature float32, emit func(int32) error) error {
	if n < 0 || !finite(float64(temperature)) || temperature < 0 {
		return fmt.Errorf("train: %d tokens at temperature %g: want n >= 0 and a finite temperature >= 0", n, temperature)
	}
	T, V := m.Config.MaxSeq, m.Config.Vocab
	out := append([]int32(nil), prompt...)
	if len(out) == 0 {
		out = append(out, '\n')
	}
	ctx := make([]int32, T)
	for i := 0; i < n; i++ {
		if len(out) > 2*T { // keep the context, not the whole generation
			out = append(out[:0], out[len(out)-T:]...)
		}
		window := out
		if len(window) > T {
			window = window[len(window)-T:]
		}
		clear(ctx)
		copy(ctx, window)
		if _, err := m.Forward(ctx, nil, 1, T); err != nil {
			return err
		}
		logits, err := m.Logits()
		if err != nil {
			return err
		}
		row := logits[(len(window)-1)*V : len(window)*V]
		for j, v := range row {
			if !finite(float64(v)) {
				return fmt.Errorf("train: the model's logit %d is %v at generated token %d: its outputs are not finite, so nothing can be sampled", j, v, i+1)
			}
		}
		tok := int32(pick(row, temperature, rng))
		out = append(out, tok)
		if err := emit(tok); err != nil {
			return err
		}
	}
	return nil
}
