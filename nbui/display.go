package nbui

import (
	"io"
	"os"

	"github.com/janpfeifer/gonb/gonbui"
	"github.com/janpfeifer/gonb/gonbui/protocol"
)

// sink is where output goes: the notebook (HTML, with a plain-text
// alternative) or a writer. Tests replace it.
type sink interface {
	notebook() bool
	// display shows a new output; with a non-empty id it creates or updates
	// the output block of that id in place.
	display(id, html, text string)
	writer() io.Writer
	// flush waits until the notebook has received every output sent so far.
	flush()
}

// jupyter sends to GoNB when running inside a notebook, else writes to stdout.
type jupyter struct{}

func (jupyter) notebook() bool { return gonbui.IsNotebook }

func (jupyter) display(id, html, text string) {
	gonbui.SendData(&protocol.DisplayData{
		Data:      map[protocol.MIMEType]any{protocol.MIMETextHTML: html, protocol.MIMETextPlain: text},
		DisplayID: id,
	})
}

func (jupyter) writer() io.Writer { return os.Stdout }

// flush waits for GoNB to acknowledge every message sent: GoNB stops reading
// the pipe when the cell's program exits, so an output still in the pipe
// then is lost.
func (jupyter) flush() { gonbui.Sync() }

var out sink = jupyter{}

// newID returns a fresh display id for an output updated in place.
func newID() string { return "druto_" + gonbui.UniqueID() }
