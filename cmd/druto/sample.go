package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("sample", "generate text from a checkpoint", runSample)
	register("eval", "print the mean loss of a checkpoint over a data file as JSON", runEval)
}

// loadCheckpoint opens a device and loads a model checkpoint (druto's, or
// a GPT-2 that transformers wrote) onto it. The tokenizer is spec when not
// empty, else the one the checkpoint records or implies.
func loadCheckpoint(path, spec string, be *backend) (*gpt.Model, data.Tokenizer, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("--checkpoint is required (e.g. out/model.safetensors from druto train, or gpt2 from the Hugging Face Hub)")
	}
	path, err := resolveCheckpoint(path) // pull.go: a Hub name becomes its cached file
	if err != nil {
		return nil, nil, err
	}
	ck, err := train.LoadCheckpoint(path)
	if err != nil {
		return nil, nil, err
	}
	tok := ck.Tokenizer
	if spec != "" {
		if tok, err = data.ParseTokenizer(spec); err != nil {
			return nil, nil, fmt.Errorf("--tokenizer: %w", err)
		}
		if tok.Vocab() > ck.Config.Vocab {
			return nil, nil, fmt.Errorf("--tokenizer %s has %d tokens, more than the checkpoint's vocabulary of %d", spec, tok.Vocab(), ck.Config.Vocab)
		}
	}
	if tok == nil {
		return nil, nil, fmt.Errorf("%s records no tokenizer and its vocabulary of %d is neither bytes nor GPT-2's: pass --tokenizer", path, ck.Config.Vocab)
	}
	dev, _, err := be.open()
	if err != nil {
		return nil, nil, err
	}
	m, err := ck.Open(dev)
	return m, tok, err
}

func runSample(args []string) error {
	fs := newFlags("sample")
	ckpt := fs.String("checkpoint", "", "model checkpoint (model.safetensors from druto train, a transformers GPT-2, or a Hub name: gpt2, gpt2-medium, ORG/NAME[@REV])")
	prompt := fs.String("prompt", "\n", "text to continue")
	n := fs.Int("tokens", 200, "tokens to generate")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: greedy)")
	topK := fs.Int("top-k", 0, "draw among the K most likely tokens only (0: all)")
	topP := fs.Float64("top-p", 0, "draw among the fewest most likely tokens whose probability reaches P (0 or 1: all)")
	seed := fs.Uint64("seed", 1, "sampling seed")
	stream := fs.Bool("stream", true, "print the text as it is generated (--stream=false: all at the end)")
	spec := tokenizerFlag(fs, "default: the one the checkpoint records")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 0 {
		return fmt.Errorf("--tokens %d must not be negative", *n)
	}
	if *n > maxSampleTokens {
		return fmt.Errorf("--tokens %d is more than %d; generate in several runs", *n, maxSampleTokens)
	}
	if !utf8.ValidString(*prompt) {
		return fmt.Errorf("--prompt is not valid UTF-8; pass UTF-8 text")
	}
	o := train.SampleOptions{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), Seed: *seed}
	switch {
	case !(*temp >= 0 && *temp <= math.MaxFloat32):
		return fmt.Errorf("--temperature %g must be a finite number >= 0 (0: greedy)", *temp)
	case *topK < 0:
		return fmt.Errorf("--top-k %d must be >= 0 (0: off)", *topK)
	case !(*topP >= 0 && *topP <= 1):
		return fmt.Errorf("--top-p %g must be in [0, 1] (0 or 1: off)", *topP)
	}
	m, tok, err := loadCheckpoint(*ckpt, *spec, be)
	if err != nil {
		return err
	}
	s, err := train.NewSampler(m, tok, o)
	if err != nil {
		return err
	}
	var w io.Writer
	if *stream {
		w = os.Stdout
		fmt.Print(*prompt)
	}
	text, err := s.Sample(*prompt, *n, w)
	if *stream {
		fmt.Println() // also before an error, which then starts its own line
	}
	if err != nil {
		return err
	}
	if !*stream {
		fmt.Println(*prompt + text)
	}
	return nil
}

// maxSampleTokens bounds druto sample --tokens.
const maxSampleTokens = 1 << 20

func runEval(args []string) error {
	fs := newFlags("eval")
	ckpt := fs.String("checkpoint", "", "model checkpoint (model.safetensors, or a Hub name: gpt2, ORG/NAME[@REV])")
	path := fs.String("data", "", "UTF-8 text or llm.c .bin token shard")
	batch := fs.Int("batch", 8, "B windows per batch")
	seq := fs.Int("seq", 0, "T tokens per window (0: the model's maximum)")
	spec := tokenizerFlag(fs, "default: the one the checkpoint records")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("--data is required")
	}
	m, tok, err := loadCheckpoint(*ckpt, *spec, be)
	if err != nil {
		return err
	}
	update, finish := encodeProgress(*path, tok, false)
	toks, _, err := data.LoadTokens(*path, tok, "", update)
	if err != nil {
		return err
	}
	finish(len(toks), "")
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
	// Per character too, so that tokenizers compare: the evaluated targets
	// are tokens 1..n·B·T; their characters are the bytes that start one.
	nt := l.Batches() * *batch * *seq
	b, err := tok.Decode(toks[1 : nt+1])
	if err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	chars := 0
	for _, c := range b {
		if c&0xc0 != 0x80 {
			chars++
		}
	}
	perChar := float64(loss) * float64(nt) / float64(max(chars, 1))
	fmt.Printf("{\"loss\": %.6f, \"loss_per_char\": %.6f, \"tokens\": %d, \"chars\": %d, \"tokenizer\": %q, \"batches\": %d, \"batch\": %d, \"seq\": %d}\n",
		loss, perChar, nt, chars, tok.Name(), l.Batches(), *batch, *seq)
	return nil
}
