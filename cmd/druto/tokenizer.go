package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/druto/druto/nbui"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("tokenizer", "train a byte-level BPE on a corpus (druto tokenizer train --vocab N), or write an llm.c token shard (druto tokenizer shard --out FILE)", runTokenizer)
}

// tokenizerFlag adds --tokenizer to fs.
func tokenizerFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("tokenizer", "", "bytes, gpt2 or a BPE file from 'druto tokenizer train' ("+what+")")
}

// encodeProgress returns a progress function for tokenising name: a line
// updated in place on a terminal, a line at the start and the end otherwise
// (saying that the tokens will be cached when cached is set).
func encodeProgress(name string, tok data.Tokenizer, cached bool) (func(done, total int), func(tokens int, cache string)) {
	start := time.Now()
	tty := term.IsTerminal(int(os.Stderr.Fd()))
	started := false
	update := func(done, total int) {
		if !started {
			started = true
			if !tty {
				once := ""
				if cached {
					once = " once; the tokens are cached"
				}
				fmt.Fprintf(os.Stderr, "druto: tokenising %s with %s (%.1f MB)%s\n", name, tok.Name(), float64(total)/1e6, once)
			}
		}
		if tty {
			fmt.Fprintf(os.Stderr, "\rdruto: tokenising %s with %s: %3.0f%% of %.1f MB", name, tok.Name(), 100*float64(done)/float64(total), float64(total)/1e6)
		}
	}
	finish := func(tokens int, cache string) {
		if !started {
			if cache != "" {
				fmt.Fprintf(os.Stderr, "druto: %s tokens of %s from the cache %s\n", tok.Name(), name, cache)
			}
			return
		}
		if tty {
			fmt.Fprintln(os.Stderr)
		}
		where := ""
		if cache != "" {
			where = "; cached in " + cache
		}
		fmt.Fprintf(os.Stderr, "druto: %d %s tokens in %s%s\n", tokens, tok.Name(), time.Since(start).Round(time.Millisecond), where)
	}
	return update, finish
}

func runTokenizer(args []string) error {
	if len(args) > 0 && args[0] == "shard" {
		return runTokenizerShard(args[1:])
	}
	if len(args) == 0 || args[0] != "train" {
		return fmt.Errorf("usage: druto tokenizer train --vocab N [--data FILE] [--out FILE]\n" +
			"       druto tokenizer shard --out FILE [--tokenizer gpt2] [--tokens N] [--data FILE]")
	}
	fs := newFlags("tokenizer train")
	vocab := fs.Int("vocab", 1024, "vocabulary size: 256 bytes plus vocab-256 merges (257..65536)")
	path := fs.String("data", "", "UTF-8 text to learn from (default: the built-in bilingual corpus)")
	seed := fs.Uint64("seed", 1337, "seed of the built-in corpus (train's default is 1337)")
	out := fs.String("out", "tokenizer.bpe", "file to write (use it with --tokenizer FILE)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *vocab <= data.VocabSize || *vocab > 1<<16 {
		return fmt.Errorf("--vocab %d must be in %d..%d", *vocab, data.VocabSize+1, 1<<16)
	}
	text, source := []byte(nil), "the built-in corpus"
	if *path == "" {
		text = data.Corpus(*seed, train.CorpusBytes)
	} else {
		if _, err := data.Load(*path); err != nil { // the checks and messages of a text file
			return err
		}
		b, err := os.ReadFile(*path)
		if err != nil {
			return err
		}
		text, source = b, *path
	}
	start := time.Now()
	bpe, err := data.TrainBPE(text, *vocab)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := bpe.Save(*out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "druto: learned %d merges on %s (%.1f MB) in %s; wrote %s\n",
		bpe.Vocab()-data.VocabSize, source, float64(len(text))/1e6, time.Since(start).Round(time.Millisecond), *out)
	fmt.Printf("tokens per character on %s:\n", source)
	fmt.Printf("  %-22s %8s %8s %8s\n", "tokenizer", "all", "English", "Bangla")
	g, err := data.GPT2()
	if err != nil {
		return err
	}
	for _, tok := range []data.Tokenizer{data.Bytes{}, g, bpe} {
		all, en, bn, err := data.TokensPerChar(tok, text)
		if err != nil {
			return err
		}
		name := tok.Name()
		if tok == data.Tokenizer(bpe) {
			name = fmt.Sprintf("bpe (vocab %d)", bpe.Vocab())
		}
		fmt.Printf("  %-22s %8s %8s %8s\n", name, perChar(all), perChar(en), perChar(bn))
	}
	return nil
}

// runTokenizerAndInit settles train's tokenizer and model shape: with
// --init the shape (and, unless --tokenizer says otherwise, the tokenizer)
// come from the checkpoint; without it the tokenizer is --tokenizer, or
// bytes (gpt2 for a preset with GPT-2's vocabulary), and the vocabulary
// grows to PaddedVocab of the tokenizer's when the preset's is smaller. A
// perChar formats tokens per character; 0 means the text has no character
// of that language, so there is no ratio to show.
func perChar(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

// --resume without --tokenizer takes the tokenizer of the run in out.
func runTokenizerAndInit(fs *flag.FlagSet, cfg *gpt.Config, spec, initPath string, resume bool, out string) (data.Tokenizer, *train.Checkpoint, error) {
	var ck *train.Checkpoint
	var tok data.Tokenizer
	var err error
	if spec != "" {
		if tok, err = data.ParseTokenizer(spec); err != nil {
			return nil, nil, fmt.Errorf("--tokenizer: %w", err)
		}
	}
	if initPath != "" {
		presetSet := false
		fs.Visit(func(f *flag.Flag) { presetSet = presetSet || f.Name == "preset" })
		switch {
		case resume:
			return nil, nil, fmt.Errorf("--init starts a new run from a checkpoint's weights and --resume continues a run: give one of them")
		case presetSet:
			return nil, nil, fmt.Errorf("--init takes the model shape from %s; leave out --preset", initPath)
		}
		if ck, err = train.LoadCheckpoint(initPath); err != nil {
			return nil, nil, err
		}
		*cfg = ck.Config
		if tok == nil {
			tok = ck.Tokenizer
		}
		if tok == nil {
			return nil, nil, fmt.Errorf("%s records no tokenizer: pass --tokenizer", initPath)
		}
		if tok.Vocab() > cfg.Vocab {
			return nil, nil, fmt.Errorf("the %s tokenizer has %d tokens, more than %s's vocabulary of %d", tok.Name(), tok.Vocab(), initPath, cfg.Vocab)
		}
		return tok, ck, nil
	}
	if tok == nil && resume {
		// As strict as sample and eval: a model that cannot be read (a
		// corrupt tokenizer among its metadata) stops the resume, instead
		// of a run going on with bytes and rewriting it. A missing one is
		// the resume's to report.
		ck, err := train.LoadCheckpoint(filepath.Join(out, train.ModelFile))
		switch {
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, nil, fmt.Errorf("--resume: %w", err)
		case err == nil && ck.Tokenizer != nil:
			tok = ck.Tokenizer
		}
	}
	if tok == nil {
		tok = data.Bytes{}
		if cfg.Vocab >= data.GPT2Vocab {
			if tok, err = data.GPT2(); err != nil {
				return nil, nil, err
			}
		}
	}
	cfg.Vocab = max(cfg.Vocab, train.PaddedVocab(tok.Vocab()))
	return tok, nil, nil
}

// runTokenizerShard writes an llm.c token shard (uint16 tokens after a
// header of 256 int32: magic 20240520, version 1, count), the file that
// druto train --data, druto bench --data and PyTorch's anchor (TOKENS=)
// all read, so that both sides of a comparison train on the same tokens.
func runTokenizerShard(args []string) error {
	fs := newFlags("tokenizer shard")
	out := fs.String("out", "", "shard to write (.bin)")
	spec := tokenizerFlag(fs, "default: gpt2")
	path := fs.String("data", "", "UTF-8 text to tokenise (default: the built-in bilingual corpus, as long as --tokens needs)")
	n := fs.Int("tokens", 0, "tokens to write (0: all of --data; 4,000,000 of the built-in corpus)")
	seed := fs.Uint64("seed", 1337, "seed of the built-in corpus (train's default is 1337)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required (e.g. --out tokens.bin)")
	}
	if *n < 0 || *n > math.MaxInt32 {
		return fmt.Errorf("--tokens %d must be in 0..%d (0: all)", *n, math.MaxInt32)
	}
	if *spec == "" {
		*spec = "gpt2"
	}
	tok, err := data.ParseTokenizer(*spec)
	if err != nil {
		return err
	}
	if tok.Vocab() > 1<<16 {
		return fmt.Errorf("the %s tokenizer has %d tokens; a shard holds ids below 65536", tok.Name(), tok.Vocab())
	}
	var toks []int32
	source := nbui.Sprintf(cliLang(), "the built-in corpus")
	if *path != "" {
		if toks, _, err = data.LoadTokens(*path, tok, "", nil); err != nil {
			return err
		}
		source = *path
	} else {
		if *n == 0 {
			*n = 4_000_000
		}
		// Text for about 2 bytes a token (GPT-2: 1.6 on this corpus), more while short.
		for size := 2 * *n; len(toks) < *n; size *= 2 {
			if toks, err = data.EncodeProgress(tok, data.Corpus(*seed, size), nil); err != nil {
				return err
			}
		}
	}
	if *n > 0 {
		if len(toks) < *n {
			return fmt.Errorf("%s holds %d %s tokens, fewer than --tokens %d: give more text or fewer tokens", source, len(toks), tok.Name(), *n)
		}
		toks = toks[:*n]
	}
	if err := data.WriteShard(*out, toks); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, nbui.Sprintf(cliLang(), "druto: wrote %d %s tokens of %s to %s", len(toks), tok.Name(), source, *out))
	return nil
}

// cliLang is the language of the CLI's localized lines: $DRUTO_LANG when it
// is en or bn, else en.
func cliLang() string {
	if l := os.Getenv(nbui.LangEnv); l == "bn" {
		return l
	}
	return "en"
}
