package nbui

import (
	"fmt"
	"html"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/druto/druto/internal/nblang"
)

// Table is a table of strings with a header row and an optional caption.
// Its header and caption are translated into the table's language when
// added; cells are shown as given.
type Table struct {
	Lang    string
	Caption string
	Header  []string
	Rows    [][]string
	links   map[[2]int]Link // cells added as a Link, by row and column
}

// Link is a table cell that links to a file or page: its text in a
// notebook, "text (url)" as plain text.
type Link struct{ Text, URL string }

// String is the link as plain text, "text (url)".
func (l Link) String() string { return l.Text + " (" + l.URL + ")" }

// NewTable returns an empty table in language lang with the given column
// headers (English text, translated for Bangla).
func NewTable(lang string, header ...string) *Table {
	t := &Table{Lang: lang}
	for _, h := range header {
		t.Header = append(t.Header, Sprintf(lang, h))
	}
	return t
}

// WithCaption sets the caption (English text, translated for Bangla) and
// returns t.
func (t *Table) WithCaption(caption string, args ...any) *Table {
	t.Caption = Sprintf(t.Lang, caption, args...)
	return t
}

// Add appends a row; each cell is formatted with fmt's %v (floats as %.4g).
// A row shorter than the header is padded with empty cells.
func (t *Table) Add(cells ...any) {
	row := make([]string, max(len(cells), len(t.Header)))
	for i, c := range cells {
		switch v := c.(type) {
		case string:
			row[i] = v
		case Link:
			row[i] = v.String()
			if t.links == nil {
				t.links = map[[2]int]Link{}
			}
			t.links[[2]int{len(t.Rows), i}] = v
		case float64:
			row[i] = fmt.Sprintf("%.4g", v)
		case float32:
			row[i] = fmt.Sprintf("%.4g", v)
		default:
			row[i] = fmt.Sprint(v)
		}
	}
	t.Rows = append(t.Rows, row)
}

// numeric reports whether a cell reads as a number (right-aligned).
func numeric(s string) bool {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, "×"), "%"))
	if s == "" || s == "-" {
		return false
	}
	digits := 0
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			digits++
		case strings.ContainsRune("+-.,eE ", r):
		default:
			return false
		}
	}
	return digits > 0
}

// HTML renders the table as an HTML table, numbers right-aligned and every
// string escaped.
func (t *Table) HTML() string {
	var b strings.Builder
	b.WriteString(`<table class="druto">`)
	if t.Caption != "" {
		fmt.Fprintf(&b, `<caption style="text-align:left;font-weight:bold">%s</caption>`, html.EscapeString(Digits(t.Lang, t.Caption)))
	}
	if len(t.Header) > 0 {
		b.WriteString("<thead><tr>")
		for _, h := range t.Header {
			fmt.Fprintf(&b, `<th style="text-align:left">%s</th>`, html.EscapeString(h))
		}
		b.WriteString("</tr></thead>")
	}
	b.WriteString("<tbody>")
	for r, row := range t.Rows {
		b.WriteString("<tr>")
		for i, c := range row {
			align := "left"
			if numeric(c) {
				align = "right"
			}
			cell := html.EscapeString(Digits(t.Lang, c))
			if l, ok := t.links[[2]int{r, i}]; ok {
				cell = fmt.Sprintf(`<a href="%s">%s</a>`, html.EscapeString(l.URL), html.EscapeString(l.Text))
			}
			fmt.Fprintf(&b, `<td style="text-align:%s">%s</td>`, align, cell)
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	return b.String()
}

// Text renders the table as aligned plain text, the caption on its own line.
func (t *Table) Text() string {
	var b strings.Builder
	if t.Caption != "" {
		b.WriteString(Digits(t.Lang, t.Caption) + "\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	line := func(cells []string) {
		for _, c := range cells {
			fmt.Fprint(tw, strings.ReplaceAll(c, "\t", " ")+"\t")
		}
		fmt.Fprintln(tw)
	}
	if len(t.Header) > 0 {
		line(t.Header)
	}
	for _, r := range t.Rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = Digits(t.Lang, c)
		}
		line(cells)
	}
	tw.Flush()
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// Show displays the table: as HTML (with the text as its plain alternative)
// in a notebook, as text on standard output elsewhere.
func (t *Table) Show() {
	if out.notebook() {
		out.display("", t.HTML(), t.Text())
		out.flush()
		return
	}
	fmt.Fprint(out.writer(), t.Text())
}

// Sprintf formats format with args after translating format into lang:
// for "bn", the Bangla text the message table gives for the English format
// (the English itself when it has none).
func Sprintf(lang, format string, args ...any) string {
	return nblang.Sprintf(bangla, lang, format, args...)
}

// Note shows a sentence in the notebook's language: Sprintf(lang, format,
// args...) as a paragraph in a notebook, a line on standard output elsewhere.
func Note(lang, format string, args ...any) {
	s := Digits(lang, Sprintf(lang, format, args...))
	if out.notebook() {
		out.display("", "<p>"+strings.ReplaceAll(html.EscapeString(s), "\n", "<br>")+"</p>", s)
		out.flush()
		return
	}
	fmt.Fprintln(out.writer(), s)
}
