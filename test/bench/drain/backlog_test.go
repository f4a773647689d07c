//go:build bench

package drain

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// backlog is one shape's outbox table, loaded, with its publication and the
// slots of every run of every round that read it: all removed in t.Cleanup.
type backlog struct {
	pgURL, brokers string
	db             *pgxpool.Pool
	id             string
	table          string
	publication    string
	slots          []string // one per run
	start, end     pglogrepl.LSN
	payloadBytes   int64
	rows           int64 // loaded
}

// newBacklog creates the table and publication from `walrelay schema`, as
// users get them, then slots slots, one for every run of every round, so
// that all start before the load and read the same WAL.
func newBacklog(ctx context.Context, t *testing.T, pgURL, brokers string, slots int) *backlog {
	t.Helper()
	pg := pgtest.Connect(t, pgURL, "")
	id := pg.Name
	b := &backlog{pgURL: pgURL, brokers: brokers, db: pg.Pool, id: id, table: "drain_" + id, publication: "drain_pub_" + id}
	for i := range slots {
		b.slots = append(b.slots, fmt.Sprintf("drain_%s_%d", id, i))
	}
	for _, s := range b.slots {
		pg.DropSlot(s)
	}
	pg.DropPublication(b.publication)
	pg.DropTable(b.table, b.table+"_dead_letters", b.table+"_recoveries", b.table+"_topics")
	db := b.db

	out, err := exec.CommandContext(ctx, walrelayBin, "schema", "--table", "public."+b.table, "--publication", b.publication).Output()
	if err != nil {
		t.Fatalf("walrelay schema: %v", err)
	}
	if _, err := db.Exec(ctx, string(out)); err != nil {
		t.Fatalf("apply `walrelay schema` DDL: %v", err)
	}
	for _, s := range b.slots {
		if _, err := db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s); err != nil {
			t.Fatalf("create slot %s: %v", s, err)
		}
	}
	b.start = b.lsn(ctx, t, "pg_current_wal_insert_lsn()")
	return b
}

// fill loads s and notes the end position: the runs drain up to it.
//
// The end is the insert position after the load, not pg_current_wal_lsn():
// that is the write position, which (the load commits asynchronously) can
// lie before the last commit records, and pg_recvlogical --endpos would
// then stop short of them (of the whole 1M-row transaction, say). fill
// returns once the server has flushed up to the end, since walsenders send
// only flushed WAL.
func (b *backlog) fill(ctx context.Context, t *testing.T, s shape, payload int) {
	t.Helper()
	b.payloadBytes = load(ctx, t, b.pgURL, b.table, s, payload)
	b.rows = int64(s.rows())
	b.markEnd(ctx, t)
}

// markEnd notes the end position after a load (see fill) and waits until
// the server has flushed up to it.
func (b *backlog) markEnd(ctx context.Context, t *testing.T) {
	t.Helper()
	b.end = b.lsn(ctx, t, "pg_current_wal_insert_lsn()")
	poll.Eventually(t, time.Minute, "the server's WAL flushed up to "+b.end.String(), func() (string, bool) {
		flushed := b.lsn(ctx, t, "pg_current_wal_flush_lsn()")
		return "flushed up to " + flushed.String(), flushed >= b.end
	})
}

// lsn reads one of the server's WAL positions: fn is a function such as
// pg_current_wal_insert_lsn().
func (b *backlog) lsn(ctx context.Context, t *testing.T, fn string) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := b.db.QueryRow(ctx, "SELECT "+fn+"::text").Scan(&s); err != nil {
		t.Fatalf("read %s: %v", fn, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}
