package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
)

// session identifies one lock connection: its database, its backend and
// the key it campaigns for.
type lockSession struct {
	database string
	pid      uint32
	key      int64
}

func identify(ctx context.Context, conn *pgx.Conn, slot string) (lockSession, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var ls lockSession
	err := conn.QueryRow(ctx, "SELECT current_database(), pg_backend_pid()").Scan(&ls.database, &ls.pid)
	if err != nil {
		return ls, fmt.Errorf("identify lock session: %w", err)
	}
	ls.key = LockKey(ls.database, slot)
	return ls, nil
}

// campaign tries the lock every RetryInterval until it holds it or ctx is
// done. It returns when the winning try was sent: the first lease starts
// there.
func (e *Elector) campaign(ctx context.Context, conn *pgx.Conn, ls lockSession, sb *standby) (time.Time, error) {
	for {
		sent := time.Now()
		won, err := tryLock(ctx, conn, ls.key)
		if err != nil {
			return time.Time{}, err
		}
		if won {
			sb.reset()
			return sent, nil
		}
		e.waiting(ctx, conn, ls, sb)
		if err := backoff.Sleep(ctx, e.cfg.RetryInterval); err != nil {
			return time.Time{}, err
		}
	}
}

func tryLock(ctx context.Context, conn *pgx.Conn, key int64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var won bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&won); err != nil {
		return false, fmt.Errorf("try leader lock: %w", err)
	}
	return won, nil
}

// waiting logs "waiting for leadership" once per standby period, and again
// when another holder appears.
func (e *Elector) waiting(ctx context.Context, conn *pgx.Conn, ls lockSession, sb *standby) {
	h, found, err := findHolder(ctx, conn, ls.key)
	if err != nil {
		e.log.Debug("find leader lock holder", zap.Error(err))
	}
	if sb.waiting && h.PID == sb.holder {
		return
	}
	sb.waiting, sb.holder = true, h.PID
	fields := []zap.Field{zap.Int64("key", ls.key), zap.Duration("retry_interval", e.cfg.RetryInterval)}
	if found {
		fields = append(fields, zap.Uint32("holder_pid", h.PID),
			zap.String("holder_application", h.ApplicationName), zap.String("holder_addr", h.ClientAddr))
	}
	e.log.Info("waiting for leadership", fields...)
}

// standby is what the campaign remembers between attempts so that it logs
// changes, not repetitions. Only Run's goroutine touches it.
type standby struct {
	connErr string // the connection trouble last logged; "" while fine
	waiting bool   // "waiting for leadership" logged in this period
	holder  uint32 // the holder's pid last logged (0: none visible)
}

// trouble logs a failed lock session once per distinct error.
func (sb *standby) trouble(log *zap.Logger, err error, retry time.Duration) {
	if msg := err.Error(); msg != sb.connErr {
		sb.connErr = msg
		log.Warn("leader lock session failed; retrying", zap.Error(err), zap.Duration("retry_interval", retry))
	}
}

func (sb *standby) connected(log *zap.Logger) {
	if sb.connErr != "" {
		log.Info("leader lock session restored")
		sb.connErr = ""
	}
}

// reset ends a standby period.
func (sb *standby) reset() {
	sb.waiting, sb.holder = false, 0
}
