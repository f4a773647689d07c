package slot

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// Info is what pg_replication_slots says of the slot.
type Info struct {
	Exists         bool
	Plugin         string
	Type           string
	Database       string
	Active         bool
	ActivePID      int32
	ConfirmedFlush pglogrepl.LSN
	RestartLSN     pglogrepl.LSN
	// WALStatus is reserved, extended, unreserved or lost.
	WALStatus string
}

// ConfigError is a preflight verdict: the server, the publication or the
// slot is not as walrelay needs it. Retrying does not help; an operator
// has to act.
type ConfigError struct{ err error }

func (e *ConfigError) Error() string { return e.err.Error() }
func (e *ConfigError) Unwrap() error { return e.err }

// IsConfig reports whether err is, or wraps, a *ConfigError.
func IsConfig(err error) bool {
	var e *ConfigError
	return errors.As(err, &e)
}

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// connect opens a normal (non-replication) connection for the preflight.
func connect(ctx context.Context, cfg *Config) (*pgx.Conn, error) {
	pc, err := cfg.pgConfig(false)
	if err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("build postgres config: %w", err)
	}
	cc.Config = *pc
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres %s:%d: %w", pc.Host, pc.Port, err)
	}
	return conn, nil
}

// checkServer verifies the server can do logical decoding.
func checkServer(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return configErrorf("wal_level is %q; walrelay needs wal_level=logical (set it in postgresql.conf and restart the server)", level)
	}
	return nil
}

// checkTable verifies the outbox table exists.
func checkTable(ctx context.Context, conn *pgx.Conn, t schema.Table) error {
	exists, err := tableExists(ctx, conn, t)
	if err != nil {
		return err
	}
	if !exists {
		return configErrorf("table %s does not exist (create it with the DDL of `walrelay schema`, or set --table)", t)
	}
	return nil
}

func tableExists(ctx context.Context, conn *pgx.Conn, t schema.Table) (bool, error) {
	var exists bool
	err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t.Quoted()).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", t, err)
	}
	return exists, nil
}

// publication is what pg_publication says of one publication.
type publication struct {
	exists                                bool
	insert, update, delete, truncate, all bool
	tables                                []schema.Table
}

func readPublication(ctx context.Context, conn *pgx.Conn, name string) (publication, error) {
	var p publication
	err := conn.QueryRow(ctx,
		"SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables FROM pg_publication WHERE pubname = $1",
		name).Scan(&p.insert, &p.update, &p.delete, &p.truncate, &p.all)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read publication %q: %w", name, err)
	}
	p.exists = true
	rows, err := conn.Query(ctx, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1", name)
	if err != nil {
		return p, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	p.tables, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (schema.Table, error) {
		var t schema.Table
		return t, r.Scan(&t.Schema, &t.Name)
	})
	if err != nil {
		return p, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	return p, nil
}

// covers reports whether the publication includes table t.
func (p publication) covers(t schema.Table) bool {
	for _, pt := range p.tables {
		if pt == t {
			return true
		}
	}
	return false
}

// extras lists what the publication publishes besides the inserts into
// table t: other operations, all tables, or other tables.
func (p publication) extras(t schema.Table) []string {
	var more []string
	for _, op := range []struct {
		on   bool
		name string
	}{{p.update, "update"}, {p.delete, "delete"}, {p.truncate, "truncate"}} {
		if op.on {
			more = append(more, op.name)
		}
	}
	others := len(p.tables)
	if p.covers(t) {
		others--
	}
	switch {
	case p.all:
		more = append(more, "all tables")
	case others == 1:
		more = append(more, "1 other table")
	case others > 1:
		more = append(more, fmt.Sprintf("%d other tables", others))
	}
	return more
}

// checkPublication fails when the publication cannot deliver the outbox
// inserts, and warns when it publishes more than it should.
func checkPublication(p publication, name string, t schema.Table, log *zap.Logger) error {
	if !p.exists {
		return configErrorf("publication %q does not exist (run `walrelay init`)", name)
	}
	if !p.insert {
		return configErrorf("publication %q does not publish inserts; recreate it with publish = 'insert'", name)
	}
	if !p.covers(t) {
		return configErrorf("publication %q does not include table %s", name, t)
	}
	if len(p.extras(t)) > 0 {
		log.Warn("publication publishes more than inserts into the outbox table; walrelay skips the rest, but decoding it costs time",
			zap.String("publication", name), zap.Int("tables", len(p.tables)), zap.Bool("all_tables", p.all))
	}
	return nil
}

// ReadSlot reads the slot's row of pg_replication_slots.
func ReadSlot(ctx context.Context, conn *pgx.Conn, name string) (Info, error) {
	var (
		info      Info
		db        *string
		pid       *int32
		confirmed *pglogrepl.LSN
		restart   *pglogrepl.LSN
		walStatus *string
	)
	err := conn.QueryRow(ctx, `SELECT coalesce(plugin, ''), slot_type, database, active, active_pid,
		confirmed_flush_lsn::text, restart_lsn::text, wal_status
		FROM pg_replication_slots WHERE slot_name = $1`, name).
		Scan(&info.Plugin, &info.Type, &db, &info.Active, &pid, &confirmed, &restart, &walStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, nil
	}
	if err != nil {
		return Info{}, fmt.Errorf("read slot %q: %w", name, err)
	}
	info.Exists = true
	if db != nil {
		info.Database = *db
	}
	if pid != nil {
		info.ActivePID = *pid
	}
	if confirmed != nil {
		info.ConfirmedFlush = *confirmed
	}
	if restart != nil {
		info.RestartLSN = *restart
	}
	if walStatus != nil {
		info.WALStatus = *walStatus
	}
	return info, nil
}

// checkSlot fails on a slot walrelay must not stream from. It never drops or
// recreates a slot: a lost slot means WAL, and maybe messages, are gone, and
// an operator has to decide what to do about it.
func checkSlot(info Info, name, database string) error {
	switch {
	case !info.Exists:
		return configErrorf("replication slot %q does not exist (run `walrelay init`)", name)
	case info.Type != "logical" || info.Plugin != "pgoutput":
		return configErrorf("replication slot %q is a %s slot with plugin %q; walrelay needs a logical pgoutput slot", name, info.Type, info.Plugin)
	case info.Database != database:
		return configErrorf("replication slot %q belongs to database %q, not %q", name, info.Database, database)
	case info.WALStatus == "lost":
		return configErrorf("replication slot %q is lost (wal_status=lost): the server removed WAL it still needed, so outbox messages may never have been published; "+
			"walrelay will not recreate it: reconcile the outbox table with Kafka, then drop the slot and run `walrelay init`", name)
	case info.ConfirmedFlush == 0:
		return configErrorf("replication slot %q has no confirmed_flush_lsn; it is not usable for logical decoding", name)
	}
	return nil
}

func currentDatabase(ctx context.Context, conn *pgx.Conn) (string, error) {
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return "", fmt.Errorf("read current database: %w", err)
	}
	return db, nil
}

// Preflight checks the server, the table, the publication and the slot as
// Run will, without replicating: `walrelay run` calls it before it waits for
// leadership, so that bad configuration fails at once.
func Preflight(ctx context.Context, cfg Config, log *zap.Logger) (Info, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Info{}, err
	}
	return preflight(ctx, &cfg, log)
}

// preflight checks everything Run needs and returns the slot's state.
func preflight(ctx context.Context, cfg *Config, log *zap.Logger) (Info, error) {
	return onServer(ctx, cfg, func(conn *pgx.Conn) (Info, error) {
		pub, err := readPublication(ctx, conn, cfg.Publication)
		if err != nil {
			return Info{}, err
		}
		if err := checkPublication(pub, cfg.Publication, cfg.Table, log); err != nil {
			return Info{}, err
		}
		db, err := currentDatabase(ctx, conn)
		if err != nil {
			return Info{}, err
		}
		info, err := ReadSlot(ctx, conn, cfg.Slot)
		if err != nil {
			return Info{}, err
		}
		return info, checkSlot(info, cfg.Slot, db)
	})
}

// Init creates the publication (first: a slot must not predate the
// publication it decodes with) and a permanent pgoutput slot, each only when
// missing, and validates what already exists. Running it twice is safe.
func Init(ctx context.Context, cfg Config, log *zap.Logger) (Info, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Info{}, err
	}
	return onServer(ctx, &cfg, func(conn *pgx.Conn) (Info, error) {
		if err := ensurePublication(ctx, conn, &cfg, log); err != nil {
			return Info{}, err
		}
		return ensureSlot(ctx, conn, &cfg, log)
	})
}

// onServer connects, checks that the server decodes logically and that the
// outbox table exists, then runs fn on the connection.
func onServer(ctx context.Context, cfg *Config, fn func(*pgx.Conn) (Info, error)) (Info, error) {
	conn, err := connect(ctx, cfg)
	if err != nil {
		return Info{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkServer(ctx, conn); err != nil {
		return Info{}, err
	}
	if err := checkTable(ctx, conn, cfg.Table); err != nil {
		return Info{}, err
	}
	return fn(conn)
}

func ensurePublication(ctx context.Context, conn *pgx.Conn, cfg *Config, log *zap.Logger) error {
	pub, err := readPublication(ctx, conn, cfg.Publication)
	if err != nil {
		return err
	}
	if !pub.exists {
		sc := schema.Config{Table: cfg.Table, Publication: cfg.Publication}
		_, err := conn.Exec(ctx, schema.CreatePublicationSQL(sc))
		if isInsufficientPrivilege(err) {
			return publicationPrivilegeError(ctx, conn, sc)
		}
		if err != nil && !isDuplicate(err) {
			return fmt.Errorf("create publication %q: %w", cfg.Publication, err)
		}
		log.Info("created publication", zap.String("publication", cfg.Publication), zap.Stringer("table", cfg.Table))
		if pub, err = readPublication(ctx, conn, cfg.Publication); err != nil {
			return err
		}
	}
	return checkPublication(pub, cfg.Publication, cfg.Table, log)
}

func ensureSlot(ctx context.Context, conn *pgx.Conn, cfg *Config, log *zap.Logger) (Info, error) {
	db, err := currentDatabase(ctx, conn)
	if err != nil {
		return Info{}, err
	}
	info, err := ReadSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return Info{}, err
	}
	if !info.Exists {
		_, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot)
		if err != nil && !isDuplicate(err) {
			return Info{}, fmt.Errorf("create replication slot %q: %w", cfg.Slot, err)
		}
		if info, err = ReadSlot(ctx, conn, cfg.Slot); err != nil {
			return Info{}, err
		}
		log.Info("created replication slot", zap.String("slot", cfg.Slot), zap.Stringer("confirmed_flush_lsn", info.ConfirmedFlush))
	}
	return info, checkSlot(info, cfg.Slot, db)
}

// isDuplicate reports a concurrent creation of the same object.
// isInsufficientPrivilege is PostgreSQL's "permission denied" (42501).
func isInsufficientPrivilege(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// publicationPrivilegeError says who can create the publication walrelay's
// role may not: CREATE PUBLICATION takes ownership of the table and CREATE
// on the database, which a least-privilege role has neither of.
func publicationPrivilegeError(ctx context.Context, conn *pgx.Conn, sc schema.Config) error {
	var user, owner string
	err := conn.QueryRow(ctx, `SELECT current_user, coalesce((SELECT pg_get_userbyid(relowner) FROM pg_class
		WHERE oid = to_regclass($1)), 'the owner')`, sc.Table.Quoted()).Scan(&user, &owner)
	if err != nil {
		user, owner = "walrelay's role", "the table's owner"
	}
	return configErrorf("publication %q does not exist and role %s may not create it (CREATE PUBLICATION takes owning %s and CREATE on the database): have %s run %s, then run `walrelay init` again",
		sc.Publication, user, sc.Table, owner, schema.CreatePublicationSQL(sc))
}

func isDuplicate(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42710"
}

// OpenPool returns a pool of normal connections to cfg's database, at most
// maxConns of them, made as the preflight's are (connect timeout,
// application name, errors that never quote the URL). It connects lazily.
func OpenPool(cfg Config, maxConns int) (*pgxpool.Pool, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pc, err := cfg.pgConfig(false)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("build postgres pool config: %w", err)
	}
	pcfg.ConnConfig.Config = *pc
	pcfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool to %s:%d: %w", pc.Host, pc.Port, err)
	}
	return pool, nil
}
