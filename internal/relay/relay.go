package relay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/failpoint"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// Config tunes the pipeline.
type Config struct {
	// ShutdownTimeout is how long in-flight Kafka batches may take to finish
	// after a stop was asked for, before they are abandoned (they will be
	// replayed on the next start). Defaults to 30s.
	ShutdownTimeout time.Duration
	// EventBuffer is the number of replication events queued between the
	// stream and the pump. Defaults to 1024.
	EventBuffer int
	// RestartBackoffMin and RestartBackoffMax bound the exponential backoff,
	// with full jitter, between sessions after a transient failure (a lost
	// connection to PostgreSQL, say). Default to 1s and 30s.
	RestartBackoffMin, RestartBackoffMax time.Duration
	// HaltBackoffMax bounds the backoff between sessions that stopped on a
	// message walrelay cannot publish (policy halt: a bad row, a message
	// Kafka refuses, a row over the stream's message size limit). Each new session
	// meets the same row again, until an operator fixes the cause.
	// Defaults to 5m.
	HaltBackoffMax time.Duration
	// Registerer gets the relay's metrics (commit-to-ack latency, oldest
	// unpublished message age, replays, session errors, streaming). Nil
	// keeps them private.
	Registerer prometheus.Registerer
	// Tables name the outbox tables, in the order of Message.Table: the
	// table label of walrelay_table_rows_total. Defaults to none: rows are
	// not counted per table.
	Tables []string
}

func (c *Config) setDefaults() {
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = 1024
	}
	if c.RestartBackoffMin <= 0 {
		c.RestartBackoffMin = time.Second
	}
	if c.RestartBackoffMax < c.RestartBackoffMin {
		c.RestartBackoffMax = max(30*time.Second, c.RestartBackoffMin)
	}
	if c.HaltBackoffMax < c.RestartBackoffMin {
		c.HaltBackoffMax = max(5*time.Minute, c.RestartBackoffMin)
	}
}

// Defaults is the Config with every optional field at its default.
func Defaults() Config {
	var c Config
	c.setDefaults()
	return c
}

// stream is the replication side, as the relay uses it (slot.Stream).
type stream interface {
	Run(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error
}

// Publisher is the Kafka side, as the relay uses it (sink.Sink). It acks
// a token once Kafka acknowledged the message, or once the message or row
// is parked; what it can neither publish nor park fails it (policy halt).
type Publisher interface {
	Run(ctx context.Context) error
	// Start names the stream the messages published from now on come
	// from; the pump calls it at the stream's start, before any Publish.
	Start(o sink.Origin)
	Publish(ctx context.Context, m *schema.Message, token uint64) error
	// PublishBad takes a row the decoder could not turn into a message.
	PublishBad(ctx context.Context, row sink.BadRow, token uint64) error
	Close()
}

// Parts are the pieces of one session, all new: a stream, a decoder and a
// publisher whose acknowledgements go to ack.
type Parts struct {
	Stream    stream
	Decoder   *decoder.Decoder
	Publisher Publisher
}

// Factory builds the parts of a session (loading what it needs, such as the
// blocked aggregates, under ctx); ack is the publisher's acknowledgement
// callback.
type Factory func(ctx context.Context, ack func(token uint64)) (Parts, error)

// Relay runs sessions from a slot to Kafka: one at a time, a new one after a
// transient failure.
type Relay struct {
	cfg      Config
	log      *zap.Logger
	factory  Factory
	streamed atomic.Bool // some session of this process reached replication
	m        metrics
	cur      atomic.Pointer[session] // the running session, nil between sessions
	prev     replay                  // what the last session left acknowledged; Run's goroutine only
	halted   atomic.Pointer[string]  // why the last session halted; nil while none did
}

// New builds a relay and registers its metrics; it starts nothing.
func New(cfg Config, log *zap.Logger, factory Factory) (*Relay, error) {
	cfg.setDefaults()
	r := &Relay{cfg: cfg, log: log, factory: factory}
	if err := r.register(cfg.Registerer, cfg.Tables); err != nil {
		return nil, err
	}
	return r, nil
}

// Streaming reports whether a session is replicating from the slot now.
func (r *Relay) Streaming() bool {
	s := r.cur.Load()
	return s != nil && s.started()
}

// Halted says why the last session halted (policy halt) on a message
// walrelay cannot publish; "" when none did. While no session streams, the
// relay waits to meet that message again.
func (r *Relay) Halted() string {
	if why := r.halted.Load(); why != nil {
		return *why
	}
	return ""
}

// Idle reports that nothing is in flight: no session, or one whose every
// received transaction is done. For the stall watchdog.
func (r *Relay) Idle() bool {
	s := r.cur.Load()
	return s == nil || s.idle()
}

// Run streams until ctx is done or a failure that a restart cannot mend. A
// session that fails after the relay has streamed once is replaced by a new
// one, after a backoff, resuming at the slot's confirmed position; a
// failure before any session of the process ever streamed (a wrong address,
// say) is returned at once, so that bad configuration fails fast. On a stop
// by ctx, Run drains (see session.run) and returns nil. Run may be called
// again after it returned (a new leadership term).
func (r *Relay) Run(ctx context.Context) error {
	policy := newRestartPolicy(r.cfg)
	for {
		began := time.Now()
		err := r.runSession(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		next := policy.next(classify(err), time.Since(began), r.streamed.Load())
		r.m.sessionErrors.WithLabelValues(next.class.label()).Inc()
		if next.stop {
			return err
		}
		r.logRestart(next, err)
		if backoff.Sleep(ctx, next.wait) != nil {
			return nil
		}
	}
}

// runSession runs one session and keeps what the next one needs.
func (r *Relay) runSession(ctx context.Context) error {
	s := newSession(r.log, r.cfg, &r.m, r.prev)
	r.cur.Store(s)
	err := s.run(ctx, r.factory)
	r.cur.Store(nil)
	if s.started() {
		r.streamed.Store(true)
		r.prev = s.leftAcknowledged()
	}
	if slot.IsSlotGone(err) && r.prev.server.SystemID != "" {
		return &slotGoneError{err: err, last: r.prev}
	}
	return err
}

// logRestart says why a new session follows, and records a halt's reason.
func (r *Relay) logRestart(next restart, err error) {
	if next.class == endedHalted {
		why := err.Error()
		r.halted.Store(&why)
		r.log.Error("halted on a message walrelay cannot publish (bad-message policy halt); nothing past it is confirmed; a new session meets it again after a backoff",
			zap.Error(err), zap.Duration("retry_in", next.wait))
		return
	}
	failpoint.Inject("reconnect")
	r.log.Warn("replication session failed; starting a new one from the slot's confirmed position",
		zap.Error(err), zap.Duration("retry_in", next.wait))
}

// permanentError marks a failure a new session would meet again.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// classify sorts a session's failure for the restart policy. Halts are
// failures before a message walrelay cannot publish (policy halt): a bad
// row, a message Kafka refused, a row over the size limit. Permanent are
// configuration the preflight rejects and broken invariants. Everything
// else (lost connections, mostly) is transient.
func classify(err error) ending {
	var pe *permanentError
	switch {
	case decoder.IsBadRow(err) || sink.Refused(err) || slot.IsTooLarge(err):
		return endedHalted
	case errors.As(err, &pe) || slot.IsConfig(err):
		return endedPermanent
	}
	return endedTransient
}

// errorf wraps a permanent failure.
func errorf(format string, args ...any) error {
	return &permanentError{fmt.Errorf(format, args...)}
}
