package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// ErrKeyReused: the key was already used for a different request (another
// fingerprint). HTTP services answer 422.
var ErrKeyReused = errors.New("idempotency key reused for a different request")

// Beginner opens a transaction: *pgxpool.Pool and *pgx.Conn both do.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Config names the keys table.
type Config struct {
	// Table holds one row per key. Defaults to public.idempotency_keys.
	Table schema.Table
}

// Store runs business commands at most once per idempotency key.
type Store struct{}

// New validates c and returns a Store.
func New(c Config) (*Store, error) { panic("idempotency: not implemented yet (issue 6)") }

// DDL creates the keys table; safe to run twice.
func (s *Store) DDL() string { panic("idempotency: not implemented yet (issue 6)") }

// Do runs fn at most once for key. The first call claims the key, runs fn in
// the same transaction and stores fn's response with the key before it
// commits: the command's effects (say an order and its outbox row), the key
// and the response commit together or not at all. A later call with the
// same key and fingerprint returns the stored response with replayed true
// and runs nothing; a call while the first is still running waits for it.
// A different fingerprint under a used key is ErrKeyReused. When fn fails,
// everything rolls back, the key included, and a retry runs fn again.
func (s *Store) Do(ctx context.Context, db Beginner, key string, fingerprint []byte,
	fn func(ctx context.Context, tx pgx.Tx) (response []byte, err error)) (response []byte, replayed bool, err error) {
	panic("idempotency: not implemented yet (issue 6)")
}

// Prune deletes keys older than olderThan, batch rows at a time with pause
// between batches, and returns how many it deleted. A retry of a request
// whose key was pruned runs the command again: keep keys longer than any
// client retries.
func (s *Store) Prune(ctx context.Context, db Beginner, olderThan time.Duration, batch int, pause time.Duration) (int64, error) {
	panic("idempotency: not implemented yet (issue 6)")
}
