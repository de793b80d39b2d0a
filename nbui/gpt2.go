package nbui

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/hub"
	"github.com/druto/druto/pkg/train"
)

// SmallGPT2 is the model notebook 05 builds when the Hub cannot be reached:
// GPT-2's vocabulary and tokenizer, 2 layers of 64 channels.
var SmallGPT2 = gpt.Config{Vocab: train.PaddedVocab(data.GPT2Vocab), MaxSeq: 128, Layers: 2, Heads: 2, Channels: 64}

// GPT2 returns the model file of the Hugging Face model name (e.g.
// "gpt2"): pulled into the Hugging Face cache (HF_HOME, HF_HUB_CACHE;
// nothing is downloaded when it is there already), or, when the Hub cannot
// be reached (no network, or HF_HUB_OFFLINE and an empty cache), a small
// GPT-2 (SmallGPT2, initialised from seed 35) that it builds and saves in
// dir. One note says which, in lang.
func GPT2(lang, name, dir string) (string, error) {
	c, err := hub.FromEnv()
	if err != nil {
		return "", err
	}
	c.MaxRetries, c.RetryWait = 2, 500*time.Millisecond
	if !c.Offline {
		Note(lang, "Asking the Hugging Face Hub for %s (GPT-2 is about 550 MB; nothing is downloaded when the cache holds it).", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := c.Pull(ctx, name, "", nil)
	if err == nil {
		Note(lang, "%s (commit %s) is in the Hugging Face cache: %s", name, s.Commit[:12], s.Dir)
		return s.Path("model.safetensors"), nil
	}
	if !hub.Unreachable(err) {
		return "", err
	}
	path := filepath.Join(dir, "small-gpt2.safetensors")
	if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if _, err := train.SaveModel(path, SmallGPT2, gpt.InitParams(SmallGPT2, 35)); err != nil {
			return "", err
		}
	}
	cause := strings.TrimPrefix(err.Error(), "hub: ")
	if i := strings.Index(cause, ";"); i > 0 {
		cause = cause[:i]
	}
	if lang == "bn" { // the resolver's own words are English: say it in Bangla
		cause = Sprintf(lang, "the Hugging Face Hub cannot be reached")
	}
	Note(lang, "No network (%s): the cells below use a small GPT-2 that this notebook built and saved, with GPT-2's tokenizer and random weights (%s, %d parameters): %s",
		cause, SmallGPT2, SmallGPT2.NumParams(), path)
	return path, nil
}
