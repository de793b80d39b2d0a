// Package plotting draws druto's records with gonum/plot: loss curves,
// speed-ups, throughput, memory, utilisation and bandwidth, with English or
// Bangla labels shaped correctly, shown inline in GoNB or saved to files.
//
// # Records
//
// ReadMetrics reads the JSON lines pkg/train writes (one Metric a step) into
// a Run; ReadBench reads the JSON file pkg/bench writes (a Bench with its
// BenchRecords). Each helper makes a complete plot from them in one call,
// with a title, axis labels with units and a legend:
//
//	run, err := plotting.ReadMetrics("runs/fused.jsonl")
//	p, err := plotting.LossCurves([]plotting.Run{run}, plotting.LogY(true))
//	err = plotting.Save(p, "loss.svg", 0, 0) // .png, .svg or .pdf
//	err = plotting.Show(p)                   // inline in GoNB, no-op elsewhere
//
// The helpers are LossCurves, SpeedUp, Throughput, Memory, Utilisation and
// Bandwidth; options (Lang, BanglaDigits, LogY, Smooth, Title, Grouped)
// change them.
//
// # Bangla
//
// Lang("bn") writes every label from the package's one message table in
// Bangla; BanglaDigits(true) writes tick labels and the values on bars with
// ০-৯. The English and Bangla versions of a plot are the same plot but for
// its label strings. gonum draws text rune by rune, which breaks Bengali
// (conjuncts such as প্র and ক্ষ fall apart, the vowel signs ি and ে land
// after their consonant), so Bangla plots use TextHandler: it shapes with
// HarfBuzz (github.com/go-text/typesetting) and draws the glyph outlines as
// paths, which renders the same in PNG, SVG and PDF. Any plot whose text
// contains Bengali (a run label, say) uses it too; plots without Bengali
// need no Bengali font.
//
// The Bengali font comes from the system, found by FindFont: $DRUTO_FONT,
// then Noto Sans Bengali and Lohit Bengali at their usual paths under
// /usr/share/fonts, then any *Bengali*.ttf/.otf under /usr/share/fonts,
// /usr/local/share/fonts, ~/.local/share/fonts or ~/.fonts. On Debian and
// Ubuntu: apt-get install fonts-noto-core fonts-lohit-beng-bengali. Without
// one, Bangla plots fail with ErrNoFont, which says so.
package plotting
