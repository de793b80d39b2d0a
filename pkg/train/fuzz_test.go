package train

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/gpt"
)

// FuzzParseSafetensors: the checkpoint reader never panics, and whatever it
// accepts decodes to tensors whose data fit their shapes. The seed corpus
// (testdata/fuzz/FuzzParseSafetensors) holds a real small checkpoint and
// damaged copies of it.
func FuzzParseSafetensors(f *testing.F) {
	cfg := gpt.Config{Vocab: 8, MaxSeq: 4, Layers: 1, Heads: 1, Channels: 4}
	path := filepath.Join(f.TempDir(), "m.safetensors")
	if _, err := SaveModel(path, cfg, gpt.InitParams(cfg, 1)); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, _, err := parseSafetensors(b)
		if err != nil {
			if bytes.Equal(b, good) {
				t.Fatalf("the file SaveModel wrote does not parse: %v", err)
			}
			return
		}
		for _, x := range ts {
			n := 1
			for _, d := range x.Shape {
				n *= d
			}
			if n != len(x.Data) {
				t.Fatalf("%s: %d values for shape %v", x.Name, len(x.Data), x.Shape)
			}
		}
	})
}
