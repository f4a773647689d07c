package slot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/failpoint"
	"github.com/walrelay/walrelay/schema"
)

// finalStatusTimeout bounds the last status update at shutdown.
const finalStatusTimeout = 5 * time.Second

// Stream is the replication stream of one slot. Constructing it starts
// nothing; Run does the work on the caller's goroutine.
type Stream struct {
	cfg     Config
	log     *zap.Logger
	metrics *Metrics

	conn   *pgconn.PgConn
	server Server // what IDENTIFY_SYSTEM said on conn
	// sent is the highest position sent in a status update; positions sent
	// never move backwards, whatever Position returns.
	sent pglogrepl.LSN
	// walEnd is the server's WAL end as last reported, for the logs.
	walEnd     pglogrepl.LSN
	nextStatus time.Time // the next status update is due, changed or not
	nextCheck  time.Time // the next look at whether pos() moved
}

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
// delivers events to out, in WAL order, until ctx is done or the stream
// fails. The first event is KindStart.
//
// Then it stops receiving, closes out, and keeps answering the server until
// drained is closed (the consumer has finished with everything it
// received); it sends a final status update with pos() and returns. pos is
// called from Run's goroutine only. Run returns nil after a stop by ctx.
func (s *Stream) Run(ctx context.Context, out chan<- Event, pos Position, drained <-chan struct{}) (err error) {
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
	s.log.Info("replication started", zap.String("slot", s.cfg.Slot), zap.Stringer("confirmed_flush_lsn", info.ConfirmedFlush),
		zap.String("server", s.server.Addr), zap.Int32("timeline", s.server.Timeline))
	if s.server.HistoryErr != nil {
		s.log.Info("cannot read the timeline's history: with --resume-from-kafka, records in Kafka from before the failover vouch for nothing",
			zap.Int32("timeline", s.server.Timeline), zap.Error(s.server.HistoryErr))
	}

	if err := s.deliver(ctx, out, pos, Event{Kind: KindStart, Pos: info.ConfirmedFlush, Server: &s.server}); err == nil {
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
	policy := backoff.Policy{Min: s.cfg.ActiveRetryMin, Max: s.cfg.ActiveRetryMax}
	for attempt := 0; ; attempt++ {
		info, _, err := preflight(ctx, &s.cfg)
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
			attempt = 0 // the holder is gone: the slot frees at once
		}
		d := policy.Delay(attempt)
		s.log.Info("replication slot is active in another process; waiting",
			zap.String("slot", s.cfg.Slot), zap.Int32("active_pid", info.ActivePID), zap.Duration("retry_in", d))
		if err := backoff.Sleep(ctx, d); err != nil {
			return Info{}, err
		}
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
	ident, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("identify system: %w", err)
	}
	s.server = Server{SystemID: ident.SystemID, Timeline: ident.Timeline, Database: ident.DBName, Slot: s.cfg.Slot,
		Addr: conn.Conn().RemoteAddr().String()}
	// The history lets a resuming sink trust Kafka records read before a
	// failover, up to where the old timeline ended (DECISIONS 47). A
	// server that will not tell costs duplicates only.
	s.server.History, s.server.HistoryErr = timelineHistory(ctx, conn, ident.Timeline)
	// The slot name was validated (PostgreSQL's own rule), quoted here so
	// that the replication grammar takes it verbatim. publication_names is
	// a string holding a list of identifiers: the name is quoted as an
	// identifier, then as the command's string.
	err = pglogrepl.StartReplication(ctx, conn, `"`+s.cfg.Slot+`"`, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		// messages: walrelay's heartbeats (schema.HeartbeatPrefix) arrive as
		// logical messages; PostgreSQL 14 and later understand the option.
		PluginArgs: []string{"proto_version '1'", "publication_names " + schema.QuoteCommandString(schema.QuoteIdentifier(s.cfg.Publication)), "messages 'true'"},
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
func (s *Stream) receive(ctx context.Context, out chan<- Event, pos Position) error {
	var d deadline
	defer d.stop()
	for {
		if err := s.statusIfDue(ctx, pos); err != nil {
			return err
		}
		msg, err := s.conn.ReceiveMessage(d.until(ctx, s.wake()))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) {
				continue
			}
			var big *pgproto3.ExceededMaxBodyLenErr
			if errors.As(err, &big) {
				return &TooLargeError{Slot: s.cfg.Slot, Size: big.ActualBodyLen, Limit: s.cfg.MaxMessageBytes}
			}
			return fmt.Errorf("receive from slot %q: %w", s.cfg.Slot, err)
		}
		if err := s.handle(ctx, out, pos, msg); err != nil {
			return err
		}
	}
}

// deadline is the context a receive waits under: ctx until the stream's
// next wake-up. It is kept while the wake-up does not move, instead of made
// for each message: a timer and a context a message, and the parent's map
// of children they grow, were a tenth of walrelay's CPU in a drain.
type deadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

// until is ctx with the deadline at.
func (d *deadline) until(ctx context.Context, at time.Time) context.Context {
	if d.ctx == nil || !at.Equal(d.at) || d.ctx.Err() != nil {
		d.stop()
		d.ctx, d.cancel = context.WithDeadline(ctx, at)
		d.at = at
	}
	return d.ctx
}

func (d *deadline) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

func (s *Stream) handle(ctx context.Context, out chan<- Event, pos Position, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return s.handleCopyData(ctx, out, pos, m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("slot %q: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return fmt.Errorf("slot %q: the server ended the replication stream", s.cfg.Slot)
	}
	return nil
}

func (s *Stream) handleCopyData(ctx context.Context, out chan<- Event, pos Position, data []byte) error {
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
		if err := s.deliver(ctx, out, pos, Event{Kind: KindKeepalive, Pos: pkm.ServerWALEnd}); err != nil {
			return err
		}
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
		return s.deliver(ctx, out, pos, Event{Kind: KindData, Pos: xld.WALStart, Data: own})
	}
	return nil
}

func (s *Stream) observeWALEnd(end pglogrepl.LSN) {
	if end > s.walEnd {
		s.walEnd = end
	}
}

// deliver hands ev to out, sending status updates while it waits so that a
// blocked consumer (Kafka down) never silences the connection.
func (s *Stream) deliver(ctx context.Context, out chan<- Event, pos Position, ev Event) error {
	select {
	case out <- ev: // the common case: the consumer keeps up
		return nil
	default:
	}
	for {
		timer := time.NewTimer(time.Until(s.wake()))
		select {
		case out <- ev:
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
			if err := s.sendStatus(ctx, pos, true); err != nil {
				return err
			}
			s.endCopy(ctx)
			return nil
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

// endCopy ends the replication stream the way the protocol asks: CopyDone,
// then reading (and discarding) until the server answers ReadyForQuery. The
// final status update was sent before the CopyDone, so once the server
// answers it has applied that update. Closing instead with the server's
// data still unread makes the kernel reset the connection, and the server
// can then drop the update it had not read yet: the next start repeats what
// was already confirmed. Failing here costs duplicates only, so endCopy logs
// and returns; the caller closes the connection either way.
func (s *Stream) endCopy(ctx context.Context) {
	s.conn.Frontend().Send(&pgproto3.CopyDone{})
	err := s.conn.Frontend().Flush()
	for err == nil {
		var msg pgproto3.BackendMessage
		msg, err = s.conn.ReceiveMessage(ctx)
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			s.log.Debug("replication stream ended", zap.String("slot", s.cfg.Slot))
			return
		case *pgproto3.ErrorResponse:
			err = pgconn.ErrorResponseToPgError(m)
		}
	}
	s.log.Warn("the replication stream did not end cleanly; the next start may repeat messages confirmed just now",
		zap.String("slot", s.cfg.Slot), zap.Error(err))
}
