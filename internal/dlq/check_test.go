package dlq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/schema"
)

// TestCheckMessageIDColumns: a dead-letter table whose message_id is text
// takes any message id; one made uuid (before message ids of other types)
// takes a uuid message id column's only, and check says how to widen it.
func TestCheckMessageIDColumns(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outbox := schema.DefaultConfig()
	outbox.Table.Name = strings.TrimSuffix(f.table.Name, "_dead_letters")
	outbox.DeadLetters = f.table
	create := func(idType string) {
		t.Helper()
		_, err := f.db.Exec(ctx, `DROP TABLE IF EXISTS `+outbox.Table.Quoted()+`; CREATE TABLE `+outbox.Table.Quoted()+` (message_id `+idType+` PRIMARY KEY)`)
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { f.db.Exec(context.Background(), `DROP TABLE IF EXISTS `+outbox.Table.Quoted()) }) //nolint:errcheck // cleanup
	result := func() (string, string) {
		t.Helper()
		for _, r := range dlq.Check(ctx, f.db, f.table, outbox) {
			if r.Name == "dead-letter message ids" {
				return r.Status.String(), r.Found + " | " + r.Fix
			}
		}
		t.Fatal("no dead-letter message ids result")
		return "", ""
	}
	for _, idType := range []string{"uuid", "bigint", "text"} {
		create(idType)
		if status, text := result(); status != "ok" {
			t.Errorf("text dead-letter ids, %s outbox ids: %s %s; want ok", idType, status, text)
		}
	}
	if _, err := f.db.Exec(ctx, `ALTER TABLE `+f.table.Quoted()+` ALTER COLUMN message_id TYPE uuid USING message_id::uuid, ALTER COLUMN blocked_by TYPE uuid USING blocked_by::uuid`); err != nil {
		t.Fatal(err)
	}
	create("uuid")
	if status, text := result(); status != "ok" {
		t.Errorf("uuid dead-letter ids, uuid outbox ids: %s %s; want ok", status, text)
	}
	// Such a table still parks, lists and blocks by uuid ids.
	agg := schema.Aggregate{Type: "order", ID: "42"}
	for _, dl := range []schema.DeadLetter{parked(0, agg), behind(1, agg, 0)} {
		if ok, err := f.store.Park(ctx, dl); err != nil || !ok {
			t.Fatalf("park into a uuid dead-letter table: %v, %v", ok, err)
		}
	}
	entries, err := f.store.List(ctx, dlq.Filter{})
	if err != nil || len(entries) != 2 || entries[0].MessageID == nil || *entries[0].MessageID != id(0) ||
		entries[1].BlockedBy == nil || *entries[1].BlockedBy != id(0) {
		t.Fatalf("list of a uuid dead-letter table: %+v, %v; want message %s and one blocked by it", entries, err, id(0))
	}
	create("bigint")
	status, text := result()
	if status != "fail" || !strings.Contains(text, `message id column "message_id" is bigint`) ||
		!strings.Contains(text, "ALTER TABLE "+f.table.Quoted()+" ALTER COLUMN message_id TYPE text, ALTER COLUMN blocked_by TYPE text") {
		t.Errorf("uuid dead-letter ids, bigint outbox ids: %s %s; want a failure naming the types and the ALTER", status, text)
	}
}
