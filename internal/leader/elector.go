package leader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/slot"
)

// Elector campaigns for the leadership of one slot. Run drives it; Check
// may be called from any goroutine.
type Elector struct {
	cfg     Config
	pg      *pgx.ConnConfig
	log     *zap.Logger
	lease   *lease
	changes prometheus.Counter
	running atomic.Bool

	// beforeCheck, when set (by tests only, before Run), is called before
	// every check of the lock; blocking in it stalls the checks the way a
	// paused process would.
	beforeCheck func(ctx context.Context)
}

// New validates cfg and registers the metrics with reg (which may be nil).
// It connects nowhere: Run does.
func New(cfg Config, log *zap.Logger, reg prometheus.Registerer) (*Elector, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("leader config: %w", err)
	}
	pg, err := cfg.pgConfig()
	if err != nil {
		return nil, fmt.Errorf("leader config: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	e := &Elector{
		cfg:   cfg,
		pg:    pg,
		log:   log.With(zap.String("slot", cfg.Slot)),
		lease: newLease(cfg.LeaseTimeout),
	}
	if err := e.register(reg); err != nil {
		return nil, err
	}
	return e, nil
}

// Check returns nil only while this process holds leadership with an
// unexpired lease; otherwise an error matching ErrNotLeader (ErrLeaseExpired
// when the lease ran out). It reads the monotonic clock and an atomic, no
// I/O, so a process paused longer than LeaseTimeout fails it on wake before
// any goroutine can publish. Safe for concurrent use.
func (e *Elector) Check() error {
	return e.lease.check(time.Now())
}

// Run campaigns until ctx is done, then returns nil. Whenever it holds the
// lock it calls lead with a context that is cancelled as soon as leadership
// is in doubt (a check failed or was late, the lease expired, the lock
// connection was lost) or ctx is done; Check fails from that moment on. Run
// waits for lead to return, releases the lock (or drops the connection),
// waits RetryInterval and campaigns again. If lead returns an error while
// still leader, Run releases the lock and returns that error. Transient
// connection failures are logged and retried, never returned. Run starts no
// goroutine that outlives it, and must not be called twice at once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	if lead == nil {
		return errors.New("leader: lead func is nil")
	}
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("leader: Run is already running")
	}
	defer e.running.Store(false)
	var sb standby
	for ctx.Err() == nil {
		err := e.session(ctx, lead, &sb)
		var lf *leadFailure
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &lf):
			return lf.err
		case err != nil && !errors.Is(err, errSteppedDown):
			sb.trouble(e.log, err, e.cfg.RetryInterval)
		}
		_ = backoff.Sleep(ctx, e.cfg.RetryInterval) // an ended ctx ends the loop
	}
	return nil
}

// session is one lock connection: connect, campaign, lead for one term,
// close. It returns errSteppedDown after a term, a *leadFailure when lead
// failed, and any other error when the connection failed.
func (e *Elector) session(ctx context.Context, lead func(context.Context) error, sb *standby) error {
	conn, err := pgx.ConnectConfig(ctx, e.pg)
	if err != nil {
		return fmt.Errorf("connect lock session: %w", err)
	}
	defer closeConn(conn)
	lk, err := identify(ctx, conn, e.cfg.Slot)
	if err != nil {
		return err
	}
	// Behind a transaction pooler the lock would be held by a server
	// connection other clients then use: no lock at all. That is a setup
	// to fix, not a fault to retry.
	shared, err := slot.SharedSession(ctx, e.pg, lk.pid)
	if err != nil {
		return fmt.Errorf("verify lock session: %w", err)
	}
	if shared {
		return &leadFailure{err: fmt.Errorf("the leader lock session to %s:%d shares its server backend (pid %d) with other clients: a transaction pooler, where the lock would not hold; point %s at the database's direct endpoint",
			e.pg.Host, e.pg.Port, lk.pid, slot.SettingReplicationConnString)}
	}
	sb.connected(e.log)
	sent, err := e.campaign(ctx, conn, lk, sb)
	if err != nil {
		return err
	}
	return e.term(ctx, conn, lk, sent, lead)
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	// A close error leaves nothing to do: the socket is gone either way,
	// and with it the session and its lock.
	_ = conn.Close(ctx)
}
