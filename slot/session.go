package slot

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/check"
)

// SettingReplicationConnString is Config.ReplicationConnString, named as
// the errors and fixes of this package name it.
const SettingReplicationConnString = "slot.Config.ReplicationConnString"

// connFacts are what the replication URL reaches: the replication
// connection (IDENTIFY_SYSTEM) and a session there, whose backend must be
// its own (the leader's lock is held on one).
type connFacts struct {
	// separate is whether the replication URL is not the SQL URL.
	separate bool
	// addr is where the replication connection went; system and database
	// are IDENTIFY_SYSTEM's, set when it worked.
	addr, system, database string
	// sqlSystem is the SQL connection's system identifier
	// (pg_control_system), "" when the role may not read it.
	sqlSystem string
	// shared is whether a session at the replication URL shares its
	// server backend with another client: a transaction pooler.
	shared     bool
	sessionPID uint32
	sessionErr error
}

// probeReplication opens a replication connection as cfg says and runs
// IDENTIFY_SYSTEM: whether the server lets this role replicate, whatever
// its attributes say, and which server and database it reached.
func probeReplication(ctx context.Context, cfg *Config, cf *connFacts) error {
	pc, err := cfg.pgConfig(true)
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cf.addr = conn.Conn().RemoteAddr().String()
	id, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return err
	}
	cf.system, cf.database = id.SystemID, id.DBName
	return nil
}

// readSession opens a session at the replication URL, as the leader's
// lock does, and asks SharedSession whether its backend is its own.
func readSession(ctx context.Context, cfg *Config, cf *connFacts) {
	cc, err := cfg.sessionConfig()
	if err != nil {
		cf.sessionErr = err
		return
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		cf.sessionErr = err
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&cf.sessionPID); err != nil {
		cf.sessionErr = err
		return
	}
	cf.shared, cf.sessionErr = SharedSession(ctx, cc, cf.sessionPID)
}

// SharedSession says whether a session whose backend is pid shares that
// backend with other clients, as it does behind a transaction (or
// statement) pooler: it opens a second connection as cc says, while the
// first one is idle, and asks its backend's pid. A direct connection, or a
// session pooler's, always gets a backend of its own; a transaction
// pooler hands the idle first session's backend to the next client that
// asks (PgBouncer reuses its most recently used server connection first,
// server_round_robin = 0, its default). A session lock held through such
// a pooler belongs to a server connection that other clients then use:
// no lock at all.
func SharedSession(ctx context.Context, cc *pgx.ConnConfig, pid uint32) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, fmt.Errorf("open a second session to %s:%d: %w", cc.Host, cc.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var other uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&other); err != nil {
		return false, fmt.Errorf("read the second session's backend: %w", err)
	}
	return other == pid, nil
}

// pooledRefusal is whether err is a connection pooler or proxy refusing a
// replication connection: PgBouncer before 1.23 refuses the startup
// parameter ("unsupported startup parameter: replication"), RDS Proxy
// says it "doesn't support streaming replication mode".
func pooledRefusal(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "unsupported startup parameter") || strings.Contains(msg, "support streaming replication mode")
}

// sessionRule judges the session the leader's lock is held on: its
// backend must be its own.
func sessionRule(f *facts) []check.Result {
	const name = "lock session"
	where := f.cfg.hostPort(f.cfg.replicationURL())
	c := f.conn
	switch {
	case c.sessionErr != nil:
		return one(check.Failure(name, fmt.Sprintf("cannot open a session at %s: %s", where, oneLineText(c.sessionErr)),
			"Check "+SettingReplicationConnString+" and that the server accepts this client."))
	case c.shared:
		return one(check.Failure(name,
			fmt.Sprintf("a session at %s shares its server backend (pid %d) with other clients: a transaction pooler, where the leader's lock would be held for whoever uses that backend next", where, c.sessionPID),
			"Point "+SettingReplicationConnString+" at the database's direct endpoint (or a session-mode pooler); "+
				SettingConnString+" may stay on the transaction pooler for walrelay's SQL."+f.provider.directEndpoint()))
	}
	return one(check.Pass(name, fmt.Sprintf("a session at %s keeps its own server backend (pid %d): the leader's lock holds there", where, c.sessionPID)))
}

// replicationURLRule judges a separate replication URL: it must reach the
// database the SQL does, on the same server. Nothing when there is one URL.
func replicationURLRule(f *facts) []check.Result {
	const name = "replication url"
	c := f.conn
	switch {
	case !c.separate || f.role.probeErr != nil || f.serverErr != nil:
		return nil // the role rule says why the probe failed
	case c.database != f.server.database:
		return one(check.Failure(name, fmt.Sprintf("%s reaches database %s, %s database %s", SettingReplicationConnString, c.database, SettingConnString, f.server.database),
			"Point both at the same database: the slot decodes the database its replication connection names."))
	case c.sqlSystem != "" && c.system != c.sqlSystem:
		return one(check.Failure(name, fmt.Sprintf("%s reaches server %s (system %s), %s system %s", SettingReplicationConnString, c.addr, c.system, SettingConnString, c.sqlSystem),
			"Point both at the same server: through a pooler, the pooler's own server must be the one "+SettingReplicationConnString+" names."))
	}
	found := fmt.Sprintf("%s reaches %s, database %s", SettingReplicationConnString, c.addr, c.database)
	if c.sqlSystem != "" {
		found += ", the same server as " + SettingConnString + " (system " + c.system + ")"
	}
	return one(check.Pass(name, found))
}

// hostPort is the first host and port of a connection string, as written;
// "" when it does not parse (validate said so first).
func (c *Config) hostPort(s string) string {
	pc, err := pgconn.ParseConfig(s)
	if err != nil {
		return ""
	}
	if strings.HasPrefix(pc.Host, "/") {
		return pc.Host
	}
	return net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))
}
