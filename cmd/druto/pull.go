package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/druto/druto/pkg/hub"
	"github.com/druto/druto/pkg/train"
)

func init() {
	register("pull", "download a model from the Hugging Face Hub into its cache (druto pull gpt2)", runPull)
}

// hubClient returns the Hub client the environment configures, with
// progress and notices on stderr.
func hubClient() (*hub.Client, error) {
	c, err := hub.FromEnv()
	if err != nil {
		return nil, err
	}
	c.Progress = os.Stderr
	c.Terminal = term.IsTerminal(int(os.Stderr.Fd()))
	c.Notice = func(msg string) { fmt.Fprintln(os.Stderr, "druto: "+msg) }
	return c, nil
}

// splitName splits NAME[@REVISION].
func splitName(s string) (name, rev string) {
	name, rev, _ = strings.Cut(s, "@")
	return name, rev
}

// hubName reports whether arg, which is not an existing path, reads as a
// model name on the Hub (gpt2, openai-community/gpt2-medium, gpt2@main)
// rather than a file that is missing: no leading '.', '/' or '~', no file
// extension of a checkpoint, a valid repository id.
func hubName(arg string) bool {
	name, _ := splitName(arg)
	if strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, "~") {
		return false
	}
	for _, ext := range []string{".safetensors", ".bin", ".pt", ".pth", ".json", ".ckpt"} {
		if strings.HasSuffix(strings.ToLower(name), ext) {
			return false
		}
	}
	return hub.ValidRepo(name) == nil
}

// resolveCheckpoint returns the model file a --checkpoint or --init value
// names: the value itself when it is an existing path (a path still means
// a file) or does not read as a Hub name, else the model.safetensors of
// that Hub model, pulled into the Hugging Face cache unless already there
// (HF_HUB_OFFLINE: the cache only).
func resolveCheckpoint(arg string) (string, error) {
	if arg == "" {
		return "", nil
	}
	if _, err := os.Stat(arg); err == nil || !errors.Is(err, fs.ErrNotExist) || !hubName(arg) {
		return arg, nil
	}
	c, err := hubClient()
	if err != nil {
		return "", err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	name, rev := splitName(arg)
	s, err := c.Pull(ctx, name, rev, nil)
	if err != nil {
		return "", fmt.Errorf("no file %s here, and as a Hugging Face model: %v", arg, strings.TrimPrefix(err.Error(), "hub: "))
	}
	if s.Fetched > 0 {
		fmt.Fprintf(os.Stderr, "druto: %s (commit %s) is in %s\n", arg, s.Commit[:12], s.Dir)
	}
	return s.Path("model.safetensors"), nil
}

func runPull(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			args = args[:1]
		} else {
			return fmt.Errorf("usage: druto pull NAME[@REVISION] [--all] (e.g. druto pull gpt2, druto pull openai-community/gpt2-medium)")
		}
	}
	fs := newFlags("pull")
	all := fs.Bool("all", false, "every file of the repository (default: the weights, config.json and the tokenizer files)")
	check := fs.Bool("check", true, "read the model's header and config.json after the download and print its shape")
	var arg string
	if !strings.HasPrefix(args[0], "-") {
		arg, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	name, rev := splitName(arg)
	if err := hub.ValidRepo(name); err != nil {
		return fmt.Errorf("%v; e.g. druto pull gpt2", strings.TrimPrefix(err.Error(), "hub: "))
	}
	c, err := hubClient()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	files := []string(nil)
	if *all {
		files = hub.AllFiles
	}
	start := time.Now()
	s, err := c.Pull(ctx, name, rev, files)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted; run druto pull %s again to resume", arg)
	}
	if err != nil {
		return err
	}
	how := fmt.Sprintf("%.1f MB downloaded in %s", float64(s.Fetched)/1e6, time.Since(start).Round(time.Millisecond))
	switch {
	case s.Cached:
		how = "from the cache (offline)"
	case s.Fetched == 0:
		how = "all already in the cache"
	}
	at := s.Revision
	if at != s.Commit {
		at += " = commit " + s.Commit[:12]
	}
	fmt.Fprintf(os.Stderr, "druto: %s at %s: %d files (%s), %s\n", name, at, len(s.Files), strings.Join(s.Files, ", "), how)
	if *check {
		if p := s.Path("model.safetensors"); fileExists(p) {
			cfg, err := train.ReadModelConfig(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "druto: %s is GPT-2 %s (%d parameters); use it as --checkpoint %s or --init %s\n", name, cfg, cfg.NumParams(), arg, arg)
		}
	}
	fmt.Println(s.Dir)
	return nil
}

func fileExists(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}
