package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/druto/druto/internal/boundedread"
	"github.com/druto/druto/internal/hostmem"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device/cpu"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("sample", "generate text from a checkpoint", runSample)
	register("eval", "print the mean loss of a checkpoint over a data file as JSON", runEval)
}

// loadCheckpoint opens a device and loads a model checkpoint (druto's, or
// a GPT-2 that transformers wrote) onto it in fp32. The tokenizer is spec
// when not empty, else the one the checkpoint records or implies.
func loadCheckpoint(path, spec string, be *backend) (*gpt.Model, data.Tokenizer, error) {
	ck, tok, err := readCheckpoint(path, spec)
	if err != nil {
		return nil, nil, err
	}
	dev, _, err := be.open()
	if err != nil {
		return nil, nil, err
	}
	m, err := ck.Open(dev)
	return m, tok, err
}

// readCheckpoint reads a checkpoint and settles its tokenizer (loadCheckpoint).
func readCheckpoint(path, spec string) (*train.Checkpoint, data.Tokenizer, error) {
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
	return ck, tok, nil
}

func runSample(args []string) error {
	fs := newFlags("sample")
	ckpt := fs.String("checkpoint", "", "model checkpoint (model.safetensors from druto train, a transformers GPT-2, or a Hub name: gpt2, gpt2-medium, ORG/NAME[@REV])")
	prompt := fs.String("prompt", "\n", "text to continue")
	prompts := fs.String("prompts", "", "file of prompts, one a line, continued in batches of --batch (instead of --prompt)")
	batch := fs.Int("batch", 0, "sequences generated together (0: every prompt of --prompts at once, else 1; with --prompt, N draws of it with seeds seed, seed+1, ...)")
	n := fs.Int("tokens", 200, "tokens to generate")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: greedy)")
	topK := fs.Int("top-k", 0, "draw among the K most likely tokens only (0: all)")
	topP := fs.Float64("top-p", 0, "draw among the fewest most likely tokens whose probability reaches P (0 or 1: all)")
	seed := fs.Uint64("seed", 1, "sampling seed (sequence b of a batch draws with seed+b)")
	prec := fs.String("amp", "fp32", "precision policy: fp32, bf16 or fp16 (the weights and the key/value cache in its working type)")
	stream := fs.Bool("stream", true, "print the text as it is generated, for one sequence (--stream=false: all at the end)")
	stats := fs.Bool("stats", false, "print the time to the first token and the tokens per second to stderr")
	dryRun := fs.Bool("dry-run", false, "print the memory generation needs (weights, key/value cache) and exit")
	ids := fs.Bool("ids", false, "print the prompt's and the generated token ids as JSON instead of text, drawn from every id (no UTF-8 rule)")
	promptIDs := fs.String("prompt-ids", "", "the prompt as comma-separated token ids (instead of --prompt)")
	spec := tokenizerFlag(fs, "default: the one the checkpoint records")
	be := backendFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	started := time.Now()
	var pids []int32
	if *promptIDs != "" {
		for i, f := range strings.Split(*promptIDs, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
			if err != nil || v < 0 {
				return fmt.Errorf("--prompt-ids: item %d %q is not a token id (a number >= 0)", i+1, f)
			}
			pids = append(pids, int32(v))
		}
		if *prompts != "" {
			return fmt.Errorf("--prompt-ids and --prompts both given: use one")
		}
	}
	switch {
	case *n < 1:
		return fmt.Errorf("--tokens %d must be at least 1", *n)
	case *n > maxSampleTokens:
		return fmt.Errorf("--tokens %d is more than %d; generate in several runs", *n, maxSampleTokens)
	case *batch < 0 || *batch > maxSampleBatch:
		return fmt.Errorf("--batch %d must be in [0, %d]", *batch, maxSampleBatch)
	case !utf8.ValidString(*prompt):
		return fmt.Errorf("--prompt is not valid UTF-8; pass UTF-8 text")
	case !(*temp >= 0 && *temp <= math.MaxFloat32):
		return fmt.Errorf("--temperature %g must be a finite number >= 0 (0: greedy)", *temp)
	case *topK < 0:
		return fmt.Errorf("--top-k %d must be >= 0 (0: off)", *topK)
	case !(*topP >= 0 && *topP <= 1):
		return fmt.Errorf("--top-p %g must be in [0, 1] (0 or 1: off)", *topP)
	}
	policy, err := amp.ParsePolicy(*prec)
	if err != nil {
		return fmt.Errorf("--amp: %w", err)
	}
	if policy == amp.FP8 {
		return fmt.Errorf("--amp fp8 is a training policy (the blocks' GEMMs in FP8); generation reads the bf16 weights: sample with --amp bf16")
	}
	texts := []string{*prompt}
	if *prompts != "" {
		if texts, err = readPrompts(*prompts); err != nil {
			return err
		}
	}
	B := *batch
	switch {
	case B == 0 && *prompts != "":
		B = len(texts)
	case B == 0:
		B = 1
	case *prompts == "": // N draws of one prompt
		for len(texts) < B {
			texts = append(texts, *prompt)
		}
	}
	B = min(B, len(texts))
	ck, tok, err := readCheckpoint(*ckpt, *spec)
	if err != nil {
		return err
	}
	need := int64(ck.Config.NumParams())*4 + gpt.DecodeBytes(ck.Config, B, policy) // fp32 weights
	if policy.Mixed() {
		need += int64(ck.Config.NumParams()) * int64(policy.Half().Size())
	}
	if *dryRun {
		fmt.Printf("%s, %s, batch %d: weights %.1f MiB, key/value cache %.1f MiB (%d positions a sequence), decode buffers %.1f MiB, total %.1f MiB\n",
			ck.Config, policy, B, float64(int64(ck.Config.NumParams())*4)/(1<<20),
			float64(gpt.KVCacheBytes(ck.Config, B, ck.Config.MaxSeq, policy))/(1<<20), ck.Config.MaxSeq,
			float64(gpt.DecodeBytes(ck.Config, B, policy)-gpt.KVCacheBytes(ck.Config, B, ck.Config.MaxSeq, policy))/(1<<20),
			float64(need)/(1<<20))
		return nil
	}
	dev, _, err := be.open()
	if err != nil {
		return err
	}
	if _, host := dev.(*cpu.Device); host { // Go cannot recover from running out of memory: check first
		if err := hostmem.Check(fmt.Sprintf("generating %d sequences at once with %s", B, ck.Config), need); err != nil {
			return fmt.Errorf("%w: lower --batch", err)
		}
	}
	m, err := ck.OpenAs(dev, policy)
	if err != nil {
		return err
	}
	defer m.Close()
	loaded := time.Since(started)
	o := train.SampleOptions{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), Seed: *seed}
	if *ids {
		tok = train.Unmasked(m.Config.Vocab)
	}
	s, err := train.NewSampler(m, tok, o)
	if err != nil {
		return err
	}
	defer s.Close()
	report := func(group int) {
		if !*stats {
			return
		}
		st := s.Stats()
		how := "recomputing the window each token"
		if st.Cached {
			how = "key/value cache"
		}
		switch {
		case st.Graph == "graph":
			how += fmt.Sprintf(", one CUDA graph a step (%.1f launches a token)", st.LaunchesPerToken)
		case st.Graph != "":
			how += ", no CUDA graph (" + strings.TrimPrefix(st.Graph, "plain: ") + ")"
		}
		fmt.Fprintf(os.Stderr, "load %.2f s, time to first token %.3f s (prefill of %d prompts), decode %.1f tokens/s (%d sequences × %d tokens, %s, %s, %s)\n",
			loaded.Seconds(), (loaded + st.Prefill).Seconds(), group, st.DecodeRate(), st.Batch, st.Tokens, how, policy, dev.Name())
	}
	if *ids || pids != nil {
		if pids == nil {
			if pids, err = ck.Tokenizer.Encode([]byte(*prompt)); err != nil {
				return fmt.Errorf("--prompt: %w", err)
			}
		}
		prompts := make([][]int32, B)
		for i := range prompts {
			prompts[i] = pids
		}
		out, err := s.GenerateBatch(prompts, *n, nil)
		if err != nil {
			return err
		}
		if *ids {
			for _, g := range out {
				j, _ := json.Marshal(map[string][]int32{"prompt_ids": pids, "generated_ids": g})
				fmt.Println(string(j))
			}
		} else {
			for i, g := range out {
				if i > 0 {
					fmt.Println("----")
				}
				fmt.Println(data.DecodeText(tok, append(append([]int32{}, pids...), g...)))
			}
		}
		report(B)
		return nil
	}
	one := len(texts) == 1 && *stream
	var emit func(int, string) error
	if one {
		fmt.Print(texts[0])
		emit = func(_ int, piece string) error { _, err := io.WriteString(os.Stdout, piece); return err }
	}
	for lo := 0; lo < len(texts); lo += B {
		group := texts[lo:min(lo+B, len(texts))]
		ids := make([][]int32, len(group))
		for i, t := range group {
			if ids[i], err = tok.Encode([]byte(t)); err != nil {
				return fmt.Errorf("prompt %d: %w", lo+i+1, err)
			}
		}
		out, err := s.GenerateBatch(ids, *n, emit)
		if one {
			fmt.Println() // also before an error, which then starts its own line
		}
		if err != nil {
			return err
		}
		if !one {
			for i, t := range group {
				if lo+i > 0 {
					fmt.Println("----")
				}
				fmt.Println(t + data.DecodeText(tok, out[i]))
			}
		}
		report(len(group))
	}
	return nil
}

// readPrompts reads a file of prompts, one a line (a trailing newline and
// CR line ends ignored; \n inside a line is not unescaped).
func readPrompts(path string) ([]string, error) {
	b, err := boundedread.ReadFile(path, maxPromptsBytes)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("--prompts %s is not valid UTF-8; save it as UTF-8 text", path)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l = strings.TrimSuffix(l, "\r"); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--prompts %s holds no prompt; write one prompt a line", path)
	}
	return out, nil
}

const (
	maxSampleBatch  = 4096     // bounds --batch (and the sequences of one --prompts batch)
	maxPromptsBytes = 64 << 20 // bounds the --prompts file
)

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
	if *seq == 0 {
		*seq = m.Config.MaxSeq
	}
	if *batch < 1 || *seq < 1 || *seq > m.Config.MaxSeq {
		return fmt.Errorf("--batch %d must be >= 1 and --seq %d in [1, %d]", *batch, *seq, m.Config.MaxSeq)
	}
	if *batch > maxStepTokens / *seq {
		return fmt.Errorf("--batch %d x --seq %d is more than %d tokens a batch (2^31: a batch's token offsets are int32); use a smaller --batch", *batch, *seq, maxStepTokens)
	}
	// The forward's activations (counted as a training step's, an upper
	// bound) and the batch's ids must fit before the first is allocated.
	need := gpt.MemoryFor(m.Config, *batch, *seq, amp.FP32).Activations + 8*int64(*batch**seq)
	if err := freeCheck(m.Device(), need, fmt.Sprintf("evaluating %s at B %d T %d", m.Config, *batch, *seq), "lower --batch or --seq"); err != nil {
		return err
	}
	update, finish := encodeProgress(*path, tok, false)
	toks, _, err := data.LoadTokens(*path, tok, "", update)
	if err != nil {
		return err
	}
	finish(len(toks), "")
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
