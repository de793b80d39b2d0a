package plotting

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/go-fonts/liberation/liberationsansregular"
)

// withSearch points the font search at dirs only (no well-known paths) for
// the rest of the test.
func withSearch(t *testing.T, dirs ...string) {
	t.Helper()
	known, walk := wellKnownFonts, fontDirs
	wellKnownFonts = nil
	fontDirs = func() []string { return dirs }
	t.Cleanup(func() { wellKnownFonts, fontDirs = known, walk })
	t.Setenv(FontEnv, "")
}

func TestNoFontError(t *testing.T) {
	withSearch(t, t.TempDir())
	_, err := FindFont()
	if !errors.Is(err, ErrNoFont) {
		t.Fatalf("FindFont with no fonts: %v, want ErrNoFont", err)
	}
	for _, hint := range []string{"fonts-noto-core", "fonts-lohit-beng-bengali", "DRUTO_FONT"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q does not name %s", err, hint)
		}
	}
	// A Bangla plot cannot be made without a font, and says why.
	if _, err := LossCurves(fixtureRuns(), Lang("bn")); !errors.Is(err, ErrNoFont) {
		t.Errorf("LossCurves(bn) without fonts: %v, want ErrNoFont", err)
	}
	// An English plot needs no Bengali font.
	if _, err := LossCurves(fixtureRuns()); err != nil {
		t.Errorf("LossCurves(en) without fonts: %v", err)
	}
	// English labels with Bengali data (a run label) need one.
	runs := fixtureRuns()
	runs[0].Label = "ফিউজড"
	if _, err := LossCurves(runs); !errors.Is(err, ErrNoFont) {
		t.Errorf("LossCurves with a Bengali run label and no fonts: %v, want ErrNoFont", err)
	}
}

func TestFontEnv(t *testing.T) {
	dir := t.TempDir()
	withSearch(t, dir)
	latin := filepath.Join(dir, "latin.ttf")
	junk := filepath.Join(dir, "junk.ttf")
	if err := os.WriteFile(latin, liberationsansregular.TTF, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("not a font"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, msg string }{
		{filepath.Join(dir, "missing.ttf"), "no such file"},
		{junk, "not a TrueType"},
		{latin, "no Bengali letters"},
	} {
		t.Setenv(FontEnv, c.path)
		_, err := FindFont()
		if err == nil || !strings.Contains(err.Error(), FontEnv) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("DRUTO_FONT=%s: error %v, want one naming DRUTO_FONT and %q", filepath.Base(c.path), err, c.msg)
		}
	}
}

func TestFontSearchOrder(t *testing.T) {
	real := needFont(t)
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	withSearch(t, dir)
	put := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	put("a/Lohit-Bengali.ttf")
	put("b/SerifBengali-Bold.ttf")
	sans := put("z/NotoSansBengali-Regular.ttf")
	if err := os.WriteFile(filepath.Join(dir, "a", "BrokenSansBengali-Regular.otf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := FindFont()
	if err != nil || got != sans {
		t.Errorf("walk found %q, %v; want the Sans Regular one %q", got, err, sans)
	}

	// The well-known paths come before the walk, DRUTO_FONT before both.
	known := put("known/Lohit-Bengali.ttf")
	wellKnownFonts = []string{filepath.Join(dir, "absent.ttf"), known}
	if got, _ := FindFont(); got != known {
		t.Errorf("FindFont = %q, want the well-known path %q", got, known)
	}
	env := put("env/AnyName.ttf")
	t.Setenv(FontEnv, env)
	if got, _ := FindFont(); got != env {
		t.Errorf("FindFont = %q, want $DRUTO_FONT %q", got, env)
	}
}
