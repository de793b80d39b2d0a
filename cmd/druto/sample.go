package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("sample", "generate text from a checkpoint", runSample)
	register("eval", "print the mean loss of a checkpoint over a data file as JSON", runEval)
}

// loadCheckpoint opens a device and loads a model checkpoint onto it.
func loadCheckpoint(path string, be *backend) (*gpt.Model, error) {
	if path == "" {
		return nil, fmt.Errorf("--checkpoint is required (e.g. out/model.safetensors from druto train)")
	}
	cfg, params, err := train.LoadModel(path)
	if err != nil {
		return nil, err
	}
	dev, _, err := be.open()
	if err != nil {
		return nil, err
	}
	m, err := gpt.New(dev, cfg, amp.FP32)
	if err != nil {
		return nil, err
	}
	return m, m.SetParams(params)
}

func runSample(args []string) error {
	fs := newFlags("sample")
	ckpt := fs.String("checkpoint", "", "model checkpoint (model.safetensors)")
	prompt := fs.String("prompt", "\n", "text to continue")
	n := fs.Int("tokens", 200, "tokens (bytes) to generate")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: greedy)")
	seed := fs.Uint64("seed", 1, "sampling seed")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 0 || *temp < 0 {
		return fmt.Errorf("--tokens %d and --temperature %g must not be negative", *n, *temp)
	}
	if *n > maxSampleTokens {
		return fmt.Errorf("--tokens %d is more than %d; generate in several runs", *n, maxSampleTokens)
	}
	if !utf8.ValidString(*prompt) {
		return fmt.Errorf("--prompt is not valid UTF-8; pass UTF-8 text")
	}
	p, err := data.Encode([]byte(*prompt))
	if err != nil {
		return fmt.Errorf("--prompt: %w", err)
	}
	m, err := loadCheckpoint(*ckpt, be)
	if err != nil {
		return err
	}
	// Stream: each token is printed as it is drawn.
	w := &utf8Stream{w: os.Stdout}
	w.write([]byte(*prompt))
	err = train.GenerateEach(m, tensor.NewRNG(*seed), p, *n, float32(*temp), func(t int32) error {
		if t < 0 || t >= data.VocabSize {
			w.write([]byte{0xff}) // shown as U+FFFD, as DecodeString does
			return w.err
		}
		w.write([]byte{byte(t)})
		return w.err
	})
	w.flush()
	fmt.Fprintln(os.Stdout)
	if err != nil {
		return err
	}
	return w.err
}

// maxSampleTokens bounds druto sample --tokens.
const maxSampleTokens = 1 << 20

// utf8Stream writes bytes to w as they come, holding back only an
// incomplete UTF-8 character; a run of bytes that is not UTF-8 becomes one
// U+FFFD, as data.DecodeString shows it.
type utf8Stream struct {
	w    io.Writer
	pend []byte
	bad  bool // the last thing written was U+FFFD for invalid bytes
	err  error
}

func (s *utf8Stream) write(b []byte) {
	s.pend = append(s.pend, b...)
	s.drain(false)
}

func (s *utf8Stream) flush() { s.drain(true) }

func (s *utf8Stream) drain(final bool) {
	var out []byte
	for len(s.pend) > 0 && (final || utf8.FullRune(s.pend)) {
		r, size := utf8.DecodeRune(s.pend)
		if r == utf8.RuneError && size <= 1 {
			if !s.bad {
				out = append(out, "\uFFFD"...)
			}
			s.bad = true
		} else {
			out = append(out, s.pend[:size]...)
			s.bad = false
		}
		s.pend = s.pend[size:]
	}
	if len(out) > 0 && s.err == nil {
		_, s.err = s.w.Write(out)
	}
}

func runEval(args []string) error {
	fs := newFlags("eval")
	ckpt := fs.String("checkpoint", "", "model checkpoint (model.safetensors)")
	path := fs.String("data", "", "UTF-8 text or llm.c .bin token shard")
	batch := fs.Int("batch", 8, "B windows per batch")
	seq := fs.Int("seq", 0, "T tokens per window (0: the model's maximum)")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("--data is required")
	}
	toks, err := data.Load(*path)
	if err != nil {
		return err
	}
	m, err := loadCheckpoint(*ckpt, be)
	if err != nil {
		return err
	}
	if *seq == 0 {
		*seq = m.Config.MaxSeq
	}
	if *batch < 1 || *seq < 1 || *seq > m.Config.MaxSeq {
		return fmt.Errorf("--batch %d must be >= 1 and --seq %d in [1, %d]", *batch, *seq, m.Config.MaxSeq)
	}
	for i, t := range toks {
		if int(t) >= m.Config.Vocab {
			return fmt.Errorf("%s: token %d at %d is outside the model's vocabulary of %d", *path, t, i, m.Config.Vocab)
		}
	}
	l, err := data.NewLoader(toks, *batch, *seq)
	if err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	loss, err := train.EvalLoss(m, l, *batch, *seq, 0)
	if err != nil {
		return err
	}
	if math.IsNaN(float64(loss)) || math.IsInf(float64(loss), 0) {
		return fmt.Errorf("the loss over %s is %v: the model's outputs are not finite", *path, loss)
	}
	fmt.Printf("{\"loss\": %.6f, \"batches\": %d, \"batch\": %d, \"seq\": %d}\n", loss, l.Batches(), *batch, *seq)
	return nil
}
