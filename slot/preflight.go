package slot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/check"
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
	// Conflicting (PostgreSQL 16 and later) is true for a logical slot
	// invalidated by a conflict with recovery.
	Conflicting bool
	// InvalidationReason (17 and later) says why the server invalidated
	// the slot: wal_removed, rows_removed, wal_level_insufficient,
	// idle_timeout (18); empty for a usable slot.
	InvalidationReason string
	// InactiveSince (17 and later) is when the slot was last released, in
	// UTC; zero while it is in use, and before 17.
	InactiveSince time.Time
	// Synced (17 and later) is true for a slot a standby keeps in step with
	// its primary's failover slot (sync_replication_slots).
	Synced bool
	// Failover (17 and later) is true for a slot the primary lets its
	// standbys synchronise, so that it survives a failover.
	Failover bool
}

// ConfigError is a preflight verdict: the server, the publication or the
// slot is not as walrelay needs it. Retrying does not help; an operator
// has to act. Result is the failed rule, with its fix.
type ConfigError struct{ Result check.Result }

// Error says the rule, what it found and the fix on one line.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: %s; fix: %s", e.Result.Name, e.Result.Found, e.Result.Fix)
}

// IsConfig reports whether err is, or wraps, a *ConfigError.
func IsConfig(err error) bool {
	var e *ConfigError
	return errors.As(err, &e)
}

// firstFailure is the first failed result as a *ConfigError, or nil.
func firstFailure(results []check.Result) error {
	for _, r := range results {
		if r.Status == check.Fail {
			return &ConfigError{r}
		}
	}
	return nil
}

// connect opens a normal (non-replication) connection for the preflight.
func connect(ctx context.Context, cfg *Config) (*pgx.Conn, error) {
	cc, err := cfg.sqlConfig()
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres %s:%d: %w", cc.Host, cc.Port, err)
	}
	return conn, nil
}

// ReadSlot reads the slot's row of pg_replication_slots; a missing slot
// is the zero Info.
func ReadSlot(ctx context.Context, conn *pgx.Conn, name string) (Info, error) {
	f, err := ReadFigures(ctx, conn, name)
	return f.Info, err
}

// Preflight judges the server, the role, the table, the publication, a
// pending recovery and the slot by the rules `walrelay check` reports,
// without replicating, and returns the first failure as a *ConfigError:
// `walrelay run` calls it before it waits for leadership, so that bad
// configuration fails at once.
// It logs the rules' warnings, once; a fact it cannot read is returned as
// that error, never as a verdict.
func Preflight(ctx context.Context, cfg Config, log *zap.Logger) (Info, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Info{}, err
	}
	info, results, err := preflight(ctx, &cfg)
	if err == nil {
		logWarnings(log, results)
	}
	return info, err
}

// preflight is the verdict of Preflight, with the results it came from: a
// Stream asks it at the start of each session, and logs nothing.
func preflight(ctx context.Context, cfg *Config) (Info, []check.Result, error) {
	conn, err := connect(ctx, cfg)
	if err != nil {
		return Info{}, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f := readFacts(ctx, conn, cfg)
	if err := f.err(); err != nil {
		return Info{}, nil, err
	}
	results := judge(f, allRules()...)
	return f.figures.Info, results, firstFailure(results)
}

// CheckTable judges the outbox table alone, by the rules `walrelay check`
// reports on it: it must exist, and have the columns of cfg.Columns (the
// required ones, cfg.AggregateTypeDefault standing in for the aggregate
// type's) of types walrelay reads. A failure is returned as a
// *ConfigError, a fact it cannot read as that error. It reads the catalog
// only: no replication right, no publication or slot, nothing written.
// `walrelay schema --existing` asks it before it prints what goes beside
// the table.
func CheckTable(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	conn, err := connect(ctx, &cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f := &facts{cfg: &cfg}
	f.readTable(ctx, conn)
	for _, err := range []error{f.tableErr, f.columnsErr} {
		switch {
		case isInsufficientPrivilege(err):
			return fmt.Errorf("read the outbox table: %w (connect as a role that may see the table, such as its owner)", err)
		case err != nil:
			return fmt.Errorf("read the outbox table: %w", err)
		}
	}
	return firstFailure(judge(f, tableRules))
}

// logWarnings logs each warning of results with its fix.
func logWarnings(log *zap.Logger, results []check.Result) {
	for _, r := range results {
		if r.Status == check.Warn {
			log.Warn("postgres setup: "+r.Name, zap.String("found", r.Found), zap.String("fix", r.Fix))
		}
	}
}

// Init creates the publication (first: a slot must not predate the
// publication it decodes with) and a permanent pgoutput slot, each only when
// missing, and judges each group of rules before the next step: it refuses
// as the preflight does, on the first failure. Running it twice is safe.
//
// Init is all or nothing as far as WAL goes: prepare, when given, runs on
// Init's connection after the server and the publication are judged and
// before the slot is created (the objects a program makes besides them,
// such as walrelay's tables), so that a failure there leaves no slot
// behind retaining WAL; and a slot Init created that then fails its rules
// is dropped again, which the error says.
func Init(ctx context.Context, cfg Config, log *zap.Logger, prepare ...func(context.Context, *pgx.Conn) error) (Info, error) {
	conn, f, err := openPrepared(ctx, cfg, log, prepare)
	if err != nil {
		return Info{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := ensureSlot(ctx, conn, f, log); err != nil {
		return Info{}, err
	}
	return f.figures.Info, nil
}

// openPrepared is what Init and PrepareRecovery do before the slot:
// connect, judge the server and the role, create the missing publication
// and judge it, then run prepare, refusing on the first failure. The
// connection is the caller's to close; on an error it is closed already.
func openPrepared(ctx context.Context, cfg Config, log *zap.Logger, prepare []func(context.Context, *pgx.Conn) error) (*pgx.Conn, *facts, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, nil, err
	}
	conn, err := connect(ctx, &cfg)
	if err != nil {
		return nil, nil, err
	}
	f, err := preparedOn(ctx, conn, &cfg, log, prepare)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return conn, f, nil
}

func preparedOn(ctx context.Context, conn *pgx.Conn, cfg *Config, log *zap.Logger, prepare []func(context.Context, *pgx.Conn) error) (*facts, error) {
	f := readFacts(ctx, conn, cfg)
	if err := f.err(); err != nil {
		return nil, err
	}
	if err := firstFailure(judge(f, serverRules()...)); err != nil {
		return nil, err
	}
	if err := ensurePublication(ctx, conn, f, log); err != nil {
		return nil, err
	}
	for _, p := range prepare {
		if err := p(ctx, conn); err != nil {
			return nil, fmt.Errorf("%w (no replication slot was created)", err)
		}
	}
	return f, nil
}

// ensurePublication creates the missing publication, then judges it. When
// the role may not create it, the verdict is the "publication create"
// rule's: who must run which statement.
func ensurePublication(ctx context.Context, conn *pgx.Conn, f *facts, log *zap.Logger) error {
	cfg := f.cfg
	if !f.pub.Exists {
		_, err := conn.Exec(ctx, schema.CreatePublicationForSQL(cfg.Publication, f.tableNames()...))
		if isInsufficientPrivilege(err) {
			if verdict := firstFailure(creatorRule(f)); verdict != nil {
				return verdict
			}
		}
		if err != nil && !isDuplicate(err) {
			return fmt.Errorf("create publication %q: %w", cfg.Publication, err)
		}
		log.Info("created publication", zap.String("publication", cfg.Publication), zap.Stringer("table", cfg.Table))
		if f.readPublication(ctx, conn); f.pubErr != nil {
			return f.pubErr
		}
	}
	if err := extendPublication(ctx, conn, f, log); err != nil {
		return err
	}
	return firstFailure(judge(f, publicationRules))
}

// extendPublication adds to the publication the outbox tables of a slot of
// several that it lacks: adding a table to the config file's list and
// running `walrelay init` relays it from then on. When the role may not
// (ALTER PUBLICATION takes owning the publication and the table), the
// error says what the owner must run. A slot of one table is left to the
// rules: a publication of other tables is the user's, not walrelay's to
// change.
func extendPublication(ctx context.Context, conn *pgx.Conn, f *facts, log *zap.Logger) error {
	if len(f.others) == 0 || f.pubErr != nil || !f.pub.Exists || f.pub.AllTables {
		return nil
	}
	pub := f.cfg.Publication
	added := false
	for _, tf := range append([]*facts{f}, f.others...) {
		t := tf.cfg.Table
		if f.pub.Covers(t) || !tf.tableExists || slices.ContainsFunc(f.pub.Tables, func(pt schema.Table) bool { return slices.Contains(tf.partitions, pt) }) {
			continue
		}
		q := fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", schema.QuoteIdentifier(pub), t.Quoted())
		if _, err := conn.Exec(ctx, q); err != nil {
			if isInsufficientPrivilege(err) {
				return fmt.Errorf("publication %q does not include table %s, and role %s may not add it (ALTER PUBLICATION takes owning the publication and the table): have their owner run %s; then run `walrelay init` again",
					pub, t, f.server.user, q)
			}
			return fmt.Errorf("add table %s to publication %q: %w", t, pub, err)
		}
		log.Info("added the table to the publication", zap.String("publication", pub), zap.Stringer("table", t))
		added = true
	}
	if added {
		f.readPublication(ctx, conn)
		return f.pubErr
	}
	return nil
}

// ensureSlot creates the missing slot, then judges it; a slot it created
// that fails is dropped again.
func ensureSlot(ctx context.Context, conn *pgx.Conn, f *facts, log *zap.Logger) error {
	cfg := f.cfg
	created := false
	if !f.figures.Exists {
		_, err := conn.Exec(ctx, createSlotSQL(f.server.versionNum), cfg.Slot)
		if err != nil && !isDuplicate(err) {
			return fmt.Errorf("create replication slot %q: %w", cfg.Slot, err)
		}
		if f.readFigures(ctx, conn); f.figuresErr != nil {
			return f.figuresErr
		}
		created = true
		log.Info("created replication slot", zap.String("slot", cfg.Slot), zap.Stringer("confirmed_flush_lsn", f.figures.ConfirmedFlush))
	}
	verdict := firstFailure(judge(f, slotRules))
	if verdict == nil || !created {
		return verdict
	}
	if err := dropSlot(ctx, conn, cfg.Slot, log); err != nil {
		return fmt.Errorf("%w; the replication slot %q init created is left behind and retains WAL until dropped (%v): SELECT pg_drop_replication_slot('%s')", verdict, cfg.Slot, err, cfg.Slot)
	}
	return fmt.Errorf("%w (init dropped the replication slot %q it had created, so that it retains no WAL)", verdict, cfg.Slot)
}

// failoverVersion is the first PostgreSQL with failover slots
// (server_version_num).
const failoverVersion = 170000

// createSlotSQL creates a permanent pgoutput slot; on PostgreSQL 17 and
// later with failover, so that standbys with sync_replication_slots keep
// it in step and a promoted standby has it.
func createSlotSQL(versionNum int) string {
	if versionNum >= failoverVersion {
		// slot_name, plugin, temporary, twophase, failover
		return "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)"
	}
	return "SELECT pg_create_logical_replication_slot($1, 'pgoutput')"
}

// isInsufficientPrivilege is PostgreSQL's "permission denied" (42501).
func isInsufficientPrivilege(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}

// isDuplicate reports a concurrent creation of the same object (42710).
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
	cc, err := cfg.sqlConfig()
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("build postgres pool config: %w", err)
	}
	pcfg.ConnConfig = cc
	pcfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool to %s:%d: %w", cc.Host, cc.Port, err)
	}
	return pool, nil
}
