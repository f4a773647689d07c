// Package topics keeps, in PostgreSQL, the partition count each topic's
// keys are routed by: the topics table beside the outbox table
// (schema.Config.TopicsTable). The sink records a topic's count when it
// first publishes to it (Store.Claim is its sink.Layouts) and holds a topic
// whose count in Kafka no longer agrees; `walrelay topics accept` records
// Kafka's count after the operator decided (Store.Accept).
//
// The verbs over the table are here too, so that cmd/walrelay only wires
// them: WriteList (`walrelay topics list`), AcceptFromKafka (`walrelay
// topics accept`) and CheckPartitions (a line of `walrelay check`).
//
// Internal: walrelay's own, for the sink, the recovery and those verbs.
package topics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// DB is what Store needs of a connection or pool.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Store reads and writes one topics table. It is safe for concurrent use
// when db is (a pool is; a single connection is not).
type Store struct {
	db    DB
	table string // quoted, schema-qualified
}

// New returns a Store over the topics table t. It does not touch the
// database.
func New(db DB, t schema.Table) (*Store, error) {
	if db == nil {
		return nil, errors.New("topics store: nil database")
	}
	if err := t.Validate("topics table"); err != nil {
		return nil, err
	}
	return &Store{db: db, table: t.Quoted()}, nil
}

// Table is the store's table, quoted.
func (s *Store) Table() string { return s.table }

// recordedByRun is the recorded_by of a count walrelay recorded itself.
const recordedByRun = "walrelay run: the count when it first published to the topic"

// Claim returns the partition count recorded for topic, recording n first
// when none is (sink.Layouts).
//
// When another process records the topic at the same moment, the insert
// waits for it and does nothing, and the statement's snapshot, taken
// before, does not see its row: the statement then finds none, and a second
// one, with a new snapshot, reads it.
func (s *Store) Claim(ctx context.Context, topic string, n int) (int, error) {
	for attempt := 0; ; attempt++ {
		rows, err := s.db.Query(ctx, `WITH ins AS (
				INSERT INTO `+s.table+` (topic, partitions, recorded_by) VALUES ($1, $2, $3)
				ON CONFLICT (topic) DO NOTHING RETURNING partitions)
			SELECT partitions FROM ins UNION ALL SELECT partitions FROM `+s.table+` WHERE topic = $1 LIMIT 1`,
			topic, n, recordedByRun)
		var got int32
		if err == nil {
			got, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[int32])
		}
		if errors.Is(err, pgx.ErrNoRows) && attempt == 0 {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("record the partition count of topic %q in %s: %w", topic, s.table, err)
		}
		return int(got), nil
	}
}

// Layout is one row of the topics table.
type Layout struct {
	Topic      string
	Partitions int
	RecordedAt time.Time
	RecordedBy string
}

// Get returns topic's row; found is false when it has none.
func (s *Store) Get(ctx context.Context, topic string) (l Layout, found bool, err error) {
	all, err := s.list(ctx, "WHERE topic = $1", topic)
	if err != nil || len(all) == 0 {
		return Layout{}, false, err
	}
	return all[0], true, nil
}

// List returns every row, by topic.
func (s *Store) List(ctx context.Context) ([]Layout, error) { return s.list(ctx, "") }

func (s *Store) list(ctx context.Context, where string, args ...any) ([]Layout, error) {
	rows, err := s.db.Query(ctx, `SELECT topic, partitions, recorded_at, coalesce(recorded_by, '') FROM `+s.table+` `+where+` ORDER BY topic`, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.table, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Layout, error) {
		var l Layout
		var n int32
		err := r.Scan(&l.Topic, &n, &l.RecordedAt, &l.RecordedBy)
		l.Partitions = int(n)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.table, err)
	}
	return out, nil
}

// Accept records n as topic's partition count, with by saying who and why.
func (s *Store) Accept(ctx context.Context, topic string, n int, by string) error {
	if n <= 0 {
		return fmt.Errorf("partition count %d of topic %q: must be positive", n, topic)
	}
	_, err := s.db.Exec(ctx, `INSERT INTO `+s.table+` (topic, partitions, recorded_at, recorded_by) VALUES ($1, $2, now(), $3)
		ON CONFLICT (topic) DO UPDATE SET partitions = excluded.partitions, recorded_at = excluded.recorded_at, recorded_by = excluded.recorded_by`,
		topic, n, by)
	if err != nil {
		return fmt.Errorf("record %d partitions for topic %q in %s: %w", n, topic, s.table, err)
	}
	return nil
}

// privileges are what run (SELECT, INSERT) and `walrelay topics accept`
// (UPDATE) use.
var privileges = []string{"SELECT", "INSERT", "UPDATE"}

// Ready says whether the table exists and the role holds what walrelay
// uses of it; the error names the fix.
func (s *Store) Ready(ctx context.Context) error {
	// has_table_privilege fails on a table that does not exist, hence the
	// CASE (both functions are stable: nothing folds it early).
	rows, err := s.db.Query(ctx, `SELECT to_regclass($1) IS NOT NULL,
		CASE WHEN to_regclass($1) IS NULL THEN '{}'::text[] ELSE
			ARRAY(SELECT p FROM unnest($2::text[]) WITH ORDINALITY AS u(p, i) WHERE NOT has_table_privilege($1, p) ORDER BY i) END`,
		s.table, privileges)
	if err != nil {
		return fmt.Errorf("look up topics table %s: %w", s.table, err)
	}
	type found struct {
		Exists  bool
		Missing []string
	}
	f, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[found])
	if err != nil {
		return fmt.Errorf("look up topics table %s: %w", s.table, err)
	}
	switch {
	case !f.Exists:
		return fmt.Errorf("topics table %s does not exist: run `walrelay init` (or apply `walrelay schema`), which makes it; walrelay records there the partition count of each topic it publishes to", s.table)
	case len(f.Missing) > 0:
		return fmt.Errorf("the role lacks %s on topics table %s: have the table's owner run GRANT SELECT, INSERT, UPDATE ON %s TO <role> (or apply %s)",
			strings.Join(f.Missing, ", "), s.table, s.table, schema.GrantsForRole)
	}
	return nil
}

// Open is New and Ready: a Store over the topics table t that exists and
// that the role may use, or an error naming the fix.
func Open(ctx context.Context, db DB, t schema.Table) (*Store, error) {
	s, err := New(db, t)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check is the topics table's line of `walrelay check`.
func Check(ctx context.Context, db DB, t schema.Table) check.Result {
	const name = "topics table"
	s, err := Open(ctx, db, t)
	if err != nil {
		return check.Failure(name, err.Error(), "walrelay refuses to start without it: run `walrelay init`, or have the table's owner apply `walrelay schema` and its grants.")
	}
	return check.Pass(name, s.table+" exists; the role may read, record and accept partition counts")
}
