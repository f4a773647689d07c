package slot

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/failpoint"
)

// finalStatusTimeout bounds the last status update at shutdown.
const finalStatusTimeout = 5 * time.Second

// Stream is the replication stream of one slot. Constructing it starts
// nothing; Run does the work on the caller's goroutine.
type Stream struct {
	cfg     Config
	log     *zap.Logger
	metrics *Metrics

	conn *pgconn.PgConn
	// sent is the highest position sent in a status update; positions sent
	// never move backwards, whatever Position returns.
	sent pglogrepl.LSN
	// walEnd is the server's WAL end as last reported, for the logs.
	walEnd     pglogrepl.LSN
	nextStatus time.Time // the next status update is due, changed or not
	nextCheck  time.Time // the next look at whether pos() moved

	// batch holds the events read but not yet delivered, batchBytes their
	// data: see flushIfDue.
	batch      []Event
	batchBytes int
}

// A batch is delivered when the connection's read buffer is empty, or when
// it reaches either bound first. Handing events over one by one cost a
// goroutine wake-up each (most of walrelay's CPU on a backlog of small
// transactions); a batch costs one, and the bounds keep the events queued
// between the stream and its consumer small.
const (
	maxBatchEvents = 256
	maxBatchBytes  = 1 << 20
)

// New validates cfg. metrics may be nil.
func New(cfg Config, log *zap.Logger, metrics *Metrics) (*Stream, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Stream{cfg: cfg, log: log, metrics: metrics}, nil
}

// Run checks the server, publication and slot, starts replication and
// delivers events to out, in WAL order and in batches (never empty), until
// ctx is done or the stream fails. The first event is KindStart.
//
// Then it stops receiving, closes out, and keeps answering the server until
// drained is closed (the consumer has finished with everything it
// received); it sends a final status update with pos() and returns. pos is
// called from Run's goroutine only. Run returns nil after a stop by ctx.
func (s *Stream) Run(ctx context.Context, out chan<- []Event, pos Position, drained <-chan struct{}) (err error) {
	closed := false
	closeOut := func() {
		if !closed {
			closed = true
			close(out)
		}
	}
	defer closeOut()

	info, err := s.start(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer s.conn.Close(context.Background())
	s.sent = info.ConfirmedFlush
	s.metrics.confirmed.Set(float64(s.sent))
	s.log.Info("replication started", zap.String("slot", s.cfg.Slot), zap.Stringer("confirmed_flush_lsn", info.ConfirmedFlush))

	if err := s.deliver(ctx, out, pos, []Event{{Kind: KindStart, Pos: info.ConfirmedFlush}}); err == nil {
		err = s.receive(ctx, out, pos)
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	closeOut()
	return s.finish(pos, drained)
}

// start runs the preflight and START_REPLICATION, retrying with backoff
// while another process holds the slot (or taking it over, with TakeOver).
func (s *Stream) start(ctx context.Context) (Info, error) {
	backoff := s.cfg.ActiveRetryMin
	for {
		info, err := preflight(ctx, &s.cfg, s.log)
		if err != nil {
			return Info{}, err
		}
		if !info.Active {
			err = s.startReplication(ctx)
			if err == nil {
				return info, nil
			}
			if !isSlotActive(err) {
				return Info{}, err
			}
		} else if s.cfg.TakeOver && s.terminateHolder(ctx, info.ActivePID) {
			backoff = s.cfg.ActiveRetryMin
		}
		s.log.Info("replication slot is active in another process; waiting",
			zap.String("slot", s.cfg.Slot), zap.Int32("active_pid", info.ActivePID), zap.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
			return Info{}, ctx.Err()
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(2*backoff, s.cfg.ActiveRetryMax)
	}
}

// terminateHolder ends the walsender of a stale holder of the slot and
// reports whether it did.
func (s *Stream) terminateHolder(ctx context.Context, pid int32) bool {
	conn, err := connect(ctx, &s.cfg)
	if err != nil {
		s.log.Warn("cannot take over the replication slot", zap.String("slot", s.cfg.Slot), zap.Error(err))
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var done bool
	err = conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&done)
	if err != nil || !done {
		s.log.Warn("cannot end the slot's previous reader; waiting for it to go",
			zap.String("slot", s.cfg.Slot), zap.Int32("active_pid", pid), zap.Bool("terminated", done), zap.Error(err))
		return false
	}
	s.log.Warn("ended the slot's previous reader, which no longer holds leadership",
		zap.String("slot", s.cfg.Slot), zap.Int32("active_pid", pid))
	return true
}

// isSlotActive recognises "replication slot ... is active for PID ..."
// (SQLSTATE 55006, object_in_use).
func isSlotActive(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55006"
}

func (s *Stream) startReplication(ctx context.Context) error {
	pc, err := s.cfg.pgConfig(true)
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("open replication connection to %s:%d: %w", pc.Host, pc.Port, err)
	}
	if _, err := pglogrepl.IdentifySystem(ctx, conn); err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("identify system: %w", err)
	}
	// Names were validated: they are plain identifiers, quoted here so that
	// the replication grammar takes them verbatim.
	err = pglogrepl.StartReplication(ctx, conn, `"`+s.cfg.Slot+`"`, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		// messages: walrelay's heartbeats (schema.HeartbeatPrefix) arrive as
		// logical messages; PostgreSQL 14 and later understand the option.
		PluginArgs: []string{"proto_version '1'", `publication_names '"` + s.cfg.Publication + `"'`, "messages 'true'"},
	})
	if err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("start replication on slot %q: %w", s.cfg.Slot, err)
	}
	s.conn = conn
	s.nextStatus = time.Now().Add(s.cfg.StatusInterval)
	s.nextCheck = time.Now().Add(s.cfg.ConfirmInterval)
	return nil
}

// receive reads the stream until ctx is done or it fails.
//
// It bounds each read with a deadline on the connection itself and reads
// with context.Background(): pgconn then skips its per-call context watch
// (a context with a deadline and a cancellation hook for every message,
// which cost as much as decoding a row). Cancelling ctx moves the deadline
// to the past, which ends a blocked read at once.
func (s *Stream) receive(ctx context.Context, out chan<- []Event, pos Position) error {
	nc := s.conn.Conn()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Now()) })
	defer stop()
	var deadline time.Time
	for {
		if err := s.statusIfDue(ctx, pos); err != nil {
			return err
		}
		if w := s.wake(); !w.Equal(deadline) {
			deadline = w
			if err := nc.SetReadDeadline(w); err != nil {
				return fmt.Errorf("receive from slot %q: %w", s.cfg.Slot, err)
			}
		}
		// Checked after the deadline is set: a cancellation from here on
		// moves it to the past after this did.
		if err := ctx.Err(); err != nil {
			return err
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				// Nothing came in time; what was read before a partial
				// message must not wait for the rest of it.
				if err := s.flush(ctx, out, pos); err != nil {
					return err
				}
				continue
			}
			var big *pgproto3.ExceededMaxBodyLenErr
			if errors.As(err, &big) {
				return &TooLargeError{Slot: s.cfg.Slot, Size: big.ActualBodyLen, Limit: s.cfg.MaxMessageBytes}
			}
			return fmt.Errorf("receive from slot %q: %w", s.cfg.Slot, err)
		}
		if err := s.handle(ctx, pos, msg); err != nil {
			return err
		}
		if err := s.flushIfDue(ctx, out, pos); err != nil {
			return err
		}
	}
}

// flushIfDue delivers the batch when the connection has nothing more
// buffered (the next read would wait for the server: what was read must
// not wait with it) or when the batch is full.
func (s *Stream) flushIfDue(ctx context.Context, out chan<- []Event, pos Position) error {
	if len(s.batch) < maxBatchEvents && s.batchBytes < maxBatchBytes && s.conn.Frontend().ReadBufferLen() > 0 {
		return nil
	}
	return s.flush(ctx, out, pos)
}

// flush delivers the batch.
func (s *Stream) flush(ctx context.Context, out chan<- []Event, pos Position) error {
	if len(s.batch) == 0 {
		return nil
	}
	b := s.batch
	// The consumer owns b now; the next batch starts about as large.
	s.batch, s.batchBytes = make([]Event, 0, len(b)), 0
	return s.deliver(ctx, out, pos, b)
}

func (s *Stream) handle(ctx context.Context, pos Position, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return s.handleCopyData(ctx, pos, m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("slot %q: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return fmt.Errorf("slot %q: the server ended the replication stream", s.cfg.Slot)
	}
	return nil
}

// handleCopyData adds a keepalive or a WAL message to the batch, and
// answers a keepalive that asks for a reply.
func (s *Stream) handleCopyData(ctx context.Context, pos Position, data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("slot %q: empty CopyData message", s.cfg.Slot)
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("slot %q: %w", s.cfg.Slot, err)
		}
		s.observeWALEnd(pkm.ServerWALEnd)
		s.batch = append(s.batch, Event{Kind: KindKeepalive, Pos: pkm.ServerWALEnd})
		if pkm.ReplyRequested {
			err := s.sendStatus(ctx, pos, false)
			failpoint.Inject("keepalive-reply")
			return err
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("slot %q: %w", s.cfg.Slot, err)
		}
		s.observeWALEnd(xld.ServerWALEnd)
		// The receive buffer is reused by the next ReceiveMessage: the
		// consumer gets its own copy.
		own := make([]byte, len(xld.WALData))
		copy(own, xld.WALData)
		s.batch = append(s.batch, Event{Kind: KindData, Pos: xld.WALStart, Data: own})
		s.batchBytes += len(own)
	}
	return nil
}

func (s *Stream) observeWALEnd(end pglogrepl.LSN) {
	if end > s.walEnd {
		s.walEnd = end
	}
}

// deliver hands the batch b to out, sending status updates while it waits
// so that a blocked consumer (Kafka down) never silences the connection.
func (s *Stream) deliver(ctx context.Context, out chan<- []Event, pos Position, b []Event) error {
	select {
	case out <- b: // the common case: the consumer keeps up
		return nil
	default:
	}
	for {
		timer := time.NewTimer(time.Until(s.wake()))
		select {
		case out <- b:
			timer.Stop()
			return nil
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
			if err := s.statusIfDue(ctx, pos); err != nil {
				return err
			}
		}
	}
}

// wake is when the stream must next look at its status: the status
// interval's deadline, or the next check for a newly safe position.
func (s *Stream) wake() time.Time {
	if s.nextCheck.Before(s.nextStatus) {
		return s.nextCheck
	}
	return s.nextStatus
}

// statusIfDue sends a status update when the status interval is up, or
// when the safe position moved and ConfirmInterval has passed since the
// last look: the server forgets WAL sooner, and a crash replays less.
func (s *Stream) statusIfDue(ctx context.Context, pos Position) error {
	now := time.Now()
	if !now.Before(s.nextStatus) {
		return s.sendStatus(ctx, pos, false)
	}
	if now.Before(s.nextCheck) {
		return nil
	}
	s.nextCheck = now.Add(s.cfg.ConfirmInterval)
	if pos() > s.sent {
		return s.sendStatus(ctx, pos, false)
	}
	return nil
}

// sendStatus confirms pos() (never less than before) as write, flush and
// apply, set explicitly: pglogrepl would copy write into a zero flush.
func (s *Stream) sendStatus(ctx context.Context, pos Position, final bool) error {
	if p := pos(); p > s.sent {
		s.sent = p
	}
	err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: s.sent,
		WALFlushPosition: s.sent,
		WALApplyPosition: s.sent,
		ClientTime:       time.Now(),
	})
	if err != nil {
		return fmt.Errorf("send status update on slot %q: %w", s.cfg.Slot, err)
	}
	now := time.Now()
	s.nextStatus = now.Add(s.cfg.StatusInterval)
	s.nextCheck = now.Add(s.cfg.ConfirmInterval)
	s.metrics.statusSent(s.sent)
	if !final {
		failpoint.Inject("after-status")
	}
	if final {
		s.log.Info("final status update sent", zap.String("slot", s.cfg.Slot), zap.Stringer("confirmed_lsn", s.sent))
	} else {
		s.log.Debug("status update sent", zap.Stringer("confirmed_lsn", s.sent), zap.Stringer("server_wal_end", s.walEnd))
	}
	return nil
}

// finish waits until the consumer has drained, answering the server
// meanwhile, then confirms what is done under a fresh timeout.
func (s *Stream) finish(pos Position, drained <-chan struct{}) error {
	for {
		timer := time.NewTimer(time.Until(s.wake()))
		select {
		case <-drained:
			timer.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), finalStatusTimeout)
			defer cancel()
			return s.sendStatus(ctx, pos, true)
		case <-timer.C:
			ctx, cancel := context.WithTimeout(context.Background(), finalStatusTimeout)
			err := s.statusIfDue(ctx, pos)
			cancel()
			if err != nil {
				return err
			}
		}
	}
}
