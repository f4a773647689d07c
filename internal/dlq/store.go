package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/schema"
)

// DB is what the store needs of PostgreSQL: a *pgxpool.Pool (the relay
// shares one per process) or a *pgx.Conn (a CLI verb).
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Store reads and writes one dead-letter table. It is safe for concurrent
// use when db is (a pool is; a single connection is not).
type Store struct {
	db    DB
	table string // quoted, schema-qualified
}

// New returns a Store over the dead-letter table t
// (schema.Config.DeadLetterTable()). It does not touch the database.
func New(db DB, t schema.Table) (*Store, error) {
	if db == nil {
		return nil, errors.New("dead-letter store: nil database")
	}
	if err := t.Validate("dead-letter table"); err != nil {
		return nil, err
	}
	return &Store{db: db, table: t.Quoted()}, nil
}

// Table is the dead-letter table, quoted and schema-qualified.
func (s *Store) Table() string { return s.table }

// Ready fails unless the dead-letter table is there (`walrelay init`
// creates it).
func (s *Store) Ready(ctx context.Context) error {
	rows, err := s.db.Query(ctx, "SELECT to_regclass($1) IS NOT NULL", s.table)
	if err != nil {
		return fmt.Errorf("look up dead-letter table %s: %w", s.table, err)
	}
	ok, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
	if err != nil {
		return fmt.Errorf("look up dead-letter table %s: %w", s.table, err)
	}
	if !ok {
		return fmt.Errorf("dead-letter table %s does not exist: run `walrelay init` (or apply `walrelay schema`)", s.table)
	}
	return nil
}

// MissingPrivileges lists what the current role lacks of SELECT, INSERT,
// UPDATE and DELETE on the table, all of which parking and `walrelay dlq`
// use. The table must exist (Ready).
func (s *Store) MissingPrivileges(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT p FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p
		WHERE NOT has_table_privilege($1, p) ORDER BY array_position(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'], p)`, s.table)
	if err != nil {
		return nil, fmt.Errorf("read privileges on dead-letter table %s: %w", s.table, err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read privileges on dead-letter table %s: %w", s.table, err)
	}
	return missing, nil
}

// Park stores dl, in a transaction of its own. True means the message is in
// the table and the caller must not publish it; false (only for a blocked
// message) means the caller publishes it after all.
//
// A message that is not blocked (dl.BlockedBy nil) is always stored.
// Parking a position that is already in the table (a replay) leaves the row
// as it was, parked or discarded, and returns true: an operator's discard
// is not undone, and a discarded message is not published.
//
// A message blocked behind an earlier one is stored only while a parked row
// of its aggregate comes before dl.Position. The check waits for a
// concurrent Retry or Discard of those rows (see the package doc). When
// none is left, Park stores nothing and returns false, unless the position
// is already in the table (a replay: true, as above).
func (s *Store) Park(ctx context.Context, dl schema.DeadLetter) (parked bool, err error) {
	args, err := insertArgs(dl)
	if err != nil {
		return false, fmt.Errorf("park %s: %w", dl.Position, err)
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("park %s: begin: %w", dl.Position, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	if dl.BlockedBy != nil {
		ahead, err := s.parkedAhead(ctx, tx, aggregateOf(dl), dl.Position)
		if err != nil {
			return false, err
		}
		if !ahead {
			return s.stored(ctx, tx, dl.Position)
		}
	}
	if _, err := tx.Exec(ctx, s.insertSQL(), args...); err != nil {
		return false, fmt.Errorf("park %s: %w", dl.Position, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("park %s: commit: %w", dl.Position, err)
	}
	return true, nil
}

// parkedAhead reports whether a parked row of agg comes before p, holding a
// share lock on it until tx ends, so that no Retry or Discard can take it
// away before the message behind it is parked.
func (s *Store) parkedAhead(ctx context.Context, tx pgx.Tx, agg schema.Aggregate, p schema.Position) (bool, error) {
	if !agg.Known() {
		return false, fmt.Errorf("park %s: blocked, but the message has no aggregate id", p)
	}
	rows, err := tx.Query(ctx, `SELECT 1 FROM `+s.table+`
		WHERE status = 'parked' AND aggregate_type = $1 AND aggregate_id = $2
		  AND (commit_lsn, seq) < ($3::pg_lsn, $4::integer)
		LIMIT 1 FOR SHARE`, agg.Type, agg.ID, p.CommitLSN.String(), int64(p.Seq))
	if err != nil {
		return false, fmt.Errorf("park %s: look for parked messages ahead: %w", p, err)
	}
	defer rows.Close()
	ahead := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("park %s: look for parked messages ahead: %w", p, err)
	}
	return ahead, nil
}

// stored reports whether a row at p is in the table, in any status.
func (s *Store) stored(ctx context.Context, tx pgx.Tx, p schema.Position) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table+` WHERE commit_lsn = $1::pg_lsn AND seq = $2)`,
		p.CommitLSN.String(), int64(p.Seq)).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("park %s: look for the row: %w", p, err)
	}
	return ok, nil
}

// insertColumns are the columns Park writes, in the order of insertArgs.
const insertColumns = `commit_lsn, seq, message_id, aggregate_type, aggregate_id, aggregate_version,
	type, topic, target_topic, payload, content_type, headers, occurred_at, committed_at,
	row_data, reason, blocked_by`

func (s *Store) insertSQL() string {
	return `INSERT INTO ` + s.table + ` (` + insertColumns + `)
		VALUES ($1::pg_lsn, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
		ON CONFLICT (commit_lsn, seq) DO NOTHING`
}

// Blockers returns, for each aggregate with parked rows, its first parked
// row (lowest position). Rows without an aggregate id and discarded rows
// are not blockers.
func (s *Store) Blockers(ctx context.Context) ([]schema.Blocker, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT ON (aggregate_type, aggregate_id)
			coalesce(aggregate_type, ''), aggregate_id, commit_lsn::text, seq, message_id
		FROM `+s.table+`
		WHERE status = 'parked' AND aggregate_id IS NOT NULL AND aggregate_id <> ''
		ORDER BY aggregate_type, aggregate_id, commit_lsn, seq`)
	if err != nil {
		return nil, fmt.Errorf("read blockers from %s: %w", s.table, err)
	}
	var out []schema.Blocker
	for rows.Next() {
		var b schema.Blocker
		var lsn string
		var seq int64
		var id nullID
		if err := rows.Scan(&b.Aggregate.Type, &b.Aggregate.ID, &lsn, &seq, &id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read blockers from %s: %w", s.table, err)
		}
		if b.Position, err = position(lsn, seq); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read blockers from %s: %w", s.table, err)
		}
		b.MessageID = id.ptr()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read blockers from %s: %w", s.table, err)
	}
	return out, nil
}
