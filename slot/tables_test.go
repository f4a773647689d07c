package slot_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// A slot of several outbox tables: check judges each table's existence,
// columns and place in the publication under its own name, and counts
// none of them (nor their partitions) as other tables of the publication.
func TestCheckSeveralTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ef := schema.Table{Schema: "public", Name: f.slot + "_ef"}
	gone := schema.Table{Schema: "public", Name: f.slot + "_gone"}
	f.db.DropTable(ef.Quoted(), gone.Quoted())
	efCols := schema.Columns{MessageID: "Id", AggregateType: "AggregateType", AggregateID: "AggregateId",
		AggregateVersion: "AggregateVersion", Type: "Type", Payload: "Payload", Headers: "Headers",
		OccurredAt: "OccurredAtUtc", Topic: "Topic"}
	f.exec(`CREATE TABLE ` + ef.Quoted() + ` ("Id" uuid PRIMARY KEY, "AggregateId" text NOT NULL, "Type" text NOT NULL, "Payload" text NOT NULL)`)
	f.exec("CREATE PUBLICATION " + schema.QuoteIdentifier(f.pub) + " FOR TABLE " + f.table.Quoted() + ", " + ef.Quoted() +
		", " + f.otherCreated().Quoted() + " WITH (publish = 'insert')")
	cfg := f.config()
	cfg.Tables = []slot.OutboxTable{
		{Table: f.table},
		{Table: ef, Columns: efCols, AggregateTypeDefault: "invoice"},
		{Table: gone},
	}
	got, _ := runCheck(t, cfg)
	t.Logf("check:\n%s", dump(got))
	byName := map[string]check.Result{}
	for _, r := range got {
		byName[r.Name] = r
	}
	for name, want := range map[string]check.Status{
		"outbox table " + f.table.String():      check.OK,
		"table columns " + f.table.String():     check.OK,
		"outbox table " + ef.String():           check.OK,
		"table columns " + ef.String():          check.OK,
		"outbox table " + gone.String():         check.Fail,
		"publication table " + f.table.String(): check.OK,
		"publication table " + ef.String():      check.OK,
		"publication table " + gone.String():    check.Fail,
		"publication scope":                     check.Warn,
	} {
		if r, ok := byName[name]; !ok || r.Status != want {
			t.Errorf("%s: %+v; want %s", name, r, want)
		}
	}
	if s := byName["publication scope"]; !strings.Contains(s.Found, "1 other table") ||
		!strings.Contains(s.Fix, "SET TABLE "+f.table.Quoted()+", "+ef.Quoted()+", "+gone.Quoted()) {
		t.Errorf("publication scope: %+v; want the one other table, and a fix that keeps every outbox table", s)
	}
	if _, ok := byName["outbox table"]; ok {
		t.Errorf("an unnamed \"outbox table\" result among several tables; want each named")
	}
}

// otherCreated creates the fixture's other table and returns it.
func (f *fixture) otherCreated() schema.Table {
	f.t.Helper()
	f.exec("CREATE TABLE " + f.other().Quoted() + " (id int)")
	return f.other()
}
