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
	"github.com/walrelay/walrelay/internal/failpoint"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// session is one replication session: one stream, decoder, publisher and
// confirm-rule tracker, from START_REPLICATION to a stop or a failure.
type session struct {
	log  *zap.Logger
	cfg  Config
	m    *metrics
	prev replay // what the previous session of the process left acknowledged

	mu      sync.Mutex
	tr      *checkpoint.Tracker // nil until the stream's Start event
	commits commits

	server slot.Server // the server streamed from; set at the Start event, under mu
	// confirmed is the highest safe position the stream has read, and
	// confirmedAt when it first read it (carried over from the previous
	// session until this one moves): for the stop line of a lost slot.
	confirmed   pglogrepl.LSN
	confirmedAt time.Time
	cur         checkpoint.TxnID // the open transaction; pump goroutine only
	curMsgs     int              // messages of the open transaction; pump goroutine only
	failed      chan error
}

func newSession(log *zap.Logger, cfg Config, m *metrics, prev replay) *session {
	return &session{log: log, cfg: cfg, m: m, prev: prev, failed: make(chan error, 1)}
}

// ack records that Kafka acknowledged one message published with token. It
// is the publisher's acknowledgement callback and is safe for concurrent
// use.
func (s *session) ack(token uint64) {
	id := checkpoint.TxnID(token)
	s.mu.Lock()
	committed, known := s.commits.at(id)
	err := s.tr.Ack(id)
	s.commits.follow(s.tr)
	s.mu.Unlock()
	if err != nil {
		s.fail(errorf("acknowledgement out of step with the confirm rule: %w", err))
		return
	}
	if known {
		s.m.commitToAck.Observe(max(0, time.Since(committed).Seconds()))
	}
}

// oldestCommit is the commit time of the oldest transaction not done.
func (s *session) oldestCommit() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil {
		return time.Time{}, false
	}
	id, ok := s.tr.OldestPending()
	if !ok {
		return time.Time{}, false
	}
	return s.commits.at(id)
}

// idle reports that every received transaction is done.
func (s *session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr == nil || s.tr.Idle()
}

// leftAcknowledged is what this session got Kafka to acknowledge that the
// slot may not have confirmed: the next session will publish it again.
func (s *session) leftAcknowledged() replay {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := replay{safe: s.tr.Safe(), ahead: map[pglogrepl.LSN]struct{}{}, server: s.server, confirmedAt: s.confirmedAt}
	for _, end := range s.tr.DoneAhead(nil) {
		r.ahead[end] = struct{}{}
	}
	return r
}

// safe is the position the stream may confirm.
func (s *session) safe() pglogrepl.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil {
		return 0
	}
	p := s.tr.Safe()
	if p > s.confirmed {
		s.confirmed, s.confirmedAt = p, time.Now()
	}
	return p
}

// started reports whether the stream got as far as replicating.
func (s *session) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr != nil
}

func (s *session) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// run streams until ctx is done or something fails. On a stop by ctx it
// stops receiving, lets in-flight batches finish (up to ShutdownTimeout),
// confirms what is done and returns nil.
func (s *session) run(ctx context.Context, factory Factory) error {
	parts, err := factory(ctx, s.ack)
	if err != nil {
		// Transient unless it says otherwise: building a session reads the
		// blocked aggregates from PostgreSQL, and a lost connection there is
		// as passing as one on the stream. (Before the first stream, Run
		// returns any error anyway.)
		return fmt.Errorf("build session: %w", err)
	}
	// The group outlives ctx by up to ShutdownTimeout, so that a stop drains
	// instead of abandoning what Kafka is about to acknowledge.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stopTimer := context.AfterFunc(ctx, func() {
		time.AfterFunc(s.cfg.ShutdownTimeout, cancelHard)
	})
	defer stopTimer()

	g, gctx := errgroup.WithContext(hard)
	recvCtx, cancelRecv := context.WithCancel(gctx)
	defer cancelRecv()
	stopRecv := context.AfterFunc(ctx, cancelRecv)
	defer stopRecv()

	events := make(chan slot.Event, s.cfg.EventBuffer)
	drained := make(chan struct{})
	g.Go(func() error { return parts.Stream.Run(recvCtx, events, s.safe, drained) })
	g.Go(func() error {
		defer parts.Publisher.Close()
		return s.pump(gctx, events, parts.Decoder, parts.Publisher)
	})
	g.Go(func() error {
		defer close(drained)
		return parts.Publisher.Run(gctx)
	})
	g.Go(func() error {
		select {
		case err := <-s.failed:
			return err
		case <-drained:
			return nil
		}
	})
	err = g.Wait()
	if err != nil && ctx.Err() != nil && hard.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("in-flight messages did not finish within the shutdown timeout (%s); they will be published again on the next start", s.cfg.ShutdownTimeout)
	}
	s.logEnd(err)
	return err
}

func (s *session) logEnd(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil {
		return
	}
	txns, msgs := s.tr.InFlight()
	fields := []zap.Field{zap.Stringer("confirmed_lsn", s.tr.Safe()), zap.Int("pending_transactions", txns), zap.Int("pending_messages", msgs)}
	if err != nil {
		s.log.Warn("relay session ended on error; pending messages will be replayed", append(fields, zap.Error(err))...)
		return
	}
	s.log.Info("relay stopped", fields...)
}

// keepalive offers a position past everything received (a server keepalive
// or a heartbeat) to the confirm rule.
func (s *session) keepalive(pos pglogrepl.LSN) {
	s.mu.Lock()
	s.tr.Keepalive(pos)
	s.commits.follow(s.tr)
	s.mu.Unlock()
}

// pump consumes the stream in WAL order until it is closed.
func (s *session) pump(ctx context.Context, events <-chan slot.Event, dec *decoder.Decoder, pub Publisher) error {
	for ev := range events {
		if err := s.apply(ctx, ev, dec, pub); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) apply(ctx context.Context, ev slot.Event, dec *decoder.Decoder, pub Publisher) error {
	switch ev.Kind {
	case slot.KindStart:
		if err := s.follow(ev); err != nil {
			return err
		}
		if srv := ev.Server; srv != nil {
			pub.Start(origin(srv))
		}
		s.mu.Lock()
		s.tr = checkpoint.New(ev.Pos)
		s.confirmed, s.confirmedAt = ev.Pos, s.prev.confirmedAt
		s.mu.Unlock()
		return nil
	case slot.KindKeepalive:
		s.keepalive(ev.Pos)
		return nil
	case slot.KindData:
		return s.decode(ctx, ev, dec, pub)
	}
	return errorf("unknown stream event kind %d", ev.Kind)
}

func (s *session) decode(ctx context.Context, ev slot.Event, dec *decoder.Decoder, pub Publisher) error {
	e, err := dec.Decode(ev.Data)
	if err != nil {
		return s.undecodable(ctx, ev.Pos, err, pub)
	}
	switch e.Kind {
	case decoder.KindMessage:
		return s.publish(ctx, ev.Pos, e.Message, pub)
	case decoder.KindBegin:
		err = s.begin(e.CommitTime)
	case decoder.KindCommit:
		err = s.commit(e.EndLSN)
	case decoder.KindHeartbeat:
		// Our own heartbeat: nothing to publish; its position is confirmable
		// like a keepalive's, once nothing is in flight.
		s.m.heartbeats.Inc()
		s.keepalive(e.EndLSN)
	}
	if err != nil {
		return errorf("wal at %s: %w", ev.Pos, err)
	}
	return nil
}

// undecodable hands a row the decoder could not turn into a message to the
// publisher, which parks it (and acks it once stored) or halts, by policy.
// Any other decoding error means the stream can no longer be trusted.
func (s *session) undecodable(ctx context.Context, at pglogrepl.LSN, err error, pub Publisher) error {
	bad, ok := decoder.AsBadRow(err)
	if !ok {
		return errorf("decode wal at %s: %w", at, err)
	}
	if err := s.add(at); err != nil {
		return err
	}
	s.m.tableRow(bad.Table)
	return pub.PublishBad(ctx, bad, uint64(s.cur))
}

// publish hands a message of the open transaction to the publisher.
func (s *session) publish(ctx context.Context, at pglogrepl.LSN, m *schema.Message, pub Publisher) error {
	if err := s.add(at); err != nil {
		return err
	}
	s.curMsgs++
	s.m.tableRow(m.Table)
	err := pub.Publish(ctx, m, uint64(s.cur))
	failpoint.Inject("publish")
	return err
}

// add counts one more message (or bad row) of the open transaction in the
// tracker, before it goes to the publisher, so that its acknowledgement
// can never come for something the tracker does not know.
func (s *session) add(at pglogrepl.LSN) error {
	s.mu.Lock()
	err := s.tr.Add(s.cur)
	s.mu.Unlock()
	if err != nil {
		return errorf("wal at %s: %w", at, err)
	}
	return nil
}

// begin opens the next transaction, committed at t.
func (s *session) begin(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.tr.Begin()
	if err != nil {
		return err
	}
	s.cur, s.curMsgs = id, 0
	s.commits.begin(id, t)
	return nil
}

// commit closes the open transaction, ending at end, and counts its
// messages as known replays when the last session had it done.
func (s *session) commit(end pglogrepl.LSN) error {
	s.mu.Lock()
	err := s.tr.Commit(s.cur, end)
	s.commits.follow(s.tr)
	s.mu.Unlock()
	if err == nil && s.curMsgs > 0 && s.prev.known(end) {
		s.m.replayed.Add(float64(s.curMsgs))
	}
	return err
}

// origin is the stream a session reads, as the sink marks its records:
// the server's source, timeline and where its timeline's ancestors ended.
func origin(srv *slot.Server) sink.Origin {
	o := sink.Origin{Source: schema.WALSource(srv.SystemID, srv.Database, srv.Slot), Timeline: srv.Timeline}
	if len(srv.History) > 0 {
		o.Ended = make(map[int32]pglogrepl.LSN, len(srv.History))
		for _, h := range srv.History {
			o.Ended[h.Timeline] = h.End
		}
	}
	return o
}
