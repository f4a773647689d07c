package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The core promise: 10,000 rows from 8 concurrent writers, in transactions
// of 1 to 50 rows written three ways, all arrive exactly as specified, each
// aggregate in one partition and in commit order; and the slot confirms the
// end of the last transaction.
func TestEveryCommittedRowArrivesInOrder(t *testing.T) {
	f := newFixture(t, "order", "customer")
	metrics := freePort(t)
	r := f.start("--metrics-addr", metrics)

	ctx := context.Background()
	start := time.Now()
	n, err := f.write(ctx, load{Writers: 8, Rows: 10000, MaxTxRows: 50, AggregatesPerWriter: 10, Types: []string{"order", "customer"}})
	must(t, err, "write outbox rows")
	wrote := time.Since(start)
	end := f.currentLSN()
	took := f.waitConfirmed(r, end, 3*time.Minute)
	t.Logf("wrote %d rows in %s; slot confirmed %s %s after the last commit (%.0f rows/s end to end)",
		n, wrote.Round(time.Millisecond), end, took.Round(time.Millisecond), float64(n)/(wrote+took).Seconds())

	body := scrape(t, metrics)
	for _, name := range []string{"walrelay_published_messages_total", "walrelay_confirmed_lsn", "walrelay_slot_lag_bytes"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0\n%s", code, r.stderr.String())
	}
	rows := f.outboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	assertClean(t, f.verify(rows), 0)
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	must(t, err, "scrape /metrics")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err, "read /metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	return string(b)
}

// A rolled-back transaction, and a rolled-back savepoint inside a committed
// one, publish nothing; the committed rows around them are published.
func TestRolledBackRowsAreNeverPublished(t *testing.T) {
	f := newFixture(t, "order")
	r := f.start()
	ctx := context.Background()

	rolledBack := map[string]bool{}
	insert := func(tx pgx.Tx, id string, version int64) {
		t.Helper()
		_, err := tx.Exec(ctx, "INSERT INTO "+f.table+" (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload) VALUES ($1, 'order', 'o-1', $2, 'order.submitted.v1', '{\"n\": 1}')", id, version)
		must(t, err, "insert")
	}
	tx, err := f.db.Begin(ctx)
	must(t, err, "begin")
	for i := 0; i < 5; i++ {
		id := newUUID()
		rolledBack[id] = true
		insert(tx, id, int64(100+i))
	}
	must(t, tx.Rollback(ctx), "rollback")

	tx, err = f.db.Begin(ctx)
	must(t, err, "begin")
	insert(tx, newUUID(), 1)
	_, err = tx.Exec(ctx, "SAVEPOINT s")
	must(t, err, "savepoint")
	id := newUUID()
	rolledBack[id] = true
	insert(tx, id, 99)
	_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s")
	must(t, err, "rollback to savepoint")
	insert(tx, newUUID(), 2)
	must(t, tx.Commit(ctx), "commit")

	f.waitConfirmed(r, f.currentLSN(), time.Minute)
	rows := f.outboxRows()
	if len(rows) != 2 {
		t.Fatalf("outbox holds %d rows; want the 2 committed ones", len(rows))
	}
	assertClean(t, f.verify(rows), 0)
	for _, rec := range f.readTopic(f.topic("order")) {
		if rolledBack[rec.Headers["ce_id"]] {
			t.Errorf("rolled-back message %s was published", rec.Headers["ce_id"])
		}
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
}

// SIGTERM in the middle of a stream, then a restart: nothing is lost, and
// repeats are bounded by what was in flight (at most the one transaction
// received only in part when the stream stopped).
func TestSIGTERMMidStreamThenRestartLosesNothing(t *testing.T) {
	f := newFixture(t, "order", "customer")
	r := f.start()
	ctx := context.Background()

	const maxTxRows = 50
	wrote := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = f.write(ctx, load{Writers: 4, Rows: 6000, MaxTxRows: maxTxRows, AggregatesPerWriter: 10,
			Types: []string{"order", "customer"}, Pause: 50 * time.Millisecond})
		wrote <- err
	}()
	// Stop once the relay is visibly in the middle of the stream.
	before := f.confirmedLSN()
	deadline := time.Now().Add(2 * time.Minute)
	for f.confirmedLSN() == before {
		if time.Now().After(deadline) {
			t.Fatal("the slot never confirmed anything while writers were running")
		}
		r.running()
		time.Sleep(50 * time.Millisecond)
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d; want 0\n%s", code, r.stderr.String())
	}
	stoppedAt := f.confirmedLSN()

	r = f.run()
	must(t, <-wrote, "write outbox rows")
	end := f.currentLSN()
	f.waitConfirmed(r, end, 3*time.Minute)
	if code := r.stop(); code != 0 {
		t.Fatalf("exit code after second SIGTERM = %d; want 0", code)
	}
	rows := f.outboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	if stoppedAt >= end {
		t.Fatalf("the first relay confirmed %s, past the end of the writes %s: the stop was not mid-stream", stoppedAt, end)
	}
	rep := f.verify(rows)
	t.Logf("stopped at %s of %s; duplicates after restart: %d", stoppedAt, end, rep.duplicates)
	assertClean(t, rep, maxTxRows)
}

// While the outbox is idle and other tables and databases write WAL, the
// slot's confirmed position keeps up, so the server does not retain WAL.
func TestIdleSlotKeepsUpWithUnrelatedWrites(t *testing.T) {
	f := newFixture(t, "order")
	r := f.start()
	ctx := context.Background()
	other := "other_" + f.id
	_, err := f.db.Exec(ctx, "CREATE TABLE "+other+" (id bigserial PRIMARY KEY, v text)")
	must(t, err, "create unrelated table")
	t.Cleanup(func() { f.db.Exec(context.Background(), "DROP TABLE IF EXISTS "+other) }) //nolint:errcheck // best effort
	otherDB := "db_" + f.id
	_, err = f.db.Exec(ctx, "CREATE DATABASE "+otherDB)
	must(t, err, "create unrelated database")
	t.Cleanup(func() { f.db.Exec(context.Background(), "DROP DATABASE IF EXISTS "+otherDB+" WITH (FORCE)") }) //nolint:errcheck // best effort
	cfg, err := pgx.ParseConfig(f.pgURL)
	must(t, err, "parse url")
	cfg.Database = otherDB
	oc, err := pgx.ConnectConfig(ctx, cfg)
	must(t, err, "connect to %s", otherDB)
	defer oc.Close(ctx)
	_, err = oc.Exec(ctx, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)")
	must(t, err, "create table in %s", otherDB)

	for round := 0; round < 3; round++ {
		for i := 0; i < 20; i++ {
			_, err := f.db.Exec(ctx, "INSERT INTO "+other+" (v) SELECT repeat('x', 100) FROM generate_series(1, 100)")
			must(t, err, "unrelated insert")
			_, err = oc.Exec(ctx, "INSERT INTO noise (v) SELECT repeat('y', 100) FROM generate_series(1, 100)")
			must(t, err, "insert in other database")
		}
		target := f.currentLSN()
		// The stream is idle, so the position the server reports in its
		// keepalives is confirmed at the next status update (1s here).
		took := f.waitConfirmed(r, target, 15*time.Second)
		t.Logf("round %d: confirmed caught up with %s after %s", round, target, took.Round(time.Millisecond))
	}
	if code := r.stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
}

// A second relay on the same slot waits while the first streams, and takes
// over by itself when the slot frees up.
func TestSecondRelayWaitsForTheSlotAndTakesOver(t *testing.T) {
	f := newFixture(t, "order")
	a := f.start()
	ctx := context.Background()
	l := load{Writers: 2, Rows: 500, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order"}}
	_, err := f.write(ctx, l)
	must(t, err, "write")
	f.waitConfirmed(a, f.currentLSN(), time.Minute)

	b := f.run()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.stderr.String(), "replication slot is active in another process") {
		b.running()
		if time.Now().After(deadline) {
			t.Fatalf("the second relay never said it waits for the slot:\n%s", b.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := a.stop(); code != 0 {
		t.Fatalf("first relay exit code %d; want 0", code)
	}
	l.Rows = 700
	_, err = f.write(ctx, l)
	must(t, err, "write")
	took := f.waitConfirmed(b, f.currentLSN(), time.Minute)
	t.Logf("the second relay confirmed the new rows %s after they were written", took.Round(time.Millisecond))
	if code := b.stop(); code != 0 {
		t.Fatalf("second relay exit code %d; want 0", code)
	}
	assertClean(t, f.verify(f.outboxRows()), 0)
}
