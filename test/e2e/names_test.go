package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// quotedColumns are the columns of a table whose names all need quoting:
// spaces, a dash, capitals.
var quotedColumns = schema.Columns{MessageID: "Message Id", AggregateType: "Aggregate Type", AggregateID: "Aggregate Id",
	AggregateVersion: "Aggregate Version", Type: "Event Type", Payload: "Pay-load", Headers: "headers",
	OccurredAt: "Occurred At", Topic: "topic"}

const quotedTableSQL = ` ("Message Id" uuid PRIMARY KEY, "Aggregate Type" text NOT NULL, "Aggregate Id" text NOT NULL,
	"Aggregate Version" bigint, "Event Type" text NOT NULL, "Pay-load" jsonb NOT NULL, headers jsonb,
	"Occurred At" timestamptz NOT NULL DEFAULT now(), topic text)`

// A schema, table, columns and publication whose names PostgreSQL takes
// only quoted (Sales-App, Outbox Events, a column with a space, a
// publication with quotes in it), given as users write them: check passes
// but for the slot before init; init, check and status work; the relay
// relays every row written through the outbox library (lost 0, each
// aggregate in order); a bad row is parked and discarded with `walrelay
// dlq`; topics list reads the topics table; prune deletes the old
// published rows; replay --dry-run counts the rest.
func TestNamesThatNeedQuoting(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	s := newNamedShape(t, func(id string) (schema.Table, string) {
		return schema.Table{Schema: "Sales-App-" + id, Name: "Outbox Events"}, `Sales-App "Outbox's" ` + id
	}, quotedTableSQL, "--column-message-id", "Message Id", "--column-aggregate-type", "Aggregate Type",
		"--column-aggregate-id", "Aggregate Id", "--column-aggregate-version", "Aggregate Version",
		"--column-type", "Event Type", "--column-payload", "Pay-load", "--column-occurred-at", "Occurred At")
	f := s.f
	if got, want := s.table.String(), `"Sales-App-`+f.ID+`"."Outbox Events"`; got != want {
		t.Fatalf("--table %s; want %s", got, want)
	}

	_, report := runCheck(t, f, s.flags()...)
	for _, c := range report.Checks {
		if c.Status == "fail" && !strings.HasPrefix(c.Name, "slot") {
			t.Errorf("check before init: %s failed (%s; fix: %s); want only the slot missing", c.Name, c.Found, c.Fix)
		}
	}
	f.WalrelayOK("init", s.flags()...)
	if _, report = runCheck(t, f, s.flags()...); report.Fail != 0 {
		t.Fatalf("check after init: %d failed; want none", report.Fail)
	}
	table := []string{"--table", s.table.String()}
	if out := f.WalrelayOK("status", append(table, "--publication", s.pub)...); !strings.Contains(out, f.Slot) {
		t.Errorf("status: %s; want the slot's row", out)
	}

	w, err := outbox.New(outbox.Config{Table: s.table, Columns: quotedColumns})
	testkit.Must(t, err, "outbox.New")
	versions := map[string]int64{}
	var delivered []harness.Row
	write := func(age time.Duration, aggs ...string) {
		t.Helper()
		var msgs []*outbox.Message
		for _, agg := range aggs {
			versions[agg]++
			msgs = append(msgs, &outbox.Message{AggregateType: "order", AggregateID: agg, AggregateVersion: versions[agg], HasVersion: true,
				Type: "order.placed.v1", Payload: map[string]any{"aggregate": agg, "version": versions[agg]}, Headers: map[string]string{"tenant": "Sales-App"},
				OccurredAt: time.Now().Add(-age).UTC().Truncate(time.Microsecond)})
		}
		err := pgx.BeginFunc(context.Background(), f.DB, func(tx pgx.Tx) error { return w.Write(context.Background(), tx, msgs...) })
		testkit.Must(t, err, "write %d messages", len(msgs))
		for _, m := range msgs {
			payload, err := json.Marshal(m.Payload)
			testkit.Must(t, err, "payload")
			delivered = append(delivered, harness.Row{ID: m.ID.String(), AggregateType: "order", AggregateID: m.AggregateID,
				Version: &m.AggregateVersion, Type: m.Type, Payload: jsonbText(t, f, payload), Headers: map[string]any{"tenant": "Sales-App"},
				OccurredAt: m.OccurredAt})
		}
	}
	aggs := []string{"Sales-App order 1", "Sales-App order 2", "Sales-App order 3"}
	for range 3 {
		write(2*time.Hour, append(aggs, aggs...)...)
	}
	old := len(delivered)
	r := f.Run(s.flags()...)
	r.WaitStarted()
	for range 5 {
		write(0, append(aggs, aggs[0])...)
	}
	bad, behind := outbox.NewID(), outbox.NewID()
	s.exec("INSERT INTO "+s.table.Quoted()+` ("Message Id", "Aggregate Type", "Aggregate Id", "Event Type", "Pay-load") VALUES ($1, 'order', 'bad one', '', '{}')`, bad.String())
	s.exec("INSERT INTO "+s.table.Quoted()+` ("Message Id", "Aggregate Type", "Aggregate Id", "Event Type", "Pay-load") VALUES ($1, 'order', 'bad one', 'x.v1', '{}')`, behind.String())
	write(0, aggs...)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	rep := f.Verify(delivered)
	harness.AssertClean(t, rep, 0)
	t.Logf("%s: %s", s.table, rep)

	if n := s.parked(); n != 2 {
		t.Errorf("parked rows: %d; want the bad row and the one behind it", n)
	}
	out := f.WalrelayOK("dlq", append([]string{"list"}, table...)...)
	if !strings.Contains(out, bad.String()) || !strings.Contains(out, behind.String()) {
		t.Errorf("dlq list: %s; want rows %s and %s", out, bad, behind)
	}
	out = f.WalrelayOK("dlq", append([]string{"discard", "--message-id", bad.String(), "--reason", "test: an empty type"}, table...)...)
	dead := schema.Table{Schema: s.table.Schema, Name: s.table.Name + "_dead_letters"}.Quoted()
	if n := s.count("SELECT count(*) FROM "+dead+" WHERE message_id = $1 AND status = 'discarded'", bad.String()); n != 1 {
		t.Errorf("after dlq discard: %d rows of %s discarded; want 1\n%s", n, bad, out)
	}

	// The last xid assigned so far: once no transaction up to it runs, the
	// rows above are prune's. (The next xid, xmax, would wait for another
	// transaction to take an xid, which an idle server may never do.)
	var xid uint64
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1").Scan(&xid), "read the last xid")
	awaitSnapshotPast(t, f, xid)
	if out := f.WalrelayOK("topics", append([]string{"list"}, table...)...); !strings.Contains(out, f.Topic("order")) {
		t.Errorf("topics list: %s; want %s recorded", out, f.Topic("order"))
	}
	out = f.WalrelayOK("prune", append(table, "--column-occurred-at", "Occurred At", "--postgres-url", f.PGURL, "--retention", "1h", "--prune-wait", "30s")...)
	if want := fmt.Sprintf("pruned %d rows from %s", old, s.table); !strings.HasPrefix(out, want) {
		t.Errorf("prune: %q; want it to start %q", out, want)
	}
	if n := s.count("SELECT count(*) FROM " + s.table.Quoted()); n != len(delivered)+2-old {
		t.Errorf("rows left after prune: %d; want %d (the new ones and the two parked)", n, len(delivered)+2-old)
	}
	left := s.count("SELECT count(*) FROM " + s.table.Quoted())
	out = f.WalrelayOK("replay", append(append(table, s.cols...), "--dry-run")...)
	if want := fmt.Sprintf("would replay %d rows", left); !strings.HasPrefix(out, want) {
		t.Errorf("replay --dry-run: %q; want it to start %q", out, want)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run after SIGTERM: exit %d; want 0", code)
	}
}

// jsonbText is payload as PostgreSQL's jsonb prints it, which the record
// carries.
func jsonbText(t *testing.T, f *harness.Fixture, payload []byte) string {
	t.Helper()
	var s string
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT $1::jsonb::text", string(payload)).Scan(&s), "jsonb text")
	return s
}
