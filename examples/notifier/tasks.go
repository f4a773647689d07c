package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/schema"
)

// task is one confirmation e-mail to send: a row of the tasks table.
type task struct {
	Key       string // the task's own idempotency key: "order-confirmation/<order_id>"
	OrderID   string
	Recipient string // a bare address, validated
	Subject   string
	Body      string
	Attempts  int       // claims so far, this one included (after claim)
	CreatedAt time.Time // also the e-mail's Date, so that a resend is the same e-mail
}

// taskKey is the idempotency key of an order's confirmation e-mail.
func taskKey(orderID string) string { return "order-confirmation/" + orderID }

// db is what the task store needs: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// taskStore reads and writes the tasks table. Every method runs one
// statement on the db it is given, so that the consumer can insert inside
// its inbox transaction.
type taskStore struct {
	table string // quoted, schema-qualified
	name  string // unquoted, for index names and messages
}

func newTaskStore(t schema.Table) (*taskStore, error) {
	if err := t.Validate("tasks table"); err != nil {
		return nil, err
	}
	return &taskStore{table: t.Quoted(), name: t.Name}, nil
}

// DDL creates the tasks table and its index of due tasks; safe to run twice.
func (s *taskStore) DDL() string {
	return `CREATE TABLE IF NOT EXISTS ` + s.table + ` (
	task_key        text PRIMARY KEY,
	order_id        text NOT NULL,
	recipient       text NOT NULL,
	subject         text NOT NULL,
	body            text NOT NULL,
	status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent')),
	attempts        int NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	last_error      text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	sent_at         timestamptz
);
CREATE INDEX IF NOT EXISTS ` + schema.QuoteIdentifier(s.name+"_due") + ` ON ` + s.table + ` (next_attempt_at) WHERE status = 'pending';
`
}

// ensureSchema runs the DDL statements in one transaction under an advisory
// lock: two instances starting at once would otherwise race on CREATE TABLE
// IF NOT EXISTS (a unique violation in the catalog).
func ensureSchema(ctx context.Context, b interface {
	Begin(context.Context) (pgx.Tx, error)
}, ddl ...string) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('walrelay example notifier ddl'))"); err != nil {
		return fmt.Errorf("create tables: lock: %w", err)
	}
	for _, d := range ddl {
		if _, err := tx.Exec(ctx, d); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	return nil
}

// insert adds t as a pending task, due now, unless a task with its key is
// there already (a repeat of the order's message under a new message id, or
// the same order submitted twice): false then.
func (s *taskStore) insert(ctx context.Context, db db, t task) (bool, error) {
	tag, err := db.Exec(ctx, `INSERT INTO `+s.table+` (task_key, order_id, recipient, subject, body)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (task_key) DO NOTHING`,
		t.Key, t.OrderID, t.Recipient, t.Subject, t.Body)
	if err != nil {
		return false, fmt.Errorf("insert e-mail task %s: %w", t.Key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// claim takes the pending task that has been due longest: it counts the
// attempt and pushes next_attempt_at out by lease, so that other senders
// leave it alone while this one sends, and it comes back by itself when
// this sender dies. ok is false when no task is due.
func (s *taskStore) claim(ctx context.Context, db db, lease time.Duration) (t task, ok bool, err error) {
	err = db.QueryRow(ctx, `UPDATE `+s.table+`
		SET attempts = attempts + 1, next_attempt_at = now() + $1::bigint * interval '1 millisecond'
		WHERE task_key = (
			SELECT task_key FROM `+s.table+`
			WHERE status = 'pending' AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT 1
			FOR UPDATE SKIP LOCKED)
		RETURNING task_key, order_id, recipient, subject, body, attempts, created_at`,
		lease.Milliseconds()).Scan(&t.Key, &t.OrderID, &t.Recipient, &t.Subject, &t.Body, &t.Attempts, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return task{}, false, nil
	}
	if err != nil {
		return task{}, false, fmt.Errorf("claim a due e-mail task: %w", err)
	}
	return t, true, nil
}

// sent marks the task sent. It is called after the SMTP server accepted the
// e-mail, whoever holds the task now.
func (s *taskStore) sent(ctx context.Context, db db, key string) error {
	_, err := db.Exec(ctx, `UPDATE `+s.table+` SET status = 'sent', sent_at = now(), last_error = NULL
		WHERE task_key = $1 AND status = 'pending'`, key)
	if err != nil {
		return fmt.Errorf("mark e-mail task %s sent: %w", key, err)
	}
	return nil
}

// failed records a failed attempt and makes the task due again after
// delay. attempt is the claim's count: a fencing token, so that a sender
// whose lease ran out cannot move the due time of another sender's claim.
func (s *taskStore) failed(ctx context.Context, db db, key string, attempt int, delay time.Duration, reason string) error {
	_, err := db.Exec(ctx, `UPDATE `+s.table+`
		SET next_attempt_at = now() + $3::bigint * interval '1 millisecond', last_error = $4
		WHERE task_key = $1 AND attempts = $2 AND status = 'pending'`,
		key, attempt, delay.Milliseconds(), reason)
	if err != nil {
		return fmt.Errorf("record the failed attempt at e-mail task %s: %w", key, err)
	}
	return nil
}
