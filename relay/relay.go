package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
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
}

// stream is the replication side, as the relay uses it (slot.Stream).
type stream interface {
	Run(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error
}

// Publisher is the Kafka side, as the relay uses it (sink.Sink).
type Publisher interface {
	Run(ctx context.Context) error
	Publish(ctx context.Context, m *schema.Message, token uint64) error
	Close()
}

// Relay runs one pipeline from a slot to Kafka.
type Relay struct {
	cfg    Config
	log    *zap.Logger
	stream stream
	dec    *decoder.Decoder

	mu sync.Mutex
	tr *checkpoint.Tracker // nil until the stream's Start event

	cur    checkpoint.TxnID // the open transaction; pump goroutine only
	failed chan error
}

// New builds a relay; it starts nothing.
func New(cfg Config, log *zap.Logger, st stream, dec *decoder.Decoder) *Relay {
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 1024
	}
	return &Relay{cfg: cfg, log: log, stream: st, dec: dec, failed: make(chan error, 1)}
}

// Ack records that Kafka acknowledged one message published with token. It
// is the sink's AckFunc and is safe for concurrent use.
func (r *Relay) Ack(token uint64) {
	r.mu.Lock()
	err := r.tr.Ack(checkpoint.TxnID(token))
	r.mu.Unlock()
	if err != nil {
		r.fail(fmt.Errorf("acknowledgement out of step with the confirm rule: %w", err))
	}
}

// Safe is the position the stream may confirm.
func (r *Relay) Safe() pglogrepl.LSN {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tr == nil {
		return 0
	}
	return r.tr.Safe()
}

func (r *Relay) fail(err error) {
	select {
	case r.failed <- err:
	default:
	}
}

// Run streams until ctx is done or something fails. On a stop by ctx it
// stops receiving, lets in-flight batches finish (up to ShutdownTimeout),
// confirms what is done and returns nil. pub must have been built with
// r.Ack as its acknowledgement callback.
func (r *Relay) Run(ctx context.Context, pub Publisher) error {
	// The group outlives ctx by up to ShutdownTimeout, so that a stop drains
	// instead of abandoning what Kafka is about to acknowledge.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stopTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(r.cfg.ShutdownTimeout, cancelHard)
	})
	defer stopTimer()

	g, gctx := errgroup.WithContext(hard)
	recvCtx, cancelRecv := context.WithCancel(gctx)
	defer cancelRecv()
	stopRecv := context.AfterFunc(ctx, cancelRecv)
	defer stopRecv()

	events := make(chan slot.Event, r.cfg.EventBuffer)
	drained := make(chan struct{})
	g.Go(func() error { return r.stream.Run(recvCtx, events, r.Safe, drained) })
	g.Go(func() error {
		defer pub.Close()
		return r.pump(gctx, events, pub)
	})
	g.Go(func() error {
		defer close(drained)
		return pub.Run(gctx)
	})
	g.Go(func() error {
		select {
		case err := <-r.failed:
			return err
		case <-drained:
			return nil
		}
	})
	err := g.Wait()
	if err != nil && ctx.Err() != nil && hard.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("in-flight messages did not finish within the shutdown timeout (%s); they will be published again on the next start", r.cfg.ShutdownTimeout)
	}
	r.logEnd(err)
	return err
}

func (r *Relay) logEnd(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tr == nil {
		return
	}
	txns, msgs := r.tr.InFlight()
	fields := []zap.Field{zap.Stringer("confirmed_lsn", r.tr.Safe()), zap.Int("pending_transactions", txns), zap.Int("pending_messages", msgs)}
	if err != nil {
		r.log.Warn("relay stopped on error; pending messages will be replayed on restart", append(fields, zap.Error(err))...)
		return
	}
	r.log.Info("relay stopped", fields...)
}

// pump consumes the stream in WAL order until it is closed.
func (r *Relay) pump(ctx context.Context, events <-chan slot.Event, pub Publisher) error {
	for ev := range events {
		if err := r.apply(ctx, ev, pub); err != nil {
			return err
		}
	}
	return nil
}

func (r *Relay) apply(ctx context.Context, ev slot.Event, pub Publisher) error {
	switch ev.Kind {
	case slot.KindStart:
		r.mu.Lock()
		r.tr = checkpoint.New(ev.Pos)
		r.mu.Unlock()
		return nil
	case slot.KindKeepalive:
		r.mu.Lock()
		r.tr.Keepalive(ev.Pos)
		r.mu.Unlock()
		return nil
	case slot.KindData:
		return r.decode(ctx, ev, pub)
	}
	return fmt.Errorf("unknown stream event kind %d", ev.Kind)
}

func (r *Relay) decode(ctx context.Context, ev slot.Event, pub Publisher) error {
	e, err := r.dec.Decode(ev.Data)
	if err != nil {
		return fmt.Errorf("decode wal at %s: %w", ev.Pos, err)
	}
	switch e.Kind {
	case decoder.KindBegin:
		r.mu.Lock()
		r.cur, err = r.tr.Begin()
		r.mu.Unlock()
	case decoder.KindMessage:
		r.mu.Lock()
		err = r.tr.Add(r.cur)
		r.mu.Unlock()
		if err == nil {
			err = pub.Publish(ctx, e.Message, uint64(r.cur))
		}
	case decoder.KindCommit:
		r.mu.Lock()
		err = r.tr.Commit(r.cur, e.EndLSN)
		r.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("wal at %s: %w", ev.Pos, err)
	}
	return nil
}
