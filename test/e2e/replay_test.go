package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// `walrelay replay --aggregate-type order --to-topic T` publishes exactly
// the outbox's order rows to T, each aggregate in version order, each
// record as the stream would publish it (same key, value, ce_id and
// headers) plus the header walrelay_replay, the replay's start time, the
// same on every record. `--dry-run` first counts them and publishes
// nothing. No slot is made or touched.
func TestReplayOneAggregateTypeIntoAnotherTopic(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order", "invoice")
	ctx := context.Background()
	f.WriteBulk(ctx, harness.Bulk{Rows: 2000, Aggregates: 40, Types: []string{"order", "invoice"}, Payload: 50})
	_, err := f.Write(ctx, harness.Load{Writers: 2, Rows: 400, MaxTxRows: 20, AggregatesPerWriter: 6, Types: []string{"order", "invoice"}})
	testkit.Must(t, err, "write outbox rows")
	var orders []harness.Row
	for _, r := range f.OutboxRows() {
		if r.AggregateType == "order" {
			orders = append(orders, r)
		}
	}
	to := f.TopicPrefix + ".replay"
	f.CreateTopics(to)

	out := f.WalrelayOK("replay", "--aggregate-type", "order", "--to-topic", to, "--dry-run")
	t.Logf("walrelay replay --dry-run: %s", strings.TrimSpace(out))
	if !strings.Contains(out, to) || !strings.Contains(out, strconv.Itoa(len(orders))) {
		t.Errorf("walrelay replay --dry-run said %q; want the count of %s, %d", out, to, len(orders))
	}
	if n := f.Mark().Records(); n != 0 {
		t.Fatalf("records in the fixture's topics after a dry run: %d; want 0", n)
	}

	began := time.Now()
	out = f.WalrelayOK("replay", "--aggregate-type", "order", "--to-topic", to)
	ended := time.Now()
	t.Logf("walrelay replay: %s", strings.TrimSpace(out))
	harness.AssertClean(t, f.VerifyAs(orders, harness.Expect{Topic: to, Headers: []string{"walrelay_replay"}}), 0)
	checkReplayHeader(t, f, to, began, ended)
	if n := f.Mark().Records(); n != int64(len(orders)) {
		t.Errorf("records in the fixture's topics: %d; want only the %d replayed (nothing in the rows' own topics)", n, len(orders))
	}
	var slots int
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&slots), "count slots")
	if slots != 0 {
		t.Errorf("slots named %s after replay: %d; want 0 (replay never touches the slot)", f.Slot, slots)
	}
}

// checkReplayHeader checks that every record of topic carries one and the
// same walrelay_replay header, an RFC 3339 time in UTC between began and
// ended.
func checkReplayHeader(t *testing.T, f *harness.Fixture, topic string, began, ended time.Time) {
	t.Helper()
	values := map[string]int{}
	for _, rec := range f.ReadTopic(topic) {
		values[rec.Headers["walrelay_replay"]]++
	}
	if len(values) != 1 {
		t.Fatalf("walrelay_replay headers of %s: %v; want one value on every record", topic, values)
	}
	for v := range values {
		at, err := time.Parse(time.RFC3339Nano, v)
		switch {
		case err != nil || !strings.HasSuffix(v, "Z"):
			t.Errorf("walrelay_replay = %q: want an RFC 3339 time in UTC (%v)", v, err)
		case at.Before(began.Truncate(time.Second)) || at.After(ended):
			t.Errorf("walrelay_replay = %s; want the replay's start, between %s and %s", v, began.UTC().Format(time.RFC3339Nano), ended.UTC().Format(time.RFC3339Nano))
		}
	}
}
