package kafkawire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/saslauthenticate"
	"github.com/segmentio/kafka-go/protocol/saslhandshake"
	"github.com/segmentio/kafka-go/sasl"
)

// Config is how connections are made. The zero value of an optional field
// means its default.
type Config struct {
	// Brokers are the bootstrap addresses, host:port. Required by Cluster.
	Brokers []string
	// Dial opens a TCP connection. Defaults to a net.Dialer's DialContext.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds opening a connection: TCP, TLS, the API versions
	// and SASL. Defaults to 5s.
	DialTimeout time.Duration
	// TLS, when set, wraps every connection; an empty ServerName is set to
	// the broker's host. Defaults to nil: plain TCP.
	TLS *tls.Config
	// SASL, when set, authenticates every connection. Defaults to nil.
	SASL sasl.Mechanism
	// ClientID is sent with every request. Defaults to "walrelay".
	ClientID string
}

func (c Config) withDefaults() Config {
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.ClientID == "" {
		c.ClientID = "walrelay"
	}
	return c
}

// maxPending bounds the requests written to one connection and not yet
// answered; Do waits beyond it.
const maxPending = 64

// Conn is one authenticated connection to one broker. Do may be called from
// several goroutines: requests go out in the order their writes took the
// connection, and each caller gets its own answer.
type Conn struct {
	addr     string
	pc       *protocol.Conn
	clientID string
	versions map[protocol.ApiKey]int16

	wmu     sync.Mutex // one write at a time, queued in write order
	nextID  int32
	pending chan *call

	closeOnce sync.Once
	closed    chan struct{}
	err       atomic.Pointer[error] // why the connection closed
	readDone  chan struct{}
	lastUsed  atomic.Int64 // unix nanoseconds of the last Do
}

// call is a request written and waiting for its answer.
type call struct {
	id      int32
	key     protocol.ApiKey
	version int16
	done    chan result // capacity 1
}

type result struct {
	msg protocol.Message
	err error
}

// Dial opens a connection to addr: TCP, TLS, the API versions both sides
// speak, and SASL, all within cfg.DialTimeout and ctx. It starts the
// connection's reader, which Close ends.
func Dial(ctx context.Context, cfg Config, addr string) (*Conn, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	nc, err := cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	pc, versions, err := handshake(ctx, cfg, nc, addr)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &Conn{
		addr: addr, pc: pc, clientID: cfg.ClientID, versions: versions,
		pending: make(chan *call, maxPending), closed: make(chan struct{}), readDone: make(chan struct{}),
	}
	c.lastUsed.Store(time.Now().UnixNano())
	go c.read()
	return c, nil
}

// handshake wraps nc in TLS, agrees on API versions and authenticates,
// with ctx's deadline on every step.
func handshake(ctx context.Context, cfg Config, nc net.Conn, addr string) (*protocol.Conn, map[protocol.ApiKey]int16, error) {
	host, port, _ := net.SplitHostPort(addr)
	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			tc = tc.Clone()
			tc.ServerName = host
		}
		t := tls.Client(nc, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			return nil, nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		nc = t
	}
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d) //nolint:errcheck // a closed connection fails the next step
	}
	pc := protocol.NewConn(nc, cfg.ClientID)
	versions, err := apiVersions(pc)
	if err != nil {
		return nil, nil, fmt.Errorf("api versions of %s: %w", addr, err)
	}
	pc.SetVersions(versions)
	if cfg.SASL != nil {
		n, _ := strconv.Atoi(port)
		actx := sasl.WithMetadata(ctx, &sasl.Metadata{Host: host, Port: n})
		if err := authenticate(actx, pc, cfg.SASL); err != nil {
			return nil, nil, fmt.Errorf("sasl %s with %s: %w", cfg.SASL.Name(), addr, err)
		}
	}
	nc.SetDeadline(time.Time{}) //nolint:errcheck // as above
	return pc, versions, nil
}

// apiVersions asks the broker which versions of each API it speaks (v0 of
// ApiVersions, which every broker takes) and picks, per API, the highest
// both sides speak.
func apiVersions(pc *protocol.Conn) (map[protocol.ApiKey]int16, error) {
	msg, err := pc.RoundTrip(new(apiversions.Request))
	if err != nil {
		return nil, err
	}
	res := msg.(*apiversions.Response)
	if res.ErrorCode != 0 {
		return nil, kafka.Error(res.ErrorCode)
	}
	versions := make(map[protocol.ApiKey]int16, len(res.ApiKeys))
	for _, k := range res.ApiKeys {
		key := protocol.ApiKey(k.ApiKey)
		versions[key] = key.SelectVersion(k.MinVersion, k.MaxVersion)
	}
	return versions, nil
}

// authenticate runs the SASL exchange of mech (KIP-43 handshake, then
// SaslAuthenticate round trips until the mechanism is done).
func authenticate(ctx context.Context, pc *protocol.Conn, mech sasl.Mechanism) error {
	msg, err := pc.RoundTrip(&saslhandshake.Request{Mechanism: mech.Name()})
	if err != nil {
		return err
	}
	if code := msg.(*saslhandshake.Response).ErrorCode; code != 0 {
		return kafka.Error(code)
	}
	sess, state, err := mech.Start(ctx)
	if err != nil {
		return err
	}
	for done := false; !done; {
		msg, err := pc.RoundTrip(&saslauthenticate.Request{AuthBytes: state})
		if err != nil {
			return err
		}
		res := msg.(*saslauthenticate.Response)
		if err := CodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return err
		}
		if done, state, err = sess.Next(ctx, res.AuthBytes); err != nil {
			return err
		}
	}
	return nil
}

// CodeError is a Kafka error code with the broker's message, or nil.
func CodeError(code int16, message string) error {
	switch {
	case code == 0:
		return nil
	case message == "":
		return kafka.Error(code)
	default:
		return fmt.Errorf("%w: %s", kafka.Error(code), message)
	}
}

// Addr is the broker's address.
func (c *Conn) Addr() string { return c.addr }

// Version is the version of API key both sides speak, and whether the
// broker speaks it at all.
func (c *Conn) Version(key protocol.ApiKey) (int16, bool) {
	v, ok := c.versions[key]
	return v, ok
}

// Do sends msg and waits for its answer. A request is written at once,
// behind the requests already written (at most maxPending wait), so Do
// calls that return from their writes in some order reach the broker in
// that order. When ctx ends before the answer, the connection is closed:
// the broker may still process the request, and an answer that comes late
// must not be taken for a later request's. Every error but ctx's is a
// *ConnError.
func (c *Conn) Do(ctx context.Context, msg protocol.Message) (protocol.Message, error) {
	cl, err := c.write(ctx, msg)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-cl.done:
		return r.msg, r.err
	case <-ctx.Done():
		c.fail(fmt.Errorf("no answer before the request's deadline: %w", ctx.Err()))
		return nil, ctx.Err()
	}
}

// write writes msg and queues its call for the reader.
func (c *Conn) write(ctx context.Context, msg protocol.Message) (*call, error) {
	key := msg.ApiKey()
	version, ok := c.versions[key]
	if !ok {
		return nil, c.wrap(fmt.Errorf("the broker does not speak %s", key))
	}
	if p, ok := msg.(protocol.PreparedMessage); ok {
		p.Prepare(version)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.closedErr(); err != nil {
		return nil, err
	}
	c.lastUsed.Store(time.Now().UnixNano())
	c.nextID++
	cl := &call{id: c.nextID, key: key, version: version, done: make(chan result, 1)}
	select {
	case c.pending <- cl:
	case <-c.closed:
		return nil, c.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d, ok := ctx.Deadline(); ok {
		c.pc.SetWriteDeadline(d) //nolint:errcheck // a closed connection fails the write
	}
	if err := protocol.WriteRequest(c.pc, version, cl.id, c.clientID, msg); err != nil {
		// The call is queued: the reader fails it as the connection closes.
		c.fail(fmt.Errorf("write %s: %w", key, err))
		return cl, nil
	}
	c.pc.SetWriteDeadline(time.Time{}) //nolint:errcheck // as above
	return cl, nil
}

// read is the connection's reader: it takes the answers in request order
// until the connection closes, then fails every call still waiting.
func (c *Conn) read() {
	defer close(c.readDone)
	for {
		var cl *call
		select {
		case cl = <-c.pending:
		case <-c.closed:
			c.drain()
			return
		}
		id, msg, err := protocol.ReadResponse(c.pc, cl.key, cl.version)
		switch {
		case err != nil:
			c.fail(fmt.Errorf("read %s answer: %w", cl.key, err))
		case id != cl.id:
			c.fail(fmt.Errorf("answer %d to request %d: the connection is out of step", id, cl.id))
		default:
			cl.done <- result{msg: msg}
			continue
		}
		cl.done <- result{err: c.closedErr()}
	}
}

// drain fails the calls left after the connection closed.
func (c *Conn) drain() {
	for {
		select {
		case cl := <-c.pending:
			cl.done <- result{err: c.closedErr()}
		default:
			return
		}
	}
}

// fail closes the connection for cause (the first cause wins).
func (c *Conn) fail(cause error) {
	c.closeOnce.Do(func() {
		err := c.wrap(cause)
		c.err.Store(&err)
		close(c.closed)
		c.pc.Close()
	})
}

// closedErr is why the connection closed, or nil while it is open.
func (c *Conn) closedErr() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Close closes the connection, fails the requests still waiting, and
// returns once the reader has ended.
func (c *Conn) Close() error {
	c.fail(net.ErrClosed)
	<-c.readDone
	return nil
}

// Alive reports that the connection is open and was used within idle.
func (c *Conn) Alive(idle time.Duration) bool {
	return c.closedErr() == nil && time.Since(time.Unix(0, c.lastUsed.Load())) < idle
}

func (c *Conn) wrap(err error) error { return &ConnError{Addr: c.addr, Err: err} }

// ConnError is a connection to a broker that failed or closed: whatever was
// in flight on it may or may not have been processed.
type ConnError struct {
	Addr string
	Err  error
}

func (e *ConnError) Error() string { return fmt.Sprintf("connection to %s: %v", e.Addr, e.Err) }
func (e *ConnError) Unwrap() error { return e.Err }

// errNoConn is what Dial's caller wraps when no broker could be reached.
var errNoConn = errors.New("no broker could be reached")
