package leader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// ApplicationName is the application_name of every lock session, so an
// operator can find them in pg_stat_activity.
const ApplicationName = "walrelay-leader"

const (
	// connectTimeout bounds a connection attempt when the URL sets none.
	connectTimeout = 5 * time.Second
	// queryTimeout bounds the standby's queries (identify, try lock, holder).
	queryTimeout = 5 * time.Second
	// releaseTimeout bounds the unlock and the close at the end of a term.
	releaseTimeout = time.Second
)

// Config says which slot to lead and how closely to watch the lock.
type Config struct {
	// ConnString is a PostgreSQL URL or keyword/value string for the
	// database that holds the slot: a normal connection, directly or
	// through a session-mode pooler (the lock lives in one server
	// session). Required.
	ConnString string
	// Slot is the replication slot this process would publish from.
	// Required. The lock key is LockKey(current_database(), Slot).
	Slot string
	// RetryInterval is how often a standby tries the lock, and how long a
	// leader that stepped down waits before it campaigns again.
	// Defaults to 2s.
	RetryInterval time.Duration
	// CheckInterval is how often the leader proves its lock session alive
	// with a round trip on the lock connection. Each check must answer
	// within 4/5 of it, or leadership is in doubt. Defaults to 1s.
	CheckInterval time.Duration
	// LeaseTimeout is how long after its last successful check (counted
	// from when the check was sent) the leader may still publish. Must
	// exceed CheckInterval. The server-side dead-client timeouts of the
	// lock session are derived from it (see the package doc).
	// Defaults to 5s.
	LeaseTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.RetryInterval <= 0 {
		c.RetryInterval = 2 * time.Second
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = time.Second
	}
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = 5 * time.Second
	}
}

func (c *Config) validate() error {
	if c.ConnString == "" {
		return errors.New("postgres url is required")
	}
	if err := schema.ValidateSlotName(c.Slot); err != nil {
		return err
	}
	if c.LeaseTimeout <= c.CheckInterval {
		return fmt.Errorf("lease timeout %s must exceed check interval %s", c.LeaseTimeout, c.CheckInterval)
	}
	return nil
}

// checkTimeout bounds one check, so checks never queue behind each other.
func (c *Config) checkTimeout() time.Duration {
	return c.CheckInterval * 4 / 5
}

// pgConfig parses ConnString and adds the lock session's settings. They
// are SET once connected, not sent as startup parameters: a session
// pooler (PgBouncer) refuses every startup parameter but a few
// ("unsupported startup parameter"), and the lock may be held through one.
func (c *Config) pgConfig() (*pgx.ConnConfig, error) {
	pc, err := pgx.ParseConfig(c.ConnString)
	if err != nil {
		return nil, slot.ParseError(err)
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = connectTimeout
	}
	pc.RuntimeParams["application_name"] = ApplicationName
	set := setSQL(sessionParams(c.LeaseTimeout, c.RetryInterval))
	after := pc.AfterConnect
	pc.AfterConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		if err := conn.Exec(ctx, set).Close(); err != nil {
			return fmt.Errorf("set the lock session's settings: %w", err)
		}
		return nil
	}
	return pc, nil
}

// setSQL is one SET per setting, in name order.
func setSQL(params map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		fmt.Fprintf(&b, "SET %s = '%s'; ", k, params[k])
	}
	return b.String()
}

// sessionParams are the lock session's server settings. The TCP ones make
// the server drop a silently vanished client, and with it the lock, after
// at least 2*lease (PostgreSQL's defaults leave it to the OS: hours). They
// are user-settable and ignored on Unix sockets. With the default lease:
// idle 5s, interval 2s, 3 probes, user timeout 10000ms.
//
// A leader whose process is paused (SIGSTOP) or whose network stalls keeps
// a healthy TCP connection, so none of those fire; idle_session_timeout
// does (PostgreSQL 14+): a live leader proves its lock every CheckInterval
// and a standby tries every RetryInterval, so a session idle for twice the
// longer of lease and retry interval belongs to a process that cannot act,
// and the server ends it, releasing the lock for a standby. With the
// defaults: 10s.
func sessionParams(lease, retry time.Duration) map[string]string {
	idle := max(5, int((lease+time.Second-1)/time.Second))
	userTimeout := max(10*time.Second, 2*lease)
	idleSession := 2 * max(lease, retry)
	return map[string]string{
		"tcp_keepalives_idle":     strconv.Itoa(idle),
		"tcp_keepalives_interval": "2",
		"tcp_keepalives_count":    "3",
		"tcp_user_timeout":        strconv.FormatInt(userTimeout.Milliseconds(), 10),
		"idle_session_timeout":    strconv.FormatInt(idleSession.Milliseconds(), 10),
	}
}

// Defaults is the Config with every optional field at its default.
func Defaults() Config {
	var c Config
	c.setDefaults()
	return c
}
