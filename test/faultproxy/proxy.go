package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds one dial of the target; Cut and Close end it sooner.
const dialTimeout = 10 * time.Second

// bufSize is the chunk one direction of a connection reads and forwards; a
// stall holds at most one chunk per direction in the proxy.
const bufSize = 32 << 10

type state int

const (
	forwarding state = iota
	stalled
	cut
)

// Proxy forwards TCP connections from its listener to one target, and lets
// a test cut or stall them. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	ctx    context.Context // cancelled by Close; parent of every pair's context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and one per pair

	mu      sync.Mutex
	state   state
	changed chan struct{} // closed and replaced on every state change
	pairs   map[*pair]struct{}
	closed  bool
}

// pair is one accepted client connection and, once dialed, its connection
// to the target. upstream is guarded by Proxy.mu; it stays nil while a
// stall holds the pair back from dialing.
type pair struct {
	client   net.Conn
	upstream net.Conn
	ctx      context.Context // cancelled when the pair is closed
	cancel   context.CancelFunc
}

// Start listens on listen (e.g. "127.0.0.1:0") and forwards every accepted
// connection to target. The target is dialed per connection, so it need not
// be up yet. Close releases the listener and the goroutines.
func Start(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln:      ln,
		target:  target,
		ctx:     ctx,
		cancel:  cancel,
		changed: make(chan struct{}),
		pairs:   make(map[*pair]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the host:port the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every current connection on both sides at once, with a TCP
// reset (linger 0), and refuses new ones (accepts and resets them) until
// Restore or Stall.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.setStateLocked(cut)
	victims := p.takeAllLocked()
	p.mu.Unlock()
	for _, v := range victims {
		v.shut(true)
	}
}

// Stall stops forwarding bytes in both directions, keeping connections
// open; new connections are accepted but not dialed to the target. Bytes
// sent meanwhile are held and delivered in order after Restore.
func (p *Proxy) Stall() { p.setState(stalled) }

// Restore returns to normal forwarding after Cut or Stall.
func (p *Proxy) Restore() { p.setState(forwarding) }

// Conns is the number of connection pairs open now: accepted and not yet
// closed, including those a stall holds back from dialing the target.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Close stops listening, closes every connection and returns once all of
// the proxy's goroutines have ended. The error is the listener's; a second
// Close returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	victims := p.takeAllLocked()
	p.mu.Unlock()
	var err error
	if !already {
		err = p.ln.Close()
	}
	p.cancel()
	for _, v := range victims {
		v.shut(false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) setState(s state) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStateLocked(s)
}

func (p *Proxy) setStateLocked(s state) {
	p.state = s
	close(p.changed)
	p.changed = make(chan struct{})
}

// victim is a pair taken out of the proxy, with the upstream it had then.
type victim struct {
	pr *pair
	up net.Conn
}

func (v victim) shut(rst bool) {
	v.pr.cancel()
	closeConn(v.pr.client, rst)
	if v.up != nil {
		closeConn(v.up, rst)
	}
}

// takeAllLocked empties the pair set; the caller shuts the victims after
// unlocking, so that closing sockets never happens under the lock.
func (p *Proxy) takeAllLocked() []victim {
	victims := make([]victim, 0, len(p.pairs))
	for pr := range p.pairs {
		victims = append(victims, victim{pr: pr, up: pr.upstream})
	}
	clear(p.pairs)
	return victims
}

// remove closes pr unless Cut or Close already took it. Safe to repeat.
func (p *Proxy) remove(pr *pair, rst bool) {
	p.mu.Lock()
	_, ok := p.pairs[pr]
	delete(p.pairs, pr)
	v := victim{pr: pr, up: pr.upstream}
	p.mu.Unlock()
	if ok {
		v.shut(rst)
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Such as too many open files: back off briefly, as net/http does.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		p.admit(c)
	}
}

// admit registers c and starts its goroutine, or resets it when the proxy
// is cut or closed.
func (p *Proxy) admit(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.state == cut {
		closeConn(c, true)
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	pr := &pair{client: c, ctx: ctx, cancel: cancel}
	p.pairs[pr] = struct{}{}
	p.wg.Add(1) // the accept loop holds the group open, so this cannot race Wait
	go p.serve(pr)
}

// serve dials the target for pr once the proxy is not stalled, then copies
// both directions until both have ended.
func (p *Proxy) serve(pr *pair) {
	defer p.wg.Done()
	defer p.remove(pr, false)
	if !p.pass(pr.ctx) {
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(pr.ctx, "tcp", p.target)
	if err != nil {
		p.remove(pr, true) // as a direct connection to a closed port would be
		return
	}
	if !p.attach(pr, up) {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.pipe(pr, pr.client, up)
	}()
	p.pipe(pr, up, pr.client)
	<-done
}

// attach records up as pr's upstream, or closes it if pr was cut meanwhile.
func (p *Proxy) attach(pr *pair, up net.Conn) bool {
	p.mu.Lock()
	_, ok := p.pairs[pr]
	if ok {
		pr.upstream = up
	}
	p.mu.Unlock()
	if !ok {
		closeConn(up, true)
	}
	return ok
}

// pipe copies src to dst, holding each chunk while the proxy is stalled.
// End of stream is passed on as a half close; an error on either side
// resets the whole pair, as the peer's own reset would.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn) {
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(pr.ctx) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.remove(pr, true)
				return
			}
		}
		if errors.Is(err, io.EOF) {
			closeWrite(dst)
			return
		}
		if err != nil {
			p.remove(pr, true)
			return
		}
	}
}

// pass waits while the proxy is stalled. It reports false once the pair is
// closed (by Cut, Close or its other direction) or the proxy is cut.
func (p *Proxy) pass(ctx context.Context) bool {
	for {
		p.mu.Lock()
		st, changed := p.state, p.changed
		p.mu.Unlock()
		switch {
		case ctx.Err() != nil || st == cut:
			return false
		case st == forwarding:
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// closeConn closes c, first asking for a reset instead of an orderly
// shutdown if rst. Errors are ignored: the connection is being dropped.
func closeConn(c net.Conn, rst bool) {
	if tc, ok := c.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// closeWrite half-closes c, so that its peer reads end of stream while the
// other direction goes on.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
