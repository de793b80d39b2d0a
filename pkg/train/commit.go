package train

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/druto/druto/internal/atomicfile"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// A checkpoint is two files, ModelFile and StateFile, committed as one unit.
// The state file is the commit record: it names the checksum of its model.
// Save writes the new model under pendingModel first, then the state (the
// commit point), then renames the pending model over ModelFile. Whatever
// step a save is cut at (a kill, a full disk), the folder holds the previous
// pair, or the new state with its model still pending, which the next
// Resume (or Save, or Run) finishes by the same rename. ModelFile itself is
// always a complete model, the new one or the one before.
const pendingModel = ".model.safetensors.pending"

// pendingMetrics is the metrics log of a run that replaces another
// (Recipe.Fresh) until its first checkpoint: the old run's files stay
// untouched until then, so a run that fails before it (bad data, no
// memory, a kill) loses nothing. Its first save moves the log over
// MetricsFile after the commit point and before the pending model's rename,
// so that the committed pending model tells a recovery that the log is the
// new run's too (see recoverCheckpoint).
const pendingMetrics = ".metrics.jsonl.fresh"

// saveHook, when set (by tests), runs after each stage of a save ("model",
// "state"); an error from it stops the save right there, with nothing
// cleaned up, as a kill would.
var saveHook func(stage string) error

func hook(stage string) error {
	if saveHook == nil {
		return nil
	}
	return saveHook(stage)
}

// saveCheckpoint commits the model and state pair into dir (see
// pendingModel); extra is more model metadata (the tokenizer), dt the
// dtype the weights are stored in (0: F32), fp8 the fp8 policy's scaling
// state (nil: none). fresh says that dir's
// pendingMetrics is this run's log, to be moved over MetricsFile once the
// pair is committed.
func saveCheckpoint(dir string, cfg gpt.Config, params []float32, extra map[string]string, dt tensor.DType, st state, m, v []float32, fp8 *amp.FP8Scales, fresh bool) error {
	if err := recoverCheckpoint(dir, fresh); err != nil {
		return err
	}
	pending := filepath.Join(dir, pendingModel)
	if dt == 0 {
		dt = tensor.F32
	}
	sum, err := saveModelAs(pending, cfg, params, extra, dt)
	if err != nil {
		return err
	}
	if err := hook("model"); err != nil {
		return err
	}
	st.ModelSum = sum
	if err := saveState(filepath.Join(dir, StateFile), st, m, v, fp8); err != nil {
		os.Remove(pending) // not committed: the previous pair stands
		return err
	}
	if err := hook("state"); err != nil {
		return err
	}
	// Committed: from here on the pending model is the checkpoint's, and a
	// fresh run's log is the folder's.
	if fresh {
		if err := os.Rename(filepath.Join(dir, pendingMetrics), filepath.Join(dir, MetricsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("train: %w (the checkpoint is saved; the next resume finishes it)", err)
		}
		if err := hook("metrics"); err != nil {
			return err
		}
	}
	if err := os.Rename(pending, filepath.Join(dir, ModelFile)); err != nil {
		return fmt.Errorf("train: %w (the checkpoint is saved; the next resume finishes it)", err)
	}
	atomicfile.SyncDir(dir)
	return nil
}

// recoverCheckpoint finishes a save of dir that was cut after its commit
// point, drops a pending model that was never committed, and removes the
// temp files of writes that were cut short. A committed pending model with
// a pendingMetrics beside it is a fresh run's first save: the log moves
// over MetricsFile first. Otherwise pendingMetrics is the log of a fresh
// run cut before its first checkpoint, and is removed, unless live says it
// is the log of the run now saving.
func recoverCheckpoint(dir string, live bool) error {
	for _, name := range []string{ModelFile, StateFile, MetricsFile, pendingModel, pendingMetrics} {
		old, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*"))
		for _, p := range old {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("train: removing a stale temp file: %w", err)
			}
		}
	}
	logs := filepath.Join(dir, pendingMetrics)
	pending := filepath.Join(dir, pendingModel)
	if _, err := os.Lstat(pending); err != nil {
		return dropLog(logs, live)
	}
	_, _, sum, err := loadModel(pending)
	if err == nil {
		var meta map[string]string
		if _, meta, err = readSafetensors(filepath.Join(dir, StateFile), 8*maxParams); err == nil {
			var st state
			if st, err = parseState(meta); err == nil && st.ModelSum == sum {
				if !live {
					if err := os.Rename(logs, filepath.Join(dir, MetricsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return fmt.Errorf("train: finishing the checkpoint in %s: %w", dir, err)
					}
				}
				if err := os.Rename(pending, filepath.Join(dir, ModelFile)); err != nil {
					return fmt.Errorf("train: finishing the checkpoint in %s: %w", dir, err)
				}
				atomicfile.SyncDir(dir)
				return nil
			}
		}
	}
	// Not named by the state: a save cut before its commit point.
	if err := os.Remove(pending); err != nil {
		return fmt.Errorf("train: removing an uncommitted model: %w", err)
	}
	return dropLog(logs, live)
}

// dropLog removes the pendingMetrics at path of a fresh run that never
// reached its first checkpoint, unless live (the run now saving owns it).
func dropLog(path string, live bool) error {
	if live {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("train: removing the log of a run cut before its first checkpoint: %w", err)
	}
	return nil
}

// dataKey fingerprints training tokens: their count and SHA-256.
func dataKey(tokens []int32) string {
	h := sha256.New()
	buf := make([]byte, 0, 4096)
	for _, t := range tokens {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return fmt.Sprintf("%d tokens, sha256 %x", len(tokens), h.Sum(nil)[:8])
}
