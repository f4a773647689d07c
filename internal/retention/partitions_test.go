package retention_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/schema"
)

// partitioned replaces the fixture's table by one of the same columns
// PARTITION BY RANGE (occurred_at), with partitions of an hour each, from
// 3h30m ago (p4h: [-3h30m, -2h30m), p3h, p2h: [-1h30m, -30m), p1h:
// [-30m, 30m)) and one from 30m on to MAXVALUE: with the tests' retention
// of an hour, p4h and p3h lie wholly before the cutoff, p2h straddles it.
// extra is more DDL, run after.
func (f *fixture) partitioned(extra string) (parts map[string]schema.Table) {
	f.t.Helper()
	ctx := context.Background()
	t := f.cfg.Table
	part := func(s string) schema.Table { return schema.Table{Schema: t.Schema, Name: t.Name + "_" + s} }
	parts = map[string]schema.Table{}
	var ddl strings.Builder
	fmt.Fprintf(&ddl, `DROP TABLE %[1]s;
		CREATE TABLE %[1]s (message_id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
			aggregate_version bigint, type text NOT NULL, payload jsonb NOT NULL, headers jsonb,
			occurred_at timestamptz NOT NULL DEFAULT now(), topic text, PRIMARY KEY (message_id, occurred_at))
			PARTITION BY RANGE (occurred_at);
		CREATE INDEX ON %[1]s (occurred_at);`, t.Quoted())
	var now time.Time
	testkit.Must(f.t, f.db.QueryRow(ctx, "SELECT date_trunc('second', now()) + interval '30 minutes'").Scan(&now), "read now")
	for h := 4; h >= 1; h-- {
		name := fmt.Sprintf("p%dh", h)
		parts[name] = part(name)
		fmt.Fprintf(&ddl, "CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s');\n", parts[name].Quoted(), t.Quoted(),
			now.Add(-time.Duration(h)*time.Hour).Format(time.RFC3339), now.Add(-time.Duration(h-1)*time.Hour).Format(time.RFC3339))
	}
	parts["now"] = part("now")
	fmt.Fprintf(&ddl, "CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO (MAXVALUE);\n%s", parts["now"].Quoted(), t.Quoted(),
		now.Format(time.RFC3339), extra)
	for _, p := range parts {
		f.t.Cleanup(func() { f.db.Exec(context.Background(), "DROP TABLE IF EXISTS "+p.Quoted()) }) //nolint:errcheck // best effort
	}
	_, err := f.db.Exec(ctx, ddl.String())
	testkit.Must(f.t, err, "partition the outbox table")
	return parts
}

// exists reports whether table t exists and, if so, whether it is a
// partition of the fixture's table.
func (f *fixture) exists(t schema.Table) (exists, attached bool) {
	f.t.Helper()
	err := f.db.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL,
		EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass($2))`,
		t.Quoted(), f.cfg.Table.Quoted()).Scan(&exists, &attached)
	testkit.Must(f.t, err, "look for %s", t)
	return exists, attached
}

// With --drop-partitions, the partitions wholly older than the cutoff are
// dropped (their rows with them), the straddling one's old rows deleted
// row by row, the newer ones kept; a dry run says which it would drop and
// drops none.
func TestPruneDropsPartitionsWhollyOlderThanTheCutoff(t *testing.T) {
	f := newFixture(t)
	parts := f.partitioned("")
	f.commitRows(7, 3*time.Hour)                // p4h
	f.commitRows(5, 2*time.Hour)                // p3h
	f.commitRows(4, time.Hour+10*time.Minute)   // p2h, older than the cutoff
	keep2, _ := f.commitRows(2, 40*time.Minute) // p2h, newer
	keep1, xid := f.commitRows(6, fresh)        // p1h
	keep := append(keep2, keep1...)
	f.awaitHorizon(xid)
	f.follow()
	drop := func(c *retention.Config) { c.DropPartitions = true }

	dry, err := f.pruner(func(c *retention.Config) { drop(c); c.DryRun = true }).Run(context.Background())
	testkit.Must(t, err, "dry run")
	wantDropped := []schema.Table{parts["p4h"], parts["p3h"]}
	if got := names(dry.Partitions); fmt.Sprint(got) != fmt.Sprint(wantDropped) || dry.Deleted != 16 {
		t.Errorf("dry run: partitions %v, rows %d; want %v and 16 rows (theirs included)", got, dry.Deleted, wantDropped)
	}
	for _, p := range wantDropped {
		if ok, attached := f.exists(p); !ok || !attached {
			t.Errorf("after the dry run, %s: exists %v, attached %v; want both", p, ok, attached)
		}
	}
	if line := retention.Summary(retention.Config{Table: f.cfg.Table, OccurredAt: "occurred_at", Slot: f.slot}, dry); !strings.Contains(line, "would drop 2 partitions whose range is older: "+parts["p4h"].String()) {
		t.Errorf("dry run summary %q; want it to say which partitions it would drop", line)
	}

	res, err := f.pruner(drop).Run(context.Background())
	testkit.Must(t, err, "prune")
	if got := names(res.Partitions); fmt.Sprint(got) != fmt.Sprint(wantDropped) || res.Deleted != 4 {
		t.Errorf("prune: dropped %v, deleted %d rows; want %v dropped and the straddling partition's 4 old rows deleted", got, res.Deleted, wantDropped)
	}
	for _, p := range wantDropped {
		if ok, _ := f.exists(p); ok {
			t.Errorf("after the prune, %s exists; want it dropped", p)
		}
	}
	for _, p := range []schema.Table{parts["p2h"], parts["p1h"], parts["now"]} {
		if ok, attached := f.exists(p); !ok || !attached {
			t.Errorf("after the prune, %s: exists %v, attached %v; want it kept attached", p, ok, attached)
		}
	}
	sameIDs(t, "rows left", f.ids(), keep)
}

// A partition is dropped only once the slot has passed a mark taken after
// it was detached: a transaction after the first mark may have written an
// old occurred_at into it. When the slot does not pass in time the
// partitions are attached again as they were, none dropped, no row lost.
func TestPruneAttachesThePartitionsAgainWhenTheSlotStops(t *testing.T) {
	f := newFixture(t)
	parts := f.partitioned("")
	all, xid := f.commitRows(4, 3*time.Hour) // p4h
	f.awaitHorizon(xid)
	// The slot confirms the first mark and no more: only what was in the
	// WAL when the pruner's first mark was read.
	p := f.pruner(func(c *retention.Config) { c.DropPartitions = true; c.Wait = 2 * time.Second })
	m, err := p.Mark(context.Background())
	testkit.Must(t, err, "mark")
	f.advanceTo(m.InsertLSN)
	parts4 := []retention.Partition{}
	old, why, err := p.OldPartitions(context.Background(), m)
	testkit.Must(t, err, "old partitions")
	for _, pt := range old {
		if pt.Table == parts["p4h"] {
			parts4 = append(parts4, pt)
		}
	}
	if why != "" || len(parts4) != 1 {
		t.Fatalf("old partitions: %v (%q); want p4h among them", old, why)
	}
	dropped, err := p.DropPartitions(context.Background(), parts4)
	var nc *retention.NotConfirmedError
	if !errors.As(err, &nc) || len(dropped) != 0 {
		t.Fatalf("DropPartitions with a slot that stopped: dropped %v, %v; want none and the slot not confirming", dropped, err)
	}
	if ok, attached := f.exists(parts["p4h"]); !ok || !attached {
		t.Errorf("%s after the refused drop: exists %v, attached %v; want it attached again", parts["p4h"], ok, attached)
	}
	sameIDs(t, "rows left", f.ids(), all)
}

// Tables it cannot drop partitions of: by another key, beside a default
// partition (DETACH ... CONCURRENTLY refuses), or not partitioned. Their
// old rows are deleted row by row all the same.
func TestPruneDropsNoPartitionWhereItCannot(t *testing.T) {
	for _, tc := range []struct {
		name string
		ddl  func(f *fixture) // nil: a plain table
		why  string
	}{
		{"plain table", nil, ""},
		{"default partition", func(f *fixture) {
			f.partitioned(fmt.Sprintf("CREATE TABLE %s PARTITION OF %s DEFAULT;", schema.Table{Schema: "public", Name: f.cfg.Table.Name + "_def"}.Quoted(), f.cfg.Table.Quoted()))
			f.t.Cleanup(func() { f.db.Exec(context.Background(), "DROP TABLE IF EXISTS "+f.cfg.Table.Name+"_def") }) //nolint:errcheck // best effort
		}, "has a default partition"},
		{"another key", func(f *fixture) {
			_, err := f.db.Exec(context.Background(), fmt.Sprintf(`DROP TABLE %[1]s;
				CREATE TABLE %[1]s (message_id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
					aggregate_version bigint, type text NOT NULL, payload jsonb NOT NULL, headers jsonb,
					occurred_at timestamptz NOT NULL DEFAULT now(), topic text) PARTITION BY LIST (aggregate_type);
				CREATE TABLE %[2]s PARTITION OF %[1]s FOR VALUES IN ('order')`, f.cfg.Table.Quoted(), schema.Table{Schema: "public", Name: f.cfg.Table.Name + "_order"}.Quoted()))
			testkit.Must(f.t, err, "partition by list")
		}, "is not partitioned by RANGE (\"occurred_at\") alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.ddl != nil {
				tc.ddl(f)
			}
			_, xid := f.commitRows(3, 3*time.Hour)
			f.awaitHorizon(xid)
			f.follow()
			p := f.pruner(func(c *retention.Config) { c.DropPartitions = true })
			m, err := p.Mark(context.Background())
			testkit.Must(t, err, "mark")
			old, why, err := p.OldPartitions(context.Background(), m)
			testkit.Must(t, err, "old partitions")
			if len(old) != 0 || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
				t.Errorf("old partitions: %v, %q; want none, the reason containing %q", old, why, tc.why)
			}
			res, err := p.Run(context.Background())
			testkit.Must(t, err, "prune")
			if len(res.Partitions) != 0 || res.Deleted != 3 {
				t.Errorf("prune: dropped %v, deleted %d; want none dropped, 3 rows deleted", res.Partitions, res.Deleted)
			}
		})
	}
}

// A role that may delete the rows but does not own the table is refused
// --drop-partitions before anything is done.
func TestPruneDropPartitionsTakesTheOwner(t *testing.T) {
	f := newFixture(t)
	f.partitioned("")
	role := f.cfg.Table.Name + "_deleter"
	ctx := context.Background()
	_, err := f.db.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s; GRANT SELECT, DELETE ON %[2]s TO %[1]s`, role, f.cfg.Table.Quoted()))
	testkit.Must(t, err, "create role")
	t.Cleanup(func() {
		f.db.Exec(context.Background(), fmt.Sprintf("REVOKE ALL ON %s FROM %s; DROP ROLE %s", f.cfg.Table.Quoted(), role, role)) //nolint:errcheck // best effort
	})
	conn, err := f.db.Acquire(ctx)
	testkit.Must(t, err, "acquire")
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET ROLE "+role)
	testkit.Must(t, err, "set role")
	defer conn.Exec(context.Background(), "RESET ROLE") //nolint:errcheck // released after
	p, err := retention.New(retention.Config{Table: f.cfg.Table, Slot: f.slot, Retention: time.Hour, DropPartitions: true}, conn.Conn(), zaptest.NewLogger(t))
	testkit.Must(t, err, "new pruner")
	_, err = p.Run(ctx)
	if !errors.Is(err, retention.ErrNoPrivilege) || !strings.Contains(fmt.Sprint(err), "dropping partitions takes owning") {
		t.Errorf("prune --drop-partitions by a non-owner: %v; want the refusal naming the owner", err)
	}
}

func names(ps []retention.Partition) []schema.Table {
	out := []schema.Table{}
	for _, p := range ps {
		out = append(out, p.Table)
	}
	return out
}
