package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// TestBF16MomentsResume: a run with bf16 moments saves them as BF16 (half
// the state file's data of fp32 ones), resumes exactly (the same losses as
// the run straight through), and a resume under the other moment dtype
// converts: bf16 to fp32 exactly, fp32 to bf16 rounded to nearest.
func TestBF16MomentsResume(t *testing.T) {
	o := testOptions(8, amp.FP32)
	o.AdamState = tensor.BF16
	straight := runSteps(t, newTrainer(t, o), 8)
	dir := t.TempDir()
	o.OutDir = dir
	a, ms := resumedRun(t, o, 4)
	saved := snapshot(t, a) // the moments saved at step 4
	for i, m := range ms {
		if m.Loss != straight[i] {
			t.Errorf("step %d: resumed loss %v, straight %v", i+1, m.Loss, straight[i])
		}
	}
	// The state file written at step 8 holds BF16 moments.
	st16, err := os.Stat(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	// bf16 -> fp32: the same values.
	o32 := o
	o32.AdamState = tensor.F32
	dir4 := t.TempDir()
	o.OutDir, o32.OutDir = dir4, dir4
	a4 := newTrainer(t, o)
	if err := a4.Run(context.Background(), 4, nil); err != nil {
		t.Fatal(err)
	}
	var notes []string
	o32.Notice = func(msg string) { notes = append(notes, msg) }
	c := newTrainer(t, o32)
	if err := c.Resume(dir4); err != nil {
		t.Fatalf("fp32 resume of bf16 moments: %v", err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "moments are bf16, this run keeps them in fp32: converted") {
		t.Errorf("the conversion's notice: %q", notes)
	}
	got := snapshot(t, c)
	for k := 1; k < 3; k++ {
		for i, x := range got[k] {
			if x != saved[k][i] {
				t.Fatalf("moment %d element %d: %v after conversion, saved %v", k, i, x, saved[k][i])
			}
		}
	}
	// fp32 -> bf16: rounded to nearest; the fp32 state file is larger.
	if err := c.Run(context.Background(), 6, nil); err != nil {
		t.Fatal(err)
	}
	st32, err := os.Stat(filepath.Join(dir4, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := float64(testCfg.NumParams()); float64(st32.Size()-st16.Size()) < 0.9*4*n {
		t.Errorf("state files of %d (fp32) and %d (bf16) bytes: bf16 moments should save 4 bytes a parameter (%v)", st32.Size(), st16.Size(), 4*n)
	}
	want := snapshot(t, c)
	d := newTrainer(t, o)
	if err := d.Resume(dir4); err != nil {
		t.Fatalf("bf16 resume of fp32 moments: %v", err)
	}
	back := snapshot(t, d)
	for k := 1; k < 3; k++ {
		for i, x := range back[k] {
			if r := tensor.BF16ToF32(tensor.BF16FromF32(want[k][i])); x != r && !(math.IsNaN(float64(x)) && math.IsNaN(float64(r))) {
				t.Fatalf("moment %d element %d: %v, want %v rounded to bf16 (%v)", k, i, x, want[k][i], r)
			}
		}
	}
}
