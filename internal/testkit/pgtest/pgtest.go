// Package pgtest is one test's own corner of the rig's PostgreSQL: a
// connection pool, a unique name to call its tables, publications and
// slots after, and their removal in t.Cleanup.
//
// Internal: for walrelay's tests only.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// DB is a test's connection to PostgreSQL and the objects it registered
// for removal. In t.Cleanup it drops the slots first (retrying for a while
// when a walsender still holds one), then the publications, then the
// tables, and closes its connections; a drop that fails fails the test.
type DB struct {
	t testing.TB
	// URL is the connection string DB is connected with (the rig's
	// superuser for New).
	URL string
	// Pool is connected with URL.
	Pool *pgxpool.Pool
	// Name is unique to the test: prefix and 16 hex digits, a valid
	// unquoted identifier when prefix is one.
	Name string

	slots, publications, tables []string
}

// New connects to the rig's PostgreSQL (WALRELAY_TEST_PG_URL) and names
// the test's objects after prefix. configure, if given, adjusts the pool's
// configuration (MaxConns, say).
func New(t testing.TB, prefix string, configure ...func(*pgxpool.Config)) *DB {
	t.Helper()
	return Connect(t, rig.PGURL(t), prefix, configure...)
}

// Connect is New on url.
func Connect(t testing.TB, url, prefix string, configure ...func(*pgxpool.Config)) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse the PostgreSQL URL: got %v; want nil", err)
	}
	for _, c := range configure {
		c(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to postgres: got %v; want a pool", err)
	}
	d := &DB{t: t, URL: url, Pool: pool, Name: rig.Unique(prefix)}
	t.Cleanup(d.drop)
	return d
}

// Conn opens one connection of its own (for an API that takes a
// *pgx.Conn), closed in t.Cleanup.
func (d *DB) Conn() *pgx.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		d.t.Fatalf("connect to postgres: got %v; want a connection", err)
	}
	d.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// DropSlot has the replication slot name dropped in t.Cleanup, if it
// exists then.
func (d *DB) DropSlot(name string) { d.slots = append(d.slots, name) }

// DropPublication has the publication name dropped in t.Cleanup.
func (d *DB) DropPublication(name string) { d.publications = append(d.publications, name) }

// DropTable has the tables dropped in t.Cleanup: each is a quoted,
// possibly schema-qualified name.
func (d *DB) DropTable(quoted ...string) { d.tables = append(d.tables, quoted...) }

func (d *DB) drop() {
	t := d.t
	defer d.Pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, slot := range d.slots {
		var err error
		// A relay that just stopped may hold the slot for a moment
		// (55006: object in use).
		poll.Until(15*time.Second, 100*time.Millisecond, func() bool {
			_, err = d.Pool.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
			var pe *pgconn.PgError
			return err == nil || !errors.As(err, &pe) || pe.Code != "55006"
		})
		if err != nil {
			t.Errorf("cleanup: drop slot %q: got %v; want nil", slot, err)
		}
	}
	var drops []string
	for _, pub := range d.publications {
		drops = append(drops, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{pub}.Sanitize())
	}
	for _, table := range d.tables {
		drops = append(drops, "DROP TABLE IF EXISTS "+table)
	}
	for _, q := range drops {
		if _, err := d.Pool.Exec(ctx, q); err != nil {
			t.Errorf("cleanup: %s: got %v; want nil", q, err)
		}
	}
}

// Exec runs sql and fails the test on an error.
func (d *DB) Exec(sql string, args ...any) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.Pool.Exec(ctx, sql, args...); err != nil {
		d.t.Fatalf("%s: got %v; want nil", sql, err)
	}
}

// LSN is the single pg_lsn (or its text) that sql selects; a NULL is 0.
func (d *DB) LSN(sql string, args ...any) pglogrepl.LSN {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s *string
	if err := d.Pool.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		d.t.Fatalf("%s: got %v; want a row", sql, err)
	}
	if s == nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		d.t.Fatalf("parse lsn %q: got %v; want nil", *s, err)
	}
	return lsn
}

// CurrentLSN is the server's WAL write position.
func (d *DB) CurrentLSN() pglogrepl.LSN {
	d.t.Helper()
	return d.LSN("SELECT pg_current_wal_lsn()::text")
}

// ConfirmedLSN is the confirmed_flush_lsn of slot (0: none yet). A slot
// that does not exist fails the test.
func (d *DB) ConfirmedLSN(slot string) pglogrepl.LSN {
	d.t.Helper()
	return d.LSN("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot)
}

// AwaitSnapshotPast waits until no transaction that began before xid ended
// runs anywhere on the server (tests of other packages share it): then a
// new snapshot's xmin is past xid, and the rows xid wrote are visible to
// every transaction that starts.
func AwaitSnapshotPast(t testing.TB, db *pgxpool.Pool, xid uint64) {
	t.Helper()
	poll.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("snapshot xmin past %d (or a long transaction elsewhere on the server)", xid), func() (string, bool) {
		var s string
		if err := db.QueryRow(context.Background(), "SELECT pg_snapshot_xmin(pg_current_snapshot())::text").Scan(&s); err != nil {
			t.Fatalf("read xmin: got %v; want a row", err)
		}
		xmin, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("parse xmin %q: got %v; want a number", s, err)
		}
		return fmt.Sprintf("snapshot xmin %d", xmin), xmin > xid
	})
}

// CreateDatabase creates a database of the test's own on the server (for a
// service that wants one, as a real deployment gives it) and returns its
// URL and a pool connected to it. The database is dropped, and the pool
// closed, in t.Cleanup: after whatever the test started later was
// stopped.
func (d *DB) CreateDatabase(name string) (url string, pool *pgxpool.Pool) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quoted := pgx.Identifier{name}.Sanitize()
	if _, err := d.Pool.Exec(ctx, "CREATE DATABASE "+quoted); err != nil {
		d.t.Fatalf("create database %s: got %v; want nil", name, err)
	}
	d.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := d.Pool.Exec(ctx, "DROP DATABASE IF EXISTS "+quoted+" WITH (FORCE)"); err != nil {
			d.t.Errorf("cleanup: drop database %s: got %v; want nil", name, err)
		}
	})
	u, err := neturl.Parse(d.URL)
	if err != nil {
		d.t.Fatalf("parse the server's URL: got %v; want nil", err)
	}
	u.Path = "/" + name
	url = u.String()
	pool, err = pgxpool.New(ctx, url)
	if err != nil {
		d.t.Fatalf("connect to %s: got %v; want a pool", name, err)
	}
	d.t.Cleanup(pool.Close)
	return url, pool
}
