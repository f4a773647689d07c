package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/failpoint"
)

// errSteppedDown ends a session whose term is over; Run campaigns again.
var errSteppedDown = errors.New("stepped down")

// errLockGone is a check that found the session alive without the lock.
var errLockGone = errors.New("lock session no longer holds the leader lock")

// leadFailure carries an error of lead's own, which Run returns.
type leadFailure struct{ err error }

func (f *leadFailure) Error() string { return f.err.Error() }

// ending says why a term ended.
type ending struct {
	doubt    error // leadership is in doubt: why; nil for a voluntary end
	leadErr  error // what lead returned, when leadDone
	leadDone bool
}

// term leads while the lock is held: it grants the lease, runs lead in a
// goroutine, proves the lock every CheckInterval and, when the term ends,
// cancels lead, waits for it and releases the lock. When leadership is in
// doubt the lease is revoked before anything else, so nothing more is
// published. On a voluntary stop (ctx done) the lease stays valid, and the
// lock keeps being proved, while lead drains what it has in flight. The lock
// is released only after lead has returned, so a standby never leads beside
// a live lead func of this process.
func (e *Elector) term(ctx context.Context, conn *pgx.Conn, ls lockSession, sent time.Time, lead func(context.Context) error) error {
	e.acquired(ls, sent)
	leadCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- lead(leadCtx) }()

	end := e.hold(leadCtx, conn, ls, done)
	if end.doubt != nil {
		e.lease.revoke()
	}
	cancel(end.doubt)
	if !end.leadDone && end.doubt == nil {
		end = e.drain(conn, ls, done)
	} else if !end.leadDone {
		end.leadErr = <-done
	}
	e.lease.revoke()
	if end.doubt == nil {
		unlock(conn, ls.key)
	}
	return e.lost(ctx, end)
}

// drain waits for lead to finish after a voluntary stop, proving the lock
// meanwhile so that the lease stays honest; a failed proof revokes it.
func (e *Elector) drain(conn *pgx.Conn, ls lockSession, done <-chan error) ending {
	end := e.hold(context.Background(), conn, ls, done)
	if end.doubt != nil {
		e.lease.revoke()
		end.leadErr = <-done
	}
	return end
}

// hold proves the lock every CheckInterval until lead returns, ctx is done
// or a proof fails.
func (e *Elector) hold(ctx context.Context, conn *pgx.Conn, ls lockSession, done <-chan error) ending {
	t := time.NewTicker(e.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return ending{leadErr: err, leadDone: true}
		case <-ctx.Done():
			return ending{}
		case <-t.C:
		}
		if err := e.prove(ctx, conn, ls); err != nil {
			if ctx.Err() != nil {
				return ending{}
			}
			return ending{doubt: err}
		}
	}
}

// prove renews the lease if the lock session answers, in time, that its
// backend still holds the key. A lease that ran out first is not renewed:
// whatever the session says now, this process may have been unable to act
// on its leadership for longer than the lease promises.
func (e *Elector) prove(ctx context.Context, conn *pgx.Conn, ls lockSession) error {
	if e.beforeCheck != nil {
		e.beforeCheck(ctx)
	}
	if err := e.lease.check(time.Now()); err != nil {
		return err
	}
	sent := time.Now()
	held, err := holdsLock(ctx, conn, ls.key, e.cfg.checkTimeout())
	if err != nil {
		return err
	}
	if !held {
		return errLockGone
	}
	e.lease.renew(sent)
	return e.lease.check(time.Now())
}

const holdsSQL = `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND pid = pg_backend_pid()
  AND classid::int8 = $1 AND objid::int8 = $2)`

func holdsLock(ctx context.Context, conn *pgx.Conn, key int64, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	classid, objid := lockTag(key)
	var held bool
	if err := conn.QueryRow(ctx, holdsSQL, classid, objid).Scan(&held); err != nil {
		return false, fmt.Errorf("check leader lock: %w", err)
	}
	return held, nil
}

// unlock releases the lock explicitly, so a standby can win at its next
// try. If it fails, closing the connection releases the lock all the same.
func unlock(conn *pgx.Conn, key int64) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
}

func (e *Elector) acquired(ls lockSession, sent time.Time) {
	e.lease.renew(sent)
	e.changes.Inc()
	e.log.Info("leadership acquired", zap.Int64("key", ls.key),
		zap.String("database", ls.database), zap.Uint32("backend_pid", ls.pid))
}

// lost logs the end of a term and tells Run what to do next.
func (e *Elector) lost(ctx context.Context, end ending) error {
	e.changes.Inc()
	switch {
	case end.doubt != nil:
		// The lock's session failed (PostgreSQL restarted, say): the term
		// ends and a new campaign reconnects, as a failed replication
		// session does (the relay's "reconnect" failpoint): whichever of
		// the two notices first.
		failpoint.Inject("reconnect")
		e.log.Warn("leadership lost", zap.String("reason", "in doubt"), zap.Error(end.doubt))
	case ctx.Err() != nil:
		e.log.Info("leadership lost", zap.String("reason", "shutting down"))
		if end.leadErr != nil && !errors.Is(end.leadErr, context.Canceled) && !errors.Is(end.leadErr, context.DeadlineExceeded) {
			e.log.Warn("lead failed while shutting down", zap.Error(end.leadErr))
		}
	case end.leadErr != nil:
		e.log.Info("leadership lost", zap.String("reason", "lead failed"), zap.Error(end.leadErr))
		return &leadFailure{err: end.leadErr}
	default:
		e.log.Info("leadership lost", zap.String("reason", "lead returned"))
	}
	return errSteppedDown
}
