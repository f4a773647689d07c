package slot

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The replication stream's reads (issue 21).
//
// A backlog arrives as a flood of small CopyData messages: pgoutput's
// walsender sends every Begin, Insert and Commit as its own send(). Read
// one message at a time (pgconn's ReceiveMessage with a context each) and
// the relay spends a quarter of its CPU on the context alone; read as soon
// as anything arrives and the reader wakes once per send, and on loopback
// (where the sender's send() runs the receiver's TCP path and its wake-up)
// the walsender's CPU per message nearly doubles. So the stream reads
// through wireReader:
//
//   - large reads (readBufferSize) through pgproto3's frontend, with the
//     read deadline set on the connection (only when it changes) and the
//     context's cancellation turned into a deadline in the past, instead of
//     a context per message;
//   - while a backlog drains (batchBytes arrived within flowWindow),
//     SO_RCVLOWAT = batchBytes: the kernel signals the socket readable only
//     once that much has arrived, so the reader wakes once per batch and
//     not once per message, with batchWait as the longest wait for one;
//     a wait that runs out drops the mark back to 1 byte and reads what is
//     there. At steady load the reads find little waiting, the mark stays
//     at 1 byte and nothing waits: latency does not move.
//
// DECISIONS.md 37 has the figures.
const (
	readBufferSize = 256 << 10
	batchBytes     = 64 << 10
	batchWait      = 2 * time.Millisecond
	flowWindow     = 5 * time.Millisecond
)

// wireReader is the replication connection's reader, beneath pgproto3's
// frontend. Outside a receive (armed false) it only passes reads through.
type wireReader struct {
	r    io.Reader // pgconn's reader of the connection
	conn net.Conn
	raw  syscall.RawConn // the TCP socket, for SO_RCVLOWAT; nil when unavailable

	mu       sync.Mutex
	armed    bool      // inside receive: the reader manages the deadline
	canceled bool      // the receive's context is done
	wake     time.Time // the receive's deadline: the stream's next status look
	set      time.Time // the deadline last set on conn
	batching bool      // SO_RCVLOWAT is batchBytes

	// The flow: bytes read since winStart, a window of at most flowWindow.
	winStart time.Time
	winBytes int
}

// newWireReader wraps r, pgconn's reader of conn.
func newWireReader(r io.Reader) *wireReader { return &wireReader{r: r} }

// attach gives the reader its connection once pgconn has connected.
// Batching needs a TCP socket; over a Unix socket the kernel ignores the
// low-water mark for readiness, so the reader does without.
func (w *wireReader) attach(conn net.Conn) {
	w.conn = conn
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
}

// arm makes the reader manage the deadline for a receive until disarm:
// reads time out at wake, and end with ctx's error once ctx is done.
func (w *wireReader) arm(ctx context.Context) (disarm func()) {
	w.mu.Lock()
	w.armed, w.canceled = true, false
	w.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.canceled = true
		w.setDeadline(time.Unix(1, 0)) // wakes a read in progress
	})
	return func() {
		stop()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.armed = false
		w.setDeadline(time.Time{})
		w.setBatching(false)
	}
}

// setWake sets when the receive's reads time out.
func (w *wireReader) setWake(t time.Time) {
	w.mu.Lock()
	w.wake = t
	w.mu.Unlock()
}

func (w *wireReader) Read(p []byte) (int, error) {
	for {
		w.mu.Lock()
		if !w.armed {
			w.mu.Unlock()
			return w.r.Read(p)
		}
		if w.canceled {
			w.mu.Unlock()
			return 0, context.Canceled
		}
		deadline, short := w.wake, false
		if w.batching {
			if d := time.Now().Add(batchWait); d.Before(deadline) {
				deadline, short = d, true
			}
		}
		w.setDeadline(deadline)
		w.mu.Unlock()

		n, err := w.r.Read(p)

		w.mu.Lock()
		if short && n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && !w.canceled {
			// The batch did not fill in time: read what is there.
			w.setBatching(false)
			w.mu.Unlock()
			continue
		}
		if !w.batching && n > 0 && w.flowing(n) {
			w.setBatching(true)
		}
		w.mu.Unlock()
		return n, err
	}
}

// flowing counts n bytes read and reports whether batchBytes arrived
// within flowWindow: a backlog draining (or a load of thousands of rows a
// second), not a steady trickle, which must not wait for a batch.
func (w *wireReader) flowing(n int) bool {
	now := time.Now()
	if now.Sub(w.winStart) > flowWindow {
		w.winStart, w.winBytes = now, 0
	}
	w.winBytes += n
	return w.winBytes >= batchBytes
}

// setDeadline sets conn's read deadline if it changed. Called with mu held.
func (w *wireReader) setDeadline(t time.Time) {
	if w.conn == nil || t.Equal(w.set) {
		return
	}
	w.set = t
	w.conn.SetReadDeadline(t) //nolint:errcheck // a closed connection fails the read itself
}

// setBatching sets SO_RCVLOWAT to batchBytes or back to 1. Called with mu
// held. A socket that refuses the option simply keeps reading per message.
func (w *wireReader) setBatching(on bool) {
	if w.raw == nil || on == w.batching {
		return
	}
	lowat := 1
	if on {
		lowat = batchBytes
	}
	var serr error
	if err := w.raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, lowat)
	}); err != nil || serr != nil {
		w.raw, w.batching = nil, false
		return
	}
	w.batching = on
}
