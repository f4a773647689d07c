package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// The core promise: 10,000 rows from 8 concurrent writers, in transactions
// of 1 to 50 rows written three ways, all arrive exactly as specified, each
// aggregate in one partition and in commit order; and the slot confirms the
// end of the last transaction.
func TestEveryCommittedRowArrivesInOrder(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order", "customer")
	metrics := testkit.FreePort(t)
	r := f.Start("--metrics-addr", metrics)

	ctx := context.Background()
	start := time.Now()
	n, err := f.Write(ctx, harness.Load{Writers: 8, Rows: 10000, MaxTxRows: 50, AggregatesPerWriter: 10, Types: []string{"order", "customer"}})
	testkit.Must(t, err, "write outbox rows")
	wrote := time.Since(start)
	end := f.CurrentLSN()
	took := f.WaitConfirmed(r, end, 3*time.Minute)
	t.Logf("wrote %d rows in %s; slot confirmed %s %s after the last commit (%.0f rows/s end to end)",
		n, wrote.Round(time.Millisecond), end, took.Round(time.Millisecond), float64(n)/(wrote+took).Seconds())

	body := scrape(t, metrics)
	for _, name := range []string{"walrelay_published_messages_total", "walrelay_confirmed_lsn", "walrelay_slot_lag_bytes"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay exit code after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	harness.AssertClean(t, f.Verify(rows), 0)
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	testkit.Must(t, err, "scrape /metrics")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testkit.Must(t, err, "read /metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	return string(b)
}

// A rolled-back transaction, and a rolled-back savepoint inside a committed
// one, publish nothing; the committed rows around them are published.
func TestRolledBackRowsAreNeverPublished(t *testing.T) {
	f := harness.New(t, "order")
	r := f.Start()
	ctx := context.Background()

	rolledBack := map[string]bool{}
	insert := func(tx pgx.Tx, id string, version int64) {
		t.Helper()
		_, err := tx.Exec(ctx, "INSERT INTO "+f.Table+" (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload) VALUES ($1, 'order', 'o-1', $2, 'order.submitted.v1', '{\"n\": 1}')", id, version)
		testkit.Must(t, err, "insert")
	}
	tx, err := f.DB.Begin(ctx)
	testkit.Must(t, err, "begin")
	for i := 0; i < 5; i++ {
		id := harness.NewUUID()
		rolledBack[id] = true
		insert(tx, id, int64(100+i))
	}
	testkit.Must(t, tx.Rollback(ctx), "rollback")

	tx, err = f.DB.Begin(ctx)
	testkit.Must(t, err, "begin")
	insert(tx, harness.NewUUID(), 1)
	_, err = tx.Exec(ctx, "SAVEPOINT s")
	testkit.Must(t, err, "savepoint")
	id := harness.NewUUID()
	rolledBack[id] = true
	insert(tx, id, 99)
	_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s")
	testkit.Must(t, err, "rollback to savepoint")
	insert(tx, harness.NewUUID(), 2)
	testkit.Must(t, tx.Commit(ctx), "commit")

	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	rows := f.OutboxRows()
	if len(rows) != 2 {
		t.Fatalf("outbox holds %d rows; want the 2 committed ones", len(rows))
	}
	harness.AssertClean(t, f.Verify(rows), 0)
	for _, rec := range f.ReadTopic(f.Topic("order")) {
		if rolledBack[rec.Headers["ce_id"]] {
			t.Errorf("rolled-back message %s was published", rec.Headers["ce_id"])
		}
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
}

// SIGTERM in the middle of a stream, then a restart: nothing is lost, and
// repeats are bounded by what was in flight (at most the one transaction
// received only in part when the stream stopped).
func TestSIGTERMMidStreamThenRestartLosesNothing(t *testing.T) {
	f := harness.New(t, "order", "customer")
	r := f.Start()
	ctx := context.Background()

	const maxTxRows = 50
	wrote := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = f.Write(ctx, harness.Load{Writers: 4, Rows: 6000, MaxTxRows: maxTxRows, AggregatesPerWriter: 10,
			Types: []string{"order", "customer"}, Pause: 50 * time.Millisecond})
		wrote <- err
	}()
	// Stop once the relay is visibly in the middle of the stream.
	before := f.ConfirmedLSN()
	poll.EventuallyEvery(t, 2*time.Minute, 50*time.Millisecond, "the slot confirming something while writers run", func() (string, bool) {
		got := f.ConfirmedLSN()
		if got == before {
			r.Running()
		}
		return "confirmed_flush_lsn still " + got.String(), got != before
	})
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	stoppedAt := f.ConfirmedLSN()
	// The server holds the position of the relay's last status update: a
	// stop that resets the connection can lose it (seen on 16, 53 repeats).
	var final struct {
		LSN string `json:"confirmed_lsn"`
	}
	testkit.Must(t, json.Unmarshal([]byte(r.WaitLine(`"final status update sent"`, time.Second)), &final), "parse the final status line")
	if final.LSN != stoppedAt.String() {
		t.Errorf("the relay's final status update confirmed %s; the slot holds %s", final.LSN, stoppedAt)
	}

	r = f.Run()
	testkit.Must(t, <-wrote, "write outbox rows")
	end := f.CurrentLSN()
	f.WaitConfirmed(r, end, 3*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after second SIGTERM = %d; want 0", code)
	}
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	if stoppedAt >= end {
		t.Fatalf("the first relay confirmed %s, past the end of the writes %s: the stop was not mid-stream", stoppedAt, end)
	}
	rep := f.Verify(rows)
	t.Logf("stopped at %s of %s; duplicates after restart: %d", stoppedAt, end, rep.Duplicates)
	harness.AssertClean(t, rep, maxTxRows)
}

// While the outbox is idle and other tables and databases write WAL, the
// slot's confirmed position keeps up, so the server does not retain WAL.
func TestIdleSlotKeepsUpWithUnrelatedWrites(t *testing.T) {
	f := harness.New(t, "order")
	r := f.Start()
	ctx := context.Background()
	other := "other_" + f.ID
	_, err := f.DB.Exec(ctx, "CREATE TABLE "+other+" (id bigserial PRIMARY KEY, v text)")
	testkit.Must(t, err, "create unrelated table")
	t.Cleanup(func() { f.DB.Exec(context.Background(), "DROP TABLE IF EXISTS "+other) }) //nolint:errcheck // best effort
	oc := otherDatabase(t, f)
	_, err = oc.Exec(ctx, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)")
	testkit.Must(t, err, "create table in the other database")

	for round := 0; round < 3; round++ {
		for i := 0; i < 20; i++ {
			_, err := f.DB.Exec(ctx, "INSERT INTO "+other+" (v) SELECT repeat('x', 100) FROM generate_series(1, 100)")
			testkit.Must(t, err, "unrelated insert")
			_, err = oc.Exec(ctx, "INSERT INTO noise (v) SELECT repeat('y', 100) FROM generate_series(1, 100)")
			testkit.Must(t, err, "insert in other database")
		}
		target := f.CurrentLSN()
		// The stream is idle, so the position the server reports in its
		// keepalives is confirmed at the next status update (1s here).
		took := f.WaitConfirmed(r, target, 15*time.Second)
		t.Logf("round %d: confirmed caught up with %s after %s", round, target, took.Round(time.Millisecond))
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
}

// A second relay on the same slot waits as a standby while the first leads,
// and takes over by itself when the first stops.
func TestStandbyTakesOverWhenTheLeaderStops(t *testing.T) {
	f := harness.New(t, "order")
	a := f.Start()
	ctx := context.Background()
	l := harness.Load{Writers: 2, Rows: 500, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order"}}
	_, err := f.Write(ctx, l)
	testkit.Must(t, err, "write")
	f.WaitConfirmed(a, f.CurrentLSN(), time.Minute)

	bMetrics := testkit.FreePort(t)
	b := f.Run("--metrics-addr", bMetrics)
	b.WaitLine("waiting for leadership", 30*time.Second) // the second relay says it waits for the slot
	// A standby that can read the slot is ready: waiting is its job.
	waitReady(t, bMetrics, http.StatusOK, 15*time.Second)
	if v := harness.Scrape(bMetrics, "walrelay_streaming"); v != 0 {
		t.Errorf("standby walrelay_streaming = %v; want 0", v)
	}
	if v := harness.Scrape(bMetrics, "walrelay_slot_active"); v != 1 {
		t.Errorf("standby walrelay_slot_active = %v; want 1 (the leader's walsender holds the slot)", v)
	}
	if code := a.Stop(); code != 0 {
		t.Fatalf("first relay exit code %d; want 0", code)
	}
	l.Rows = 700
	_, err = f.Write(ctx, l)
	testkit.Must(t, err, "write")
	took := f.WaitConfirmed(b, f.CurrentLSN(), time.Minute)
	t.Logf("the second relay confirmed the new rows %s after they were written", took.Round(time.Millisecond))
	waitMetric(t, bMetrics, "walrelay_streaming", func(v float64) bool { return v == 1 }, 15*time.Second)
	waitReady(t, bMetrics, http.StatusOK, 15*time.Second)
	if code := b.Stop(); code != 0 {
		t.Fatalf("second relay exit code %d; want 0", code)
	}
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)
}
