package plotting

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	gtfont "github.com/go-text/typesetting/font"
)

// ErrNoFont is returned when no Bengali font is found. Its text names the
// Debian packages that provide one.
var ErrNoFont = errors.New("plotting: no Bengali font found: install one " +
	"(Debian/Ubuntu: apt-get install fonts-noto-core fonts-lohit-beng-bengali) " +
	"or set DRUTO_FONT to a .ttf/.otf file")

// FontEnv is the environment variable that names the Bengali font file to use.
const FontEnv = "DRUTO_FONT"

// wellKnownFonts are tried in order after DRUTO_FONT: Noto Sans Bengali
// (Debian/Ubuntu fonts-noto-core, Fedora, Arch), then Lohit Bengali (Debian
// fonts-lohit-beng-bengali, Fedora).
var wellKnownFonts = []string{
	"/usr/share/fonts/truetype/noto/NotoSansBengali-Regular.ttf",
	"/usr/share/fonts/opentype/noto/NotoSansBengali-Regular.ttf",
	"/usr/share/fonts/google-noto/NotoSansBengali-Regular.ttf",
	"/usr/share/fonts/noto/NotoSansBengali-Regular.ttf",
	"/usr/share/fonts/truetype/lohit-bengali/Lohit-Bengali.ttf",
	"/usr/share/fonts/lohit-bengali/Lohit-Bengali.ttf",
}

// fontDirs returns the folders walked last, for any *Bengali*.ttf/.otf.
var fontDirs = func() []string {
	dirs := []string{"/usr/share/fonts", "/usr/local/share/fonts"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", "share", "fonts"), filepath.Join(home, ".fonts"))
	}
	return dirs
}

// FindFont returns the path of the Bengali font the Bangla labels use. The
// search, first match wins:
//
//  1. the file named by $DRUTO_FONT (an error if it is not a usable font);
//  2. Noto Sans Bengali, then Lohit Bengali, at their usual paths under
//     /usr/share/fonts (see the Debian packages fonts-noto-core and
//     fonts-lohit-beng-bengali);
//  3. a walk of /usr/share/fonts, /usr/local/share/fonts,
//     ~/.local/share/fonts and ~/.fonts for files named *Bengali*.ttf or
//     *Bengali*.otf (any case), preferring Sans, then Regular, then by path.
//
// Every candidate must parse and map the letter ক. When none is found the
// error wraps ErrNoFont.
func FindFont() (string, error) {
	if p := os.Getenv(FontEnv); p != "" {
		if _, err := loadFont(p); err != nil {
			return "", fmt.Errorf("plotting: %s=%s: %w", FontEnv, p, err)
		}
		return p, nil
	}
	for _, p := range wellKnownFonts {
		if _, err := loadFont(p); err == nil {
			return p, nil
		}
	}
	var found []string
	for _, dir := range fontDirs() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable folders are skipped, not fatal
			}
			name := strings.ToLower(d.Name())
			if !d.IsDir() && strings.Contains(name, "bengali") &&
				(strings.HasSuffix(name, ".ttf") || strings.HasSuffix(name, ".otf")) {
				found = append(found, p)
			}
			return nil
		})
	}
	rank := func(p string) int {
		n := strings.ToLower(filepath.Base(p))
		r := 0
		if !strings.Contains(n, "sans") {
			r += 2
		}
		if !strings.Contains(n, "regular") {
			r++
		}
		return r
	}
	sort.SliceStable(found, func(i, j int) bool {
		if ri, rj := rank(found[i]), rank(found[j]); ri != rj {
			return ri < rj
		}
		return found[i] < found[j]
	})
	for _, p := range found {
		if _, err := loadFont(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoFont
}

// fontFiles caches the bytes of fonts that loaded, by path.
var fontFiles = struct {
	sync.Mutex
	m map[string][]byte
}{m: make(map[string][]byte)}

// loadFont reads the font at path, checks that it parses and has Bengali
// letters, and caches its bytes.
func loadFont(path string) ([]byte, error) {
	fontFiles.Lock()
	defer fontFiles.Unlock()
	if b, ok := fontFiles.m[path]; ok {
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	face, err := gtfont.ParseTTF(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a TrueType/OpenType font: %w", err)
	}
	if _, ok := face.NominalGlyph('ক'); !ok {
		return nil, errors.New("font has no Bengali letters")
	}
	fontFiles.m[path] = b
	return b, nil
}
