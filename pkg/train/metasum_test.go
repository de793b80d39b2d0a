package train

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/gpt"
)

// editMeta rewrites the metadata of the safetensors file at path (the data,
// and so its checksum, stay as they were).
func editMeta(t *testing.T, path string, edit func(map[string]string)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint64(b)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+hl], &h); err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(h["__metadata__"], &meta); err != nil {
		t.Fatal(err)
	}
	edit(meta)
	h["__metadata__"], _ = json.Marshal(meta)
	hj, _ := json.Marshal(h)
	for len(hj)%8 != 0 {
		hj = append(hj, ' ')
	}
	out := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hj))), hj...)
	if err := os.WriteFile(path, append(out, b[8+hl:]...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMetadataChecksum: the checksum covers the metadata. A file whose
// config or tokenizer was edited is refused as corrupt (the doubling BPE of
// issue 41 among them, before it is expanded); one written before the
// metadata had a checksum still loads, its tokenizer bounded by its parser.
func TestMetadataChecksum(t *testing.T) {
	cfg := gpt.Config{Vocab: 256, MaxSeq: 16, Layers: 1, Heads: 2, Channels: 8}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if _, err := SaveModel(good, cfg, gpt.InitParams(cfg, 1)); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(good)
	if _, err := LoadCheckpoint(good); err != nil {
		t.Fatal(err)
	}
	var doubling strings.Builder
	doubling.WriteString("druto bpe v1\n97 97\n")
	for k := 1; k < 40; k++ {
		doubling.WriteString(strconv.Itoa(255+k) + " " + strconv.Itoa(255+k) + "\n")
	}
	for _, c := range []struct {
		name string
		edit func(map[string]string)
		want string // "" loads
	}{
		{"config edited", func(m map[string]string) { m["n_layer"] = "2" }, "does not match its checksum"},
		{"tokenizer added", func(m map[string]string) { m[tokenizerKey], m[bpeKey] = "bpe", doubling.String() }, "does not match its checksum"},
		{"checksum removed, doubling tokenizer", func(m map[string]string) {
			delete(m, metaSumKey)
			m[tokenizerKey], m[bpeKey] = "bpe", doubling.String()
		}, "longer than 64 MiB together"},
		{"written before the metadata checksum", func(m map[string]string) { delete(m, metaSumKey) }, ""},
	} {
		p := filepath.Join(dir, "edited.safetensors")
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		editMeta(t, p, c.edit)
		_, err := LoadCheckpoint(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a corrupt checkpoint saying %q", c.name, err, c.want)
		}
	}
}
