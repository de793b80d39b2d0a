package plotting

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/go-text/typesetting/di"
	gtfont "github.com/go-text/typesetting/font"
	ot "github.com/go-text/typesetting/font/opentype"
	"github.com/go-text/typesetting/language"
	"github.com/go-text/typesetting/shaping"
	xfont "golang.org/x/image/font"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// TextHandler is a gonum text.Handler that shapes Bengali with HarfBuzz
// (github.com/go-text/typesetting) and draws the shaped glyph outlines as
// filled vg paths, so conjuncts (প্র, ক্ষ) and pre-base vowel signs (ি, ে)
// come out right in PNG, SVG and PDF alike; gonum's own text drawing does
// not shape.
//
// A line without Bengali is measured and drawn exactly as gonum's
// text.Plain does it (canvas text). A line with Bengali is split into runs
// by script: Bengali letters, and the spaces, digits and punctuation between
// them, are shaped with the Bengali font; the other runs (Latin, units) use
// the plot's own font, which also covers Bengali fonts without Latin
// letters (Noto Sans Bengali has none); the whole line is filled as one
// path, so it is not selectable in SVG or PDF, and an SVG viewer cannot
// swap in another font for part of it.
//
// Vertical metrics (Extents) are the larger of the plot font's and the
// Bengali font's, so Bengali vowel signs and below-base forms fit in the
// space gonum reserves for a line. A TextHandler is safe for concurrent use.
type TextHandler struct {
	plain text.Plain // the plot fonts (Latin runs), gonum's default cache
	path  string     // the Bengali font file

	mu       sync.Mutex
	face     *gtfont.Face
	upem     float64
	asc      float64 // Bengali ascender, font units, > 0
	desc     float64 // Bengali descender, font units, > 0
	gap      float64 // Bengali line gap, font units
	shaper   shaping.HarfbuzzShaper
	outlines map[gtfont.GID][]segment
	shaped   map[string][]glyph // shaped Bengali runs by text, cleared when large
	sbuf     sfnt.Buffer        // for the plot fonts' glyphs
	latin    map[latinKey][]segment
}

var _ text.Handler = (*TextHandler)(nil)

// segment is one piece of a glyph outline in font units, y up; quadratic
// curves are stored as cubics (vgpdf draws quadratics inexactly).
type segment struct {
	op  ot.SegmentOp // MoveTo, LineTo or CubeTo
	pts [3][2]float32
}

// glyph is one shaped glyph: its ID and pen offset and advance, font units.
type glyph struct {
	id           gtfont.GID
	x, y, adv    float64
	cluster      int // index of the first rune of the glyph's cluster in the run's line
	clusterRunes int
}

// NewTextHandler returns a TextHandler that shapes Bengali with the font at
// fontPath, or with the font FindFont finds when fontPath is "". Latin runs
// use gonum's default font cache (the Liberation fonts).
func NewTextHandler(fontPath string) (*TextHandler, error) {
	if fontPath == "" {
		p, err := FindFont()
		if err != nil {
			return nil, err
		}
		fontPath = p
	}
	b, err := loadFont(fontPath)
	if err != nil {
		return nil, fmt.Errorf("plotting: font %s: %w", fontPath, err)
	}
	face, err := gtfont.ParseTTF(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("plotting: font %s: %w", fontPath, err)
	}
	h := &TextHandler{
		plain:    text.Plain{Fonts: font.DefaultCache},
		path:     fontPath,
		face:     face,
		upem:     float64(face.Upem()),
		outlines: make(map[gtfont.GID][]segment),
		shaped:   make(map[string][]glyph),
		latin:    make(map[latinKey][]segment),
	}
	if ext, ok := face.FontHExtents(); ok {
		h.asc, h.desc, h.gap = float64(ext.Ascender), -float64(ext.Descender), float64(ext.LineGap)
	} else {
		h.asc, h.desc = 0.9*h.upem, 0.3*h.upem
	}
	return h, nil
}

// FontPath returns the Bengali font file the handler shapes with.
func (h *TextHandler) FontPath() string { return h.path }

// Cache returns the cache of the plot fonts used for non-Bengali runs.
func (h *TextHandler) Cache() *font.Cache { return h.plain.Fonts }

// Extents returns the larger of the Latin font's and the Bengali font's
// vertical metrics at fnt's size.
func (h *TextHandler) Extents(fnt font.Font) font.Extents {
	e := h.plain.Extents(fnt)
	s := fnt.Size / vg.Length(h.upem)
	e.Ascent = max(e.Ascent, vg.Length(h.asc)*s)
	e.Descent = max(e.Descent, vg.Length(h.desc)*s)
	e.Height = max(e.Height, vg.Length(h.asc+h.desc+h.gap)*s)
	return e
}

// Lines splits txt into lines, as text.Plain does.
func (h *TextHandler) Lines(txt string) []string { return h.plain.Lines(txt) }

// Box returns the width of the shaped line txt, and the ascent and descent
// of Extents.
func (h *TextHandler) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	e := h.Extents(fnt)
	return h.width(txt, fnt), e.Ascent, e.Descent
}

// Draw draws txt with the given style at pt, aligned and rotated as
// text.Plain does.
func (h *TextHandler) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	txt = strings.TrimRight(txt, "\n")
	if len(txt) == 0 {
		return
	}
	c.SetColor(sty.Color)
	if sty.Rotation != 0 {
		c.Push()
		c.Rotate(sty.Rotation)
	}
	sin64, cos64 := math.Sincos(sty.Rotation)
	cos, sin := vg.Length(cos64), vg.Length(sin64)
	pt.X, pt.Y = pt.Y*sin+pt.X*cos, pt.Y*cos-pt.X*sin

	e := h.Extents(sty.Font)
	lines := h.Lines(txt)
	ht := (e.Ascent+e.Descent)*vg.Length(len(lines)) + (e.Height-e.Ascent-e.Descent)*vg.Length(len(lines)-1)
	// The bottom line's baseline sits where text.Plain puts it; the lines
	// above are one Extents.Height apart, the pitch Box heights assume.
	base := pt.Y + ht*vg.Length(sty.YAlign) - e.Ascent + sty.Font.Size
	for i, line := range lines {
		x := pt.X + vg.Length(sty.XAlign)*h.width(line, sty.Font)
		y := base + vg.Length(len(lines)-1-i)*e.Height
		h.drawLine(c, line, sty.Font, vg.Point{X: x, Y: y})
	}
	if sty.Rotation != 0 {
		c.Pop()
	}
}

// run is a piece of a line drawn with one font.
type run struct {
	start, end int  // rune range in the line
	bengali    bool // shaped with the Bengali font
}

// itemize splits a line into Bengali and other runs. Strong Bengali letters
// are Bengali; common and inherited runes (spaces, digits, punctuation,
// ZWJ/ZWNJ, combining marks) join the Bengali run when Bengali is on both
// sides of them (or on the one side there is) and the Bengali font has the
// glyph, and a closing bracket goes with its opening one; all else is drawn
// with the plot font.
func (h *TextHandler) itemize(rs []rune) []run {
	strong := make([]int, len(rs)) // +1 Bengali, -1 other, 0 neutral
	for i, r := range rs {
		switch sc := language.LookupScript(r); {
		case sc == language.Bengali:
			strong[i] = 1
		case sc == language.Common || sc == language.Inherited:
		default:
			strong[i] = -1
		}
	}
	beng := make([]bool, len(rs))
	prev := 0
	var opened []bool // decisions of the open brackets, innermost last
	for i := range rs {
		if strong[i] != 0 {
			beng[i] = strong[i] > 0
			prev = strong[i]
			continue
		}
		if strings.ContainsRune(")]}", rs[i]) && len(opened) > 0 {
			// A closing bracket is drawn like its opening one.
			beng[i] = opened[len(opened)-1]
			opened = opened[:len(opened)-1]
			continue
		}
		next := 0
		for j := i + 1; j < len(rs) && next == 0; j++ {
			next = strong[j]
		}
		if prev >= 0 && next >= 0 && prev+next > 0 {
			_, ok := h.face.NominalGlyph(rs[i])
			beng[i] = ok || language.LookupScript(rs[i]) == language.Inherited
		}
		if strings.ContainsRune("([{", rs[i]) {
			opened = append(opened, beng[i])
		}
	}
	var runs []run
	for i := range rs {
		if len(runs) > 0 && runs[len(runs)-1].bengali == beng[i] {
			runs[len(runs)-1].end = i + 1
			continue
		}
		runs = append(runs, run{start: i, end: i + 1, bengali: beng[i]})
	}
	return runs
}

// shapeRun shapes rs[start:end] with the Bengali font (rs is the context)
// and returns its glyphs in visual order. The caller holds h.mu.
func (h *TextHandler) shapeRun(rs []rune, start, end int) []glyph {
	key := string(rs[start:end]) + "\x00" + string(rs)
	if g, ok := h.shaped[key]; ok {
		return g
	}
	out := h.shaper.ShapeNoExtents(shaping.Input{
		Text: rs, RunStart: start, RunEnd: end,
		Direction: di.DirectionLTR,
		Face:      h.face,
		// Shape at one unit a font unit: Shape rounds Size up to whole
		// numbers, so a small size would lose precision.
		Size:     fixed.I(int(h.upem)),
		Script:   language.Bengali,
		Language: language.NewLanguage("bn"),
	})
	gs := make([]glyph, len(out.Glyphs))
	for i, g := range out.Glyphs {
		gs[i] = glyph{
			id:           g.GlyphID,
			x:            float64(g.XOffset) / 64,
			y:            float64(g.YOffset) / 64,
			adv:          float64(g.Advance) / 64,
			cluster:      g.ClusterIndex,
			clusterRunes: g.RuneCount,
		}
	}
	if len(h.shaped) > 4096 {
		clear(h.shaped)
	}
	h.shaped[key] = gs
	return gs
}

// width returns the advance of one line at fnt's size.
func (h *TextHandler) width(line string, fnt font.Font) vg.Length {
	rs := []rune(line)
	var w vg.Length
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.itemize(rs) {
		if !r.bengali {
			face := h.plain.Fonts.Lookup(fnt, fnt.Size)
			w += face.Width(string(rs[r.start:r.end]))
			continue
		}
		var adv float64
		for _, g := range h.shapeRun(rs, r.start, r.end) {
			adv += g.adv
		}
		w += vg.Length(adv) * fnt.Size / vg.Length(h.upem)
	}
	return w
}

// drawLine draws one line with its baseline origin at o. A line without
// Bengali is drawn as text.Plain draws it (canvas text); a line with Bengali
// is filled as one path, its Latin runs too, so that a viewer substituting
// the plot font (SVG) cannot make the runs overlap.
func (h *TextHandler) drawLine(c vg.Canvas, line string, fnt font.Font, o vg.Point) {
	rs := []rune(line)
	h.mu.Lock()
	defer h.mu.Unlock()
	runs := h.itemize(rs)
	bengali := false
	for _, r := range runs {
		bengali = bengali || r.bengali
	}
	if !bengali {
		c.FillString(h.plain.Fonts.Lookup(fnt, fnt.Size), o, line)
		return
	}
	scale := float64(fnt.Size) / h.upem
	x, y := float64(o.X), float64(o.Y)
	var path vg.Path
	for _, r := range runs {
		if !r.bengali {
			x += h.appendLatin(&path, fnt, rs[r.start:r.end], x, y)
			continue
		}
		pen := 0.0
		for _, g := range h.shapeRun(rs, r.start, r.end) {
			h.appendGlyph(&path, g.id, x+(pen+g.x)*scale, y+g.y*scale, scale)
			pen += g.adv
		}
		x += pen * scale
	}
	if len(path) > 0 {
		c.Fill(path)
	}
}

// appendLatin adds the outlines of rs in the plot font fnt, placed as
// gonum's font.Face.Width measures them (advances and kerning, no
// hinting), from the baseline origin (x, y), and returns the advance. The
// caller holds h.mu.
func (h *TextHandler) appendLatin(p *vg.Path, fnt font.Font, rs []rune, x, y float64) float64 {
	face := h.plain.Fonts.Lookup(fnt, fnt.Size)
	sf := face.Face
	if sf == nil {
		return 0
	}
	upem := fixed.Int26_6(sf.UnitsPerEm())
	scale := float64(fnt.Size) / float64(upem)
	pen := 0 // font units
	var prev sfnt.GlyphIndex
	for i, r := range rs {
		idx, err := sf.GlyphIndex(&h.sbuf, r)
		if err != nil {
			continue
		}
		if i > 0 {
			if k, err := sf.Kern(&h.sbuf, prev, idx, upem, xfont.HintingNone); err == nil {
				pen += int(k)
			}
		}
		key := latinKey{sf, idx}
		segs, ok := h.latin[key]
		if !ok {
			segs = sfntOutline(sf, &h.sbuf, idx, upem)
			h.latin[key] = segs
		}
		h.appendSegments(p, segs, x+float64(pen)*scale, y, scale)
		if adv, err := sf.GlyphAdvance(&h.sbuf, idx, upem, xfont.HintingNone); err == nil {
			pen += int(adv)
		}
		prev = idx
	}
	return float64(pen) * scale
}

// latinKey names a glyph of a plot font.
type latinKey struct {
	font  *sfnt.Font
	glyph sfnt.GlyphIndex
}

// sfntOutline returns the outline of glyph idx of f in font units, y up,
// with quadratics as cubics; nil when it has none.
func sfntOutline(f *sfnt.Font, buf *sfnt.Buffer, idx sfnt.GlyphIndex, ppem fixed.Int26_6) []segment {
	segs, err := f.LoadGlyph(buf, idx, ppem, nil)
	if err != nil {
		return nil
	}
	// At ppem = units per em, 26.6 coordinates are font units.
	pt := func(q fixed.Point26_6) [2]float32 { return [2]float32{float32(q.X), -float32(q.Y)} }
	out := make([]segment, 0, len(segs))
	var cur [2]float32
	for _, s := range segs {
		switch s.Op {
		case sfnt.SegmentOpMoveTo:
			cur = pt(s.Args[0])
			out = append(out, segment{op: ot.SegmentOpMoveTo, pts: [3][2]float32{cur}})
		case sfnt.SegmentOpLineTo:
			cur = pt(s.Args[0])
			out = append(out, segment{op: ot.SegmentOpLineTo, pts: [3][2]float32{cur}})
		case sfnt.SegmentOpQuadTo:
			c1, c2, end := quadToCubic(cur, pt(s.Args[0]), pt(s.Args[1]))
			out = append(out, segment{op: ot.SegmentOpCubeTo, pts: [3][2]float32{c1, c2, end}})
			cur = end
		case sfnt.SegmentOpCubeTo:
			cur = pt(s.Args[2])
			out = append(out, segment{op: ot.SegmentOpCubeTo, pts: [3][2]float32{pt(s.Args[0]), pt(s.Args[1]), cur}})
		}
	}
	return out
}

// quadToCubic returns the control points and end of the cubic equal to the
// quadratic from p0 through control q to p3.
func quadToCubic(p0, q, p3 [2]float32) (c1, c2, end [2]float32) {
	c1 = [2]float32{p0[0] + 2.0/3*(q[0]-p0[0]), p0[1] + 2.0/3*(q[1]-p0[1])}
	c2 = [2]float32{p3[0] + 2.0/3*(q[0]-p3[0]), p3[1] + 2.0/3*(q[1]-p3[1])}
	return c1, c2, p3
}

// appendGlyph adds the outline of Bengali glyph id, scaled and moved to
// (x, y), to p. The caller holds h.mu.
func (h *TextHandler) appendGlyph(p *vg.Path, id gtfont.GID, x, y, scale float64) {
	segs, ok := h.outlines[id]
	if !ok {
		segs = outline(h.face, id)
		h.outlines[id] = segs
	}
	h.appendSegments(p, segs, x, y, scale)
}

// appendSegments adds an outline in font units, scaled and moved to (x, y),
// to p as closed contours.
func (h *TextHandler) appendSegments(p *vg.Path, segs []segment, x, y, scale float64) {
	pt := func(q [2]float32) vg.Point {
		return vg.Point{X: vg.Length(x + float64(q[0])*scale), Y: vg.Length(y + float64(q[1])*scale)}
	}
	open := false
	for _, s := range segs {
		switch s.op {
		case ot.SegmentOpMoveTo:
			if open {
				p.Close()
			}
			p.Move(pt(s.pts[0]))
			open = true
		case ot.SegmentOpLineTo:
			p.Line(pt(s.pts[0]))
		case ot.SegmentOpCubeTo:
			p.CubeTo(pt(s.pts[0]), pt(s.pts[1]), pt(s.pts[2]))
		}
	}
	if open {
		p.Close()
	}
}

// outline returns the outline of glyph id in font units with quadratic
// segments turned into the equal cubics; nil for glyphs without one
// (spaces).
func outline(face *gtfont.Face, id gtfont.GID) []segment {
	o, ok := face.GlyphDataOutline(id)
	if !ok {
		return nil
	}
	segs := make([]segment, 0, len(o.Segments))
	var cur [2]float32 // current point
	for _, s := range o.Segments {
		a := s.Args
		switch s.Op {
		case ot.SegmentOpMoveTo, ot.SegmentOpLineTo:
			segs = append(segs, segment{op: s.Op, pts: [3][2]float32{{a[0].X, a[0].Y}}})
			cur = [2]float32{a[0].X, a[0].Y}
		case ot.SegmentOpQuadTo:
			c1, c2, end := quadToCubic(cur, [2]float32{a[0].X, a[0].Y}, [2]float32{a[1].X, a[1].Y})
			segs = append(segs, segment{op: ot.SegmentOpCubeTo, pts: [3][2]float32{c1, c2, end}})
			cur = end
		case ot.SegmentOpCubeTo:
			segs = append(segs, segment{op: s.Op, pts: [3][2]float32{{a[0].X, a[0].Y}, {a[1].X, a[1].Y}, {a[2].X, a[2].Y}}})
			cur = [2]float32{a[2].X, a[2].Y}
		}
	}
	return segs
}

// ApplyTextHandler sets h as the text handler of p's title, axis labels,
// tick labels and legend. Text drawn by plotters (such as plotter.Labels)
// keeps its own style.
func ApplyTextHandler(p *plot.Plot, h text.Handler) {
	p.TextHandler = h
	p.Title.TextStyle.Handler = h
	p.X.Label.TextStyle.Handler = h
	p.Y.Label.TextStyle.Handler = h
	p.X.Tick.Label.Handler = h
	p.Y.Tick.Label.Handler = h
	p.Legend.TextStyle.Handler = h
}

// InkTop returns how far above the baseline the ink of the line txt
// reaches at fnt's size: the highest point of its shaped Bengali glyphs'
// outlines (vowel signs such as ি and the reph rise above the font's
// ascent), and the plot font's ascent for its other runs.
func (h *TextHandler) InkTop(txt string, fnt font.Font) vg.Length {
	rs := []rune(txt)
	top := vg.Length(0)
	h.mu.Lock()
	defer h.mu.Unlock()
	scale := fnt.Size / vg.Length(h.upem)
	for _, r := range h.itemize(rs) {
		if !r.bengali {
			top = max(top, h.plain.Extents(fnt).Ascent)
			continue
		}
		for _, g := range h.shapeRun(rs, r.start, r.end) {
			segs, ok := h.outlines[g.id]
			if !ok {
				segs = outline(h.face, g.id)
				h.outlines[g.id] = segs
			}
			for _, s := range segs {
				n := 1
				if s.op == ot.SegmentOpCubeTo {
					n = 3
				}
				for _, p := range s.pts[:n] {
					top = max(top, vg.Length(float64(p[1])+g.y)*scale)
				}
			}
		}
	}
	return top
}

// titleHandler is the handler of a Bangla plot's title. gonum puts the top
// of the title's box at the canvas's top edge, and TextHandler.Draw places
// the baseline as text.Plain does (a font size below the box's top), which
// for a font whose ascent is less than its size puts the top of the ink
// above the box. titleHandler lowers the title until its shaped ink
// (InkTop) is a tenth of the font size below the edge, and its Box grows by
// as much, so the plot below makes room.
type titleHandler struct{ *TextHandler }

// lower is how far the title txt must move down.
func (h titleHandler) lower(txt string, fnt font.Font) vg.Length {
	e := h.Extents(fnt)
	var ink vg.Length
	for _, line := range h.Lines(txt) {
		ink = max(ink, h.InkTop(line, fnt))
	}
	// Relative to the box's top: the first baseline sits at
	// fnt.Size - 2·Ascent - Descent + Descent (Draw with YAlign -1).
	return max(0, fnt.Size+ink+fnt.Size/10-2*e.Ascent)
}

func (h titleHandler) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	width, height, depth = h.TextHandler.Box(txt, fnt)
	return width, height + h.lower(txt, fnt), depth
}

// Draw draws the title as TextHandler.Draw does, lowered (titleHandler).
func (h titleHandler) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	if sty.Rotation == 0 && sty.YAlign == text.YTop {
		pt.Y -= h.lower(txt, sty.Font)
	}
	h.TextHandler.Draw(c, txt, sty, pt)
}
