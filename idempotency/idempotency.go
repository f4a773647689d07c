package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/schema"
)

// ErrKeyReused: the key was already used for a different request (another
// fingerprint). HTTP services answer 422.
var ErrKeyReused = errors.New("idempotency key reused for a different request")

// ErrInvalidKey: the key is empty, longer than MaxKeyBytes, or not text
// PostgreSQL can store (invalid UTF-8, a NUL byte). HTTP services answer
// 400. The error Do returns wraps it with the reason.
var ErrInvalidKey = errors.New("invalid idempotency key")

// MaxKeyBytes is the longest key Do accepts, in bytes. A UUID is 36.
const MaxKeyBytes = 200

// Beginner opens a transaction: *pgxpool.Pool and *pgx.Conn both do.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Config names the keys table.
type Config struct {
	// Table holds one row per key. Defaults to public.idempotency_keys; an
	// empty Schema defaults to public. Its index on created_at is named
	// after it with the suffix _created_at.
	Table schema.Table
}

// Store runs business commands at most once per idempotency key. It holds
// no connection (every call takes one) and is safe for concurrent use.
type Store struct {
	table schema.Table
	index string // unquoted name of the created_at index
	sql   statements
}

// statements are the SQL texts of a Store, built once.
type statements struct {
	claim, respond, lookup, prune string
}

// New validates c and returns a Store.
func New(c Config) (*Store, error) {
	if c.Table == (schema.Table{}) {
		c.Table = schema.Table{Schema: "public", Name: "idempotency_keys"}
	}
	if c.Table.Schema == "" {
		c.Table.Schema = "public"
	}
	s := &Store{table: c.Table, index: c.Table.Name + "_created_at"}
	if err := c.Table.Validate("idempotency table"); err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	if err := schema.ValidateIdentifier("idempotency index (the table's name + _created_at)", s.index); err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	t := c.Table.Quoted()
	s.sql = statements{
		claim:   `INSERT INTO ` + t + ` (key, fingerprint, response) VALUES ($1, $2, '') ON CONFLICT (key) DO NOTHING`,
		respond: `UPDATE ` + t + ` SET response = $2 WHERE key = $1`,
		lookup:  `SELECT fingerprint, response FROM ` + t + ` WHERE key = $1`,
		prune: `DELETE FROM ` + t + ` WHERE key IN (SELECT key FROM ` + t + `
			WHERE created_at < $1 ORDER BY created_at LIMIT $2)`,
	}
	return s, nil
}

// DDL creates the keys table; safe to run twice.
func (s *Store) DDL() string {
	t := s.table.Quoted()
	return `-- walrelay idempotency keys: one row per business command, written in the
-- command's own transaction. Prune rows older than any client retries.
CREATE TABLE IF NOT EXISTS ` + t + ` (
    key         text        PRIMARY KEY,
    fingerprint bytea       NOT NULL,
    response    bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ` + schema.QuoteIdentifier(s.index) + ` ON ` + t + ` (created_at);
`
}

// Do runs fn at most once for key. The first call claims the key, runs fn in
// the same transaction and stores fn's response with the key before it
// commits: the command's effects (say an order and its outbox row), the key
// and the response commit together or not at all. A later call with the
// same key and fingerprint returns the stored response with replayed true
// and runs nothing; a call while the first is still running waits for it.
// A different fingerprint under a used key is ErrKeyReused. When fn fails,
// everything rolls back, the key included, and a retry runs fn again.
//
// fn's error is returned as it is. The transaction has the database's
// default isolation, which must be READ COMMITTED (PostgreSQL's default):
// the waiting call reads the row the first one committed. A nil
// fingerprint is the empty one; a nil response is stored and replayed as
// an empty one.
func (s *Store) Do(ctx context.Context, db Beginner, key string, fingerprint []byte,
	fn func(ctx context.Context, tx pgx.Tx) (response []byte, err error)) (response []byte, replayed bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	if db == nil || fn == nil {
		return nil, false, errors.New("idempotency: nil database or command")
	}
	if fingerprint == nil {
		fingerprint = []byte{}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("idempotency: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	// A concurrent call that inserted the same key and has not committed
	// yet makes this INSERT wait for its end: committed, it is a conflict;
	// rolled back, this call claims the key.
	tag, err := tx.Exec(ctx, s.sql.claim, key, fingerprint)
	if err != nil {
		return nil, false, fmt.Errorf("idempotency: claim key in %s: %w", s.table, err)
	}
	if tag.RowsAffected() == 0 {
		return s.replay(ctx, tx, key, fingerprint)
	}
	response, err = fn(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	if err := s.commit(ctx, tx, key, response); err != nil {
		return nil, false, err
	}
	return response, false, nil
}

// commit stores response under key and commits tx.
func (s *Store) commit(ctx context.Context, tx pgx.Tx, key string, response []byte) error {
	stored := response
	if stored == nil {
		stored = []byte{}
	}
	if _, err := tx.Exec(ctx, s.sql.respond, key, stored); err != nil {
		return fmt.Errorf("idempotency: store the response in %s: %w", s.table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("idempotency: commit: %w", err)
	}
	return nil
}

// replay returns the response stored under key, committed by an earlier
// call.
func (s *Store) replay(ctx context.Context, tx pgx.Tx, key string, fingerprint []byte) ([]byte, bool, error) {
	var stored, response []byte
	err := tx.QueryRow(ctx, s.sql.lookup, key).Scan(&stored, &response)
	if errors.Is(err, pgx.ErrNoRows) {
		// Only Prune deletes keys: it took this one between the INSERT and
		// the SELECT. The command ran long ago; a retry runs it again.
		return nil, false, errors.New("idempotency: key was pruned while it was read; retry")
	}
	if err != nil {
		return nil, false, fmt.Errorf("idempotency: read key from %s: %w", s.table, err)
	}
	if !bytes.Equal(stored, fingerprint) {
		return nil, false, ErrKeyReused
	}
	return response, true, nil
}

// checkKey returns an error wrapping ErrInvalidKey when key cannot be one.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidKey)
	}
	return nil
}
