package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rendezvous.go: Join (rank 0 listens, every other rank dials it), the
// control channel (Barrier, MeanFloat32) and the ring links.
//
// Wire format, little-endian, every message starting with a tag byte where
// the two sides could disagree on what comes next:
//
//	hello    rank->0   magic[8] rank:u32 world:u32 ringPort:u32
//	welcome  0->rank   'W' blob:bytes addrs:W×bytes   or   'X' message:bytes
//	ring     rank->next magic[8] rank:u32
//	barrier  rank->0 'B' seq:u32;   0->rank 'B' seq:u32 or 'X' message:bytes
//	floats   rank->0 'F' seq:u32 n:u32 n×f32;   0->rank the same with the result
//
// where bytes is a u32 length and the bytes.

// Options configure Join.
type Options struct {
	// Blob is what rank 0 broadcasts to every rank (for GPUs, the NCCL
	// unique id); other ranks receive it from rank 0 (see Group.Blob).
	Blob []byte
	// Ring also links every rank to its ring neighbours (Rank-1 and
	// Rank+1 mod World), which Ring needs.
	Ring bool
	// Listener, on rank 0, is where the rendezvous is accepted instead of
	// a new listener on MasterPort (tests pass one on 127.0.0.1:0). Join
	// closes it.
	Listener net.Listener
	// OpTimeout bounds each collective's wait for the slowest peer after the
	// rendezvous (0: DefaultOpTimeout). A rank waits this long at the
	// all-reduce while another computes its step.
	OpTimeout time.Duration
}

// DefaultOpTimeout is how long a collective waits for its peers.
const DefaultOpTimeout = 30 * time.Minute

// magic opens every hello: "drutodp" and the protocol version.
var magic = [8]byte{'d', 'r', 'u', 't', 'o', 'd', 'p', 1}

// maxMessage bounds what a peer may make this side allocate.
const maxMessage = 16 << 20

// Group is one rank's connections to the others: the control channel to
// rank 0 (rank 0 holds one to every rank) and, with Options.Ring, the
// links to its ring neighbours. Its methods are collectives: every rank
// calls the same ones in the same order. It is safe for use by one
// goroutine at a time.
type Group struct {
	cfg        Config
	blob       []byte
	ctrl       []net.Conn // rank 0: ctrl[r] to rank r (ctrl[0] nil); others: ctrl[0], to rank 0
	next, prev net.Conn   // ring links: this rank sends to next and receives from prev
	opTimeout  time.Duration
	seq        uint32 // collectives so far (checked on the wire)

	mu     sync.Mutex
	closed bool
}

// Join runs the rendezvous for cfg: rank 0 listens on MasterPort (or
// o.Listener) and waits for the other World-1 ranks; the others dial rank 0
// until it answers. Rank 0 then sends o.Blob and the ring addresses to
// every rank, the ring links are made when o.Ring is set, and all ranks
// pass a barrier. Everything must happen within cfg.Timeout (default
// DefaultTimeout); the error then names the ranks that did not arrive, on
// every rank that did. A World of 1 returns a group of one at once.
func Join(cfg Config, o Options) (*Group, error) {
	closeListener := func() {
		if o.Listener != nil {
			o.Listener.Close()
		}
	}
	if err := cfg.Validate(); err != nil {
		closeListener()
		return nil, err
	}
	if len(o.Blob) > maxMessage {
		closeListener()
		return nil, fmt.Errorf("dist: blob of %d bytes is over the %d-byte limit", len(o.Blob), maxMessage)
	}
	g := &Group{cfg: cfg, opTimeout: o.OpTimeout}
	if g.opTimeout <= 0 {
		g.opTimeout = DefaultOpTimeout
	}
	if cfg.World == 1 {
		closeListener()
		g.blob = append([]byte(nil), o.Blob...)
		return g, nil
	}
	deadline := time.Now().Add(cfg.timeout())
	var ringLn net.Listener
	if o.Ring {
		var err error
		if ringLn, err = net.Listen("tcp", ":0"); err != nil {
			closeListener()
			return nil, fmt.Errorf("dist: rank %d: ring listener: %w", cfg.Rank, err)
		}
		defer ringLn.Close()
	}
	var addrs []string
	var err error
	if cfg.Rank == 0 {
		addrs, err = g.accept(o, ringLn, deadline)
	} else {
		addrs, err = g.dial(ringLn, deadline)
	}
	// Everyone has arrived: the ring links and the barrier get a fresh
	// timeout (a rank that started early has used some of its own).
	if err == nil && o.Ring {
		err = g.linkRing(ringLn, addrs, time.Now().Add(cfg.timeout()))
	}
	if err == nil {
		err = g.barrier(cfg.timeout(), "rendezvous barrier")
	}
	if err != nil {
		g.Close()
		return nil, err
	}
	for _, c := range append(append([]net.Conn(nil), g.ctrl...), g.next, g.prev) {
		if c != nil {
			c.SetDeadline(time.Time{})
		}
	}
	return g, nil
}

// Rank returns this process's rank.
func (g *Group) Rank() int { return g.cfg.Rank }

// World returns the number of ranks.
func (g *Group) World() int { return g.cfg.World }

// Config returns the configuration the group was joined with.
func (g *Group) Config() Config { return g.cfg }

// Blob returns the bytes rank 0 broadcast (Options.Blob of rank 0).
func (g *Group) Blob() []byte { return g.blob }

// Close closes every connection; the group must not be used after.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	var errs []error
	for _, c := range append(append([]net.Conn(nil), g.ctrl...), g.next, g.prev) {
		if c != nil {
			if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// hello is what a rank tells rank 0 about itself.
type hello struct {
	rank, world, ringPort int
}

// arrival is one connection's hello, or why it is not one.
type arrival struct {
	conn net.Conn
	h    hello
	err  error
}

// accept is rank 0's side of the rendezvous; it returns the ring addresses.
func (g *Group) accept(o Options, ringLn net.Listener, deadline time.Time) ([]string, error) {
	cfg := g.cfg
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.MasterPort))); err != nil {
			return nil, fmt.Errorf("dist: rank 0 cannot listen on port %d: %w (another run holds it? choose another %s)", cfg.MasterPort, err, EnvMasterPort)
		}
	}
	where := ln.Addr().String()
	done := make(chan struct{})
	defer close(done)
	defer ln.Close()
	arrivals := make(chan arrival)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			go func() {
				c.SetDeadline(deadline)
				h, err := readHello(c)
				select {
				case arrivals <- arrival{c, h, err}:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	g.ctrl = make([]net.Conn, cfg.World)
	hosts, ports := make([]string, cfg.World), make([]int, cfg.World)
	joined := 1
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for joined < cfg.World {
		select {
		case a := <-arrivals:
			if a.err != nil { // not a druto rank (a probe, a stale process): ignore it
				a.conn.Close()
				continue
			}
			var bad string
			switch h := a.h; {
			case h.world != cfg.World:
				bad = fmt.Sprintf("rank %d has %s=%d but rank 0 has %d", h.rank, EnvWorldSize, h.world, cfg.World)
			case h.rank < 1 || h.rank >= cfg.World:
				bad = fmt.Sprintf("a process claims rank %d, out of range for %s=%d", h.rank, EnvWorldSize, cfg.World)
			case g.ctrl[h.rank] != nil:
				bad = fmt.Sprintf("two processes claim rank %d (from %s and %s)", h.rank, g.ctrl[h.rank].RemoteAddr(), a.conn.RemoteAddr())
			}
			if bad != "" {
				sendFail(a.conn, bad)
				a.conn.Close()
				return nil, g.failAll(fmt.Errorf("dist: rendezvous at %s: %s", where, bad))
			}
			g.ctrl[a.h.rank] = a.conn
			hosts[a.h.rank] = hostOf(a.conn.RemoteAddr())
			ports[a.h.rank] = a.h.ringPort
			joined++
		case err := <-acceptErr:
			return nil, g.failAll(fmt.Errorf("dist: rendezvous at %s: %w", where, err))
		case <-timer.C:
			return nil, g.failAll(fmt.Errorf("dist: rendezvous at %s timed out after %v: %s (%d of %d ranks joined); "+
				"start every rank with the same %s, %s and %s, or raise %s",
				where, g.cfg.timeout(), g.missing(), joined, cfg.World, EnvMasterAddr, EnvMasterPort, EnvWorldSize, EnvTimeout))
		}
	}
	addrs := make([]string, cfg.World)
	if ringLn != nil {
		hosts[0], ports[0] = cfg.MasterAddr, portOf(ringLn.Addr())
		for r := range addrs {
			addrs[r] = net.JoinHostPort(hosts[r], strconv.Itoa(ports[r]))
		}
	}
	g.blob = append([]byte(nil), o.Blob...)
	var w msg
	w.byte('W')
	w.bytes(g.blob)
	for _, a := range addrs {
		w.bytes([]byte(a))
	}
	for r := 1; r < cfg.World; r++ {
		if err := w.send(g.ctrl[r]); err != nil {
			return nil, g.failAll(fmt.Errorf("dist: rank 0: sending the rendezvous to rank %d: %w", r, err))
		}
	}
	return addrs, nil
}

// missing names the ranks rank 0 has no connection from, e.g. "rank 2 did
// not arrive" or "ranks 2, 3 did not arrive".
func (g *Group) missing() string {
	var m []string
	for r := 1; r < len(g.ctrl); r++ {
		if g.ctrl[r] == nil {
			m = append(m, strconv.Itoa(r))
		}
	}
	return ranks(m) + " did not arrive"
}

// failAll tells every connected rank why the rendezvous failed, closes the
// connections and returns err.
func (g *Group) failAll(err error) error {
	for r, c := range g.ctrl {
		if c != nil {
			sendFail(c, err.Error())
			c.Close()
			g.ctrl[r] = nil
		}
	}
	return err
}

// sendFail sends 'X' and a message, ignoring errors (the peer may be gone).
func sendFail(c net.Conn, text string) {
	var m msg
	m.byte('X')
	m.bytes([]byte(text))
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_ = m.send(c)
}

// dial is the side of every rank but 0; it returns the ring addresses.
func (g *Group) dial(ringLn net.Listener, deadline time.Time) ([]string, error) {
	cfg := g.cfg
	var c net.Conn
	var lastErr error
	for {
		d := net.Dialer{Deadline: deadline}
		var err error
		if c, err = d.Dial("tcp", cfg.Master()); err == nil {
			break
		}
		lastErr = err
		if time.Now().Add(100 * time.Millisecond).After(deadline) {
			return nil, fmt.Errorf("dist: rank %d: no rank 0 at %s within %v (%v); is rank 0 running, and do all ranks have the same %s and %s?",
				cfg.Rank, cfg.Master(), cfg.timeout(), lastErr, EnvMasterAddr, EnvMasterPort)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.ctrl = []net.Conn{c}
	// Rank 0 answers within its own timeout, which began before this
	// connection: wait a little longer than that, so that its verdict
	// (naming a rank that did not arrive) is what this rank reports.
	c.SetDeadline(time.Now().Add(cfg.timeout() + 5*time.Second))
	var h msg
	h.raw(magic[:])
	h.u32(uint32(cfg.Rank))
	h.u32(uint32(cfg.World))
	if ringLn != nil {
		h.u32(uint32(portOf(ringLn.Addr())))
	} else {
		h.u32(0)
	}
	if err := h.send(c); err != nil {
		return nil, fmt.Errorf("dist: rank %d: hello to rank 0 at %s: %w", cfg.Rank, cfg.Master(), err)
	}
	tag, err := readByte(c)
	if err == nil && tag == 'X' {
		text, rerr := readBytes(c)
		if rerr == nil {
			return nil, fmt.Errorf("dist: rank %d: the rendezvous failed at rank 0: %s", cfg.Rank, text)
		}
		err = rerr
	}
	if err == nil && tag != 'W' {
		err = fmt.Errorf("unexpected message %q", tag)
	}
	if err != nil {
		if isTimeout(err) {
			return nil, fmt.Errorf("dist: rank %d: reached rank 0 at %s, but the rendezvous did not complete within %v (rank 0 is waiting for other ranks)",
				cfg.Rank, cfg.Master(), cfg.timeout())
		}
		return nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", cfg.Rank, cfg.Master(), err)
	}
	if g.blob, err = readBytes(c); err != nil {
		return nil, fmt.Errorf("dist: rank %d: rendezvous blob: %w", cfg.Rank, err)
	}
	addrs := make([]string, cfg.World)
	for r := range addrs {
		b, err := readBytes(c)
		if err != nil {
			return nil, fmt.Errorf("dist: rank %d: rendezvous addresses: %w", cfg.Rank, err)
		}
		addrs[r] = string(b)
	}
	return addrs, nil
}

// linkRing connects this rank to the next rank's ring listener and accepts
// the previous rank on its own, checking who is who.
func (g *Group) linkRing(ln net.Listener, addrs []string, deadline time.Time) error {
	cfg := g.cfg
	next, prev := (cfg.Rank+1)%cfg.World, (cfg.Rank+cfg.World-1)%cfg.World
	var err error
	for {
		d := net.Dialer{Deadline: deadline}
		if g.next, err = d.Dial("tcp", addrs[next]); err == nil {
			break
		}
		if time.Now().Add(100 * time.Millisecond).After(deadline) {
			return fmt.Errorf("dist: rank %d: cannot reach rank %d's ring link at %s: %w", cfg.Rank, next, addrs[next], err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.next.SetDeadline(deadline)
	var h msg
	h.raw(magic[:])
	h.u32(uint32(cfg.Rank))
	if err := h.send(g.next); err != nil {
		return fmt.Errorf("dist: rank %d: ring hello to rank %d: %w", cfg.Rank, next, err)
	}
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if isTimeout(err) {
				return fmt.Errorf("dist: rank %d: rank %d did not make its ring link within %v", cfg.Rank, prev, cfg.timeout())
			}
			return fmt.Errorf("dist: rank %d: ring accept: %w", cfg.Rank, err)
		}
		c.SetDeadline(deadline)
		var m [len(magic) + 4]byte
		if _, err := io.ReadFull(c, m[:]); err != nil || [8]byte(m[:8]) != magic {
			c.Close() // not a druto rank
			continue
		}
		if r := int(binary.LittleEndian.Uint32(m[8:])); r != prev {
			c.Close()
			return fmt.Errorf("dist: rank %d: ring link from rank %d, want rank %d", cfg.Rank, r, prev)
		}
		g.prev = c
		return nil
	}
}

// Barrier returns when every rank has called it, or an error naming the
// ranks that did not arrive within the operation timeout.
func (g *Group) Barrier() error {
	return g.barrier(g.opTimeout, "barrier")
}

func (g *Group) barrier(timeout time.Duration, what string) error {
	if g.cfg.World == 1 {
		return nil
	}
	_, err := g.exchange('B', nil, timeout, what)
	return err
}

// MeanFloat32 returns the mean of v over all ranks: rank 0 sums the values
// in rank order in float32, divides by World and sends the result, so every
// rank returns the same bits.
func (g *Group) MeanFloat32(v float32) (float32, error) {
	if g.cfg.World == 1 {
		return v, nil
	}
	out, err := g.exchange('F', []float32{v}, g.opTimeout, "mean")
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// SumFloat32s returns the elementwise sum of vals over all ranks, summed in
// rank order in float32 by rank 0 (the same bits on every rank). Every rank
// must pass the same number of values.
func (g *Group) SumFloat32s(vals []float32) ([]float32, error) {
	if g.cfg.World == 1 {
		return append([]float32(nil), vals...), nil
	}
	return g.exchange('S', vals, g.opTimeout, "sum")
}

// exchange is the star collective behind Barrier, MeanFloat32 and
// SumFloat32s: every rank sends tag, the sequence number and vals to rank
// 0, which combines them (nothing for 'B', the rank-ordered sum for 'S',
// divided by World for 'F') and sends the result back.
func (g *Group) exchange(tag byte, vals []float32, timeout time.Duration, what string) ([]float32, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("dist: rank %d: %s on a closed group", g.cfg.Rank, what)
	}
	g.seq++
	seq := g.seq
	deadline := time.Now().Add(timeout)
	var m msg
	m.byte(tag)
	m.u32(seq)
	m.floats(vals)
	if g.cfg.Rank != 0 {
		// Rank 0 answers by its own deadline, with the names of the ranks
		// that did not come: wait a little longer so that its verdict is
		// what this rank reports.
		c := g.ctrl[0]
		c.SetDeadline(deadline.Add(time.Second + timeout/10))
		if err := m.send(c); err != nil {
			return nil, g.peerErr(0, what, err)
		}
		out, err := readReply(c, tag, seq, len(vals))
		if err != nil {
			return nil, g.peerErr(0, what, err)
		}
		return out, nil
	}
	// Rank 0: gather from every rank at once, so that the error names
	// every rank that did not come, then combine in rank order.
	got := make([][]float32, g.cfg.World)
	got[0] = vals
	errs := make([]error, g.cfg.World)
	var wg sync.WaitGroup
	for r := 1; r < g.cfg.World; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g.ctrl[r]
			c.SetDeadline(deadline)
			got[r], errs[r] = readReply(c, tag, seq, len(vals))
		}()
	}
	wg.Wait()
	var late, failed []string
	for r, err := range errs {
		switch {
		case err == nil:
		case isTimeout(err):
			late = append(late, strconv.Itoa(r))
		default:
			failed = append(failed, g.peerErr(r, what, err).Error())
		}
	}
	if len(late) > 0 || len(failed) > 0 {
		var parts []string
		if len(late) > 0 {
			parts = append(parts, fmt.Sprintf("%s did not reach the %s within %v", ranks(late), what, timeout))
		}
		parts = append(parts, failed...)
		err := fmt.Errorf("dist: rank 0: %s", strings.Join(parts, "; "))
		for r := 1; r < g.cfg.World; r++ {
			if errs[r] == nil {
				sendFail(g.ctrl[r], err.Error())
			}
		}
		return nil, err
	}
	out := combine(tag, got, g.cfg.World)
	var reply msg
	reply.byte(tag)
	reply.u32(seq)
	reply.floats(out)
	for r := 1; r < g.cfg.World; r++ {
		if err := reply.send(g.ctrl[r]); err != nil {
			return nil, g.peerErr(r, what, err)
		}
	}
	return out, nil
}

// ranks names a list of ranks: "rank 2" or "ranks 2, 3".
func ranks(rs []string) string {
	if len(rs) == 1 {
		return "rank " + rs[0]
	}
	return "ranks " + strings.Join(rs, ", ")
}

// combine sums the ranks' values in rank order in float32 ('S', 'F'),
// dividing by world for 'F'.
func combine(tag byte, got [][]float32, world int) []float32 {
	if tag == 'B' {
		return nil
	}
	out := append([]float32(nil), got[0]...)
	for r := 1; r < world; r++ {
		for i, v := range got[r] {
			out[i] += v
		}
	}
	if tag == 'F' {
		for i := range out {
			out[i] /= float32(world)
		}
	}
	return out
}

// readReply reads a message tagged tag with sequence seq and n floats, or
// the 'X' failure rank 0 sent instead.
func readReply(c net.Conn, tag byte, seq uint32, n int) ([]float32, error) {
	t, err := readByte(c)
	if err != nil {
		return nil, err
	}
	if t == 'X' {
		text, err := readBytes(c)
		if err != nil {
			return nil, err
		}
		return nil, remoteError(text)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	gotSeq, count := binary.LittleEndian.Uint32(hdr[:]), int(binary.LittleEndian.Uint32(hdr[4:]))
	if t != tag || gotSeq != seq || count != n {
		return nil, fmt.Errorf("out of step: got %q #%d with %d values, want %q #%d with %d (every rank must make the same calls in the same order)",
			t, gotSeq, count, tag, seq, n)
	}
	b := make([]byte, 4*n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// remoteError is a failure rank 0 reported; it is passed on verbatim.
type remoteError string

func (e remoteError) Error() string { return string(e) }

// peerErr describes a failed exchange with rank r.
func (g *Group) peerErr(r int, what string, err error) error {
	var re remoteError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("dist: rank %d: %s failed at rank 0: %s", g.cfg.Rank, what, string(re))
	case isTimeout(err):
		return fmt.Errorf("dist: rank %d: %s: no answer from rank %d within the timeout: %w", g.cfg.Rank, what, r, os.ErrDeadlineExceeded)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err):
		return fmt.Errorf("dist: rank %d: %s: rank %d is gone (%v)", g.cfg.Rank, what, r, err)
	}
	return fmt.Errorf("dist: rank %d: %s with rank %d: %w", g.cfg.Rank, what, r, err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func isReset(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe")
}

// readHello reads and checks a rank's hello.
func readHello(c net.Conn) (hello, error) {
	var b [len(magic) + 12]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return hello{}, err
	}
	if [8]byte(b[:8]) != magic {
		return hello{}, errors.New("dist: not a druto rank (bad magic or protocol version)")
	}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(b[8+4*i:])) }
	return hello{rank: u(0), world: u(1), ringPort: u(2)}, nil
}

func readByte(c net.Conn) (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	return b[0], err
}

// readBytes reads a u32 length and that many bytes.
func readBytes(c net.Conn) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	l := binary.LittleEndian.Uint32(n[:])
	if l > maxMessage {
		return nil, fmt.Errorf("message of %d bytes is over the %d-byte limit", l, maxMessage)
	}
	b := make([]byte, l)
	_, err := io.ReadFull(c, b)
	return b, err
}

// msg builds one message to send in a single write.
type msg struct{ b []byte }

func (m *msg) byte(v byte)    { m.b = append(m.b, v) }
func (m *msg) raw(v []byte)   { m.b = append(m.b, v...) }
func (m *msg) u32(v uint32)   { m.b = binary.LittleEndian.AppendUint32(m.b, v) }
func (m *msg) bytes(v []byte) { m.u32(uint32(len(v))); m.raw(v) }
func (m *msg) floats(v []float32) {
	m.u32(uint32(len(v)))
	for _, f := range v {
		m.u32(math.Float32bits(f))
	}
}
func (m *msg) send(c net.Conn) error { _, err := c.Write(m.b); return err }

func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	h, _, _ := net.SplitHostPort(a.String())
	return h
}

func portOf(a net.Addr) int {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.Port
	}
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return n
}
