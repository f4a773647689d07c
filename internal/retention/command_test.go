package retention_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

func TestPruneSummary(t *testing.T) {
	rc := retention.Config{Table: schema.Table{Schema: "public", Name: "outbox_messages"}, OccurredAt: "occurred_at", Slot: "walrelay"}
	r := retention.Result{
		Mark:      retention.Mark{Xmin: 1234, InsertLSN: 0x16B3700, Cutoff: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)},
		Confirmed: 0x16B3748, Deleted: 2500, Batches: 3, Took: 1234567 * time.Microsecond,
	}
	want := `pruned 2500 rows from public.outbox_messages in 3 batches (occurred_at before 2025-03-01T12:00:00Z, inserted before xid 1234); slot "walrelay" confirmed 0/16B3748, mark 0/16B3700; took 1.235s`
	if got := retention.Summary(rc, r); got != want {
		t.Errorf("summary:\n got %s\nwant %s", got, want)
	}
	r.DryRun, r.Deleted, r.Batches = true, 1, 1
	if got, want := retention.Summary(rc, r), "dry run: would prune 1 row from public.outbox_messages in 1 batch ("; !strings.HasPrefix(got, want) {
		t.Errorf("dry-run summary: got %s; want it to start with %q", got, want)
	}
	r.KeptForRecovery = &slot.Recovery{Slot: "walrelay", Since: &r.Mark.Cutoff, StartedAt: time.Date(2025, 3, 2, 7, 30, 0, 0, time.UTC), StartedBy: "host:1"}
	want = `; took 1.235s; kept the rows a pending recovery of slot "walrelay" (rows since 2025-03-01T12:00:00Z, started at 2025-03-02T07:30:00Z by host:1) needs`
	if got := retention.Summary(rc, r); !strings.HasSuffix(got, want) || strings.Count(got, "\n") != 0 {
		t.Errorf("summary with a pending recovery: got %s; want one line ending %q", got, want)
	}
}

// The command line's refusals, before any connection: the first problem
// found, named by its flag.
func TestUsageProblem(t *testing.T) {
	ok := retention.Config{Retention: time.Hour, Batch: 1}
	for _, tc := range []struct {
		change  func(*retention.Config)
		problem string
	}{
		{func(*retention.Config) {}, ""},
		{func(c *retention.Config) { c.Pause, c.Wait = 0, 0 }, ""},
		{func(c *retention.Config) { c.Retention = 0 }, "--retention is required: how long to keep outbox rows, e.g. 168h"},
		{func(c *retention.Config) { c.Retention = -time.Hour }, "--retention is required: how long to keep outbox rows, e.g. 168h"},
		{func(c *retention.Config) { c.Retention = 30 * time.Second }, "--retention 30s is under 1m0s"},
		{func(c *retention.Config) { c.Batch = 0 }, "--prune-batch 0: want at least 1"},
		{func(c *retention.Config) { c.Wait = -time.Second }, "--prune-wait and --prune-pause must not be negative"},
		{func(c *retention.Config) { c.Pause = -time.Second }, "--prune-wait and --prune-pause must not be negative"},
		{func(c *retention.Config) { c.Retention, c.Batch = 0, 0 }, "--retention is required: how long to keep outbox rows, e.g. 168h"},
	} {
		c := ok
		tc.change(&c)
		if got := retention.UsageProblem(c); got != tc.problem {
			t.Errorf("UsageProblem(%+v) = %q; want %q", c, got, tc.problem)
		}
	}
}
