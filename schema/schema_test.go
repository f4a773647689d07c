package schema

import (
	"strings"
	"testing"
)

func TestValidateSlotName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"walrelay", true},
		{"slot_1", true},
		{"1slot", true}, // PostgreSQL allows it; the stream quotes the name
		{"Slot", false},
		{"", false},
		{`x"; DROP TABLE t; --`, false},
		{"a-b", false},
		{strings.Repeat("a", 64), false},
	} {
		err := ValidateSlotName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateSlotName(%q) = %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestColumnsValidate(t *testing.T) {
	c := DefaultColumns()
	if err := c.Validate(); err != nil {
		t.Fatalf("default columns: %v", err)
	}
	c.Payload = c.Headers
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("a column used twice: err = %v; want it named", err)
	}
	c = DefaultColumns()
	c.Topic = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "topic column name is empty") {
		t.Errorf("an empty column name: err = %v; want it refused", err)
	}
}

func TestDDLUsesConfiguredNames(t *testing.T) {
	c := DefaultConfig()
	c.Table = Table{"app", "events"}
	c.Publication = "pub_events"
	c.Columns.AggregateID = "order_id"
	ddl, err := DDL(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "app"."events"`,
		`"order_id"      text        NOT NULL CHECK ("order_id" <> '')`,
		`CREATE PUBLICATION "pub_events" FOR TABLE "app"."events" WITH (publish = 'insert', publish_via_partition_root = true)`,
		`pubname = 'pub_events'`,
		`CREATE INDEX IF NOT EXISTS "events_occurred_at" ON "app"."events" ("occurred_at");`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %q:\n%s", want, ddl)
		}
	}
	c.Publication = ""
	if _, err := DDL(c); err == nil {
		t.Error("DDL rendered an empty publication name")
	}
}

func TestParseMessageID(t *testing.T) {
	for _, s := range []string{"12345678-9abc-def0-0123-456789abcdef", "42", "order-42/evt 7", strings.Repeat("x", MaxMessageIDBytes)} {
		id, err := ParseMessageID(s)
		if err != nil || id.String() != s {
			t.Errorf("ParseMessageID(%.40q) = %q, %v; want it unchanged", s, id, err)
		}
	}
	for s, want := range map[string]string{
		"":                                       "message id is empty",
		strings.Repeat("x", MaxMessageIDBytes+1): "message id of 1025 bytes is over the limit of 1024",
	} {
		if _, err := ParseMessageID(s); err == nil || err.Error() != want {
			t.Errorf("ParseMessageID(%.40q) error %v; want %q", s, err, want)
		}
	}
}

func TestDeadLetterDDLIsTheDeadLetterPartOfDDL(t *testing.T) {
	c := DefaultConfig()
	c.DeadLetters = Table{Name: "parked"}
	all, err := DDL(c)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := DeadLetterDDL(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "public"."parked" (`,
		`target_topic      text,`,
		`CREATE INDEX IF NOT EXISTS "parked_parked" ON "public"."parked"`,
	} {
		if !strings.Contains(dl, want) {
			t.Errorf("DeadLetterDDL lacks %q:\n%s", want, dl)
		}
	}
	for _, unwanted := range []string{"outbox_messages", "PUBLICATION"} {
		if strings.Contains(dl, unwanted) {
			t.Errorf("DeadLetterDDL contains %q; want the dead-letter table alone:\n%s", unwanted, dl)
		}
	}
	if !strings.Contains(all, "\n\n"+dl+"\n") {
		t.Errorf("DDL does not hold DeadLetterDDL after a blank line:\n%s", all)
	}
	c.DeadLetters = Table{Name: strings.Repeat("d", 64)}
	if _, err := DeadLetterDDL(c); err == nil {
		t.Error("DeadLetterDDL rendered a 64-byte table name")
	}
}

// The retention index follows the configured table and column, and comes
// after the table it indexes.
func TestDDLIndexesOccurredAt(t *testing.T) {
	c := DefaultConfig()
	c.Columns.OccurredAt = "event_time"
	ddl, err := DDL(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `CREATE INDEX IF NOT EXISTS "outbox_messages_occurred_at" ON "public"."outbox_messages" ("event_time");`
	idx, table := strings.Index(ddl, want), strings.Index(ddl, `CREATE TABLE IF NOT EXISTS "public"."outbox_messages" (`)
	if idx < 0 || table < 0 || idx < table {
		t.Errorf("DDL: index at %d, table at %d; want %q after the table:\n%s", idx, table, want, ddl)
	}
	if n := strings.Count(ddl, "CREATE INDEX"); n != 2 {
		t.Errorf("DDL has %d CREATE INDEX; want 2 (occurred_at, parked dead letters)", n)
	}
}

func TestRecoveryDDLIsTheRecoveryPartOfDDL(t *testing.T) {
	c := DefaultConfig()
	c.Table = Table{"app", "events"}
	all, err := DDL(c)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := RecoveryDDL(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "app"."events_recoveries" (`,
		`slot_name      text        PRIMARY KEY,`,
		`consistent_lsn pg_lsn,`,
		`finished_at    timestamptz,`,
	} {
		if !strings.Contains(rec, want) {
			t.Errorf("RecoveryDDL lacks %q:\n%s", want, rec)
		}
	}
	for _, unwanted := range []string{"dead_letters", "PUBLICATION", "INDEX"} {
		if strings.Contains(rec, unwanted) {
			t.Errorf("RecoveryDDL contains %q; want the recoveries table alone:\n%s", unwanted, rec)
		}
	}
	top, err := TopicsDDL(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "app"."events_topics" (`,
		`topic       text        PRIMARY KEY,`,
		`partitions  integer     NOT NULL CHECK (partitions > 0),`,
	} {
		if !strings.Contains(top, want) {
			t.Errorf("TopicsDDL lacks %q:\n%s", want, top)
		}
	}
	if strings.Contains(top, "recoveries") || strings.Contains(top, "dead_letters") {
		t.Errorf("TopicsDDL holds another table:\n%s", top)
	}
	if !strings.HasSuffix(all, "\n\n"+rec+"\n"+top) {
		t.Errorf("DDL does not end with a blank line, RecoveryDDL, a blank line and TopicsDDL:\n%s", all)
	}
}

// The recoveries table sits beside the dead-letter table, wherever that
// is, and is named after the outbox table.
func TestRecoveryTable(t *testing.T) {
	c := DefaultConfig()
	if got, want := c.RecoveryTable(), (Table{"public", "outbox_messages_recoveries"}); got != want {
		t.Errorf("default: got %s; want %s", got, want)
	}
	c.DeadLetters = Table{Schema: "ops", Name: "parked"}
	if got, want := c.RecoveryTable(), (Table{"ops", "outbox_messages_recoveries"}); got != want {
		t.Errorf("with the dead letters in ops: got %s; want %s", got, want)
	}
}

// Validate covers the recoveries table's derived name: too long, or the
// dead-letter table's.
func TestValidateRecoveryTable(t *testing.T) {
	c := DefaultConfig()
	c.Table.Name = strings.Repeat("t", 53) // 53 + len("_recoveries") = 64
	c.DeadLetters = Table{Name: "parked"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "recoveries table name") || !strings.Contains(err.Error(), "_recoveries") {
		t.Errorf("a 64-byte recoveries table name: got %v; want it refused, saying where the name comes from", err)
	}
	c.Table.Name = strings.Repeat("t", 52)
	if err := c.Validate(); err != nil {
		t.Errorf("a 63-byte recoveries table name: got %v; want nil", err)
	}
	c = DefaultConfig()
	c.DeadLetters = Table{Name: "outbox_messages_recoveries"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "recoveries table") {
		t.Errorf("dead letters in the recoveries table: got %v; want it refused", err)
	}
	c.DeadLetters = Table{Name: "outbox_messages_topics"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "topics table") {
		t.Errorf("dead letters in the topics table: got %v; want it refused", err)
	}

}

func TestGrantsSQL(t *testing.T) {
	c := DefaultConfig()
	c.DeadLetters = Table{Schema: "ops", Name: "parked"}
	got, err := GrantsSQL(c, "relay")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`GRANT USAGE ON SCHEMA "public" TO "relay";`,
		`GRANT USAGE ON SCHEMA "ops" TO "relay";`,
		`GRANT SELECT ON "public"."outbox_messages" TO "relay";`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON "ops"."parked" TO "relay";`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON "ops"."outbox_messages_recoveries" TO "relay";`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("GrantsSQL lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "DELETE ON \"public\".\"outbox_messages\"") {
		t.Errorf("GrantsSQL grants DELETE on the outbox table; want prune's privilege left to the owner:\n%s", got)
	}
	if _, err := GrantsSQL(c, ""); err == nil {
		t.Error("GrantsSQL accepted an empty role name")
	}
}

// ExistingDDL is DDL without the outbox table and its index: the
// publication and walrelay's own tables, for a table of any columns.
func TestExistingDDLLeavesTheOutboxTableAlone(t *testing.T) {
	c := DefaultConfig()
	c.Table = Table{"app", "OutboxMessages"}
	c.Columns.OccurredAt = "OccurredAtUtc"
	all, err := DDL(c)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := ExistingDDL(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, unwanted := range []string{`CREATE TABLE IF NOT EXISTS "app"."OutboxMessages" `, `"OccurredAtUtc"`, `ON "app"."OutboxMessages"`} {
		if strings.Contains(ddl, unwanted) {
			t.Errorf("ExistingDDL has %q:\n%s", unwanted, ddl)
		}
	}
	for _, want := range []string{
		`CREATE PUBLICATION "walrelay_outbox" FOR TABLE "app"."OutboxMessages" WITH (publish = 'insert', publish_via_partition_root = true)`,
		`IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'walrelay_outbox')`,
		`CREATE TABLE IF NOT EXISTS "app"."OutboxMessages_dead_letters" (`,
		`CREATE TABLE IF NOT EXISTS "app"."OutboxMessages_recoveries" (`,
		`CREATE TABLE IF NOT EXISTS "app"."OutboxMessages_topics" (`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("ExistingDDL lacks %q:\n%s", want, ddl)
		}
	}
	// Everything after its header is DDL's, as DDL prints it.
	if _, rest, ok := strings.Cut(ddl, "\n\n"); !ok || !strings.HasSuffix(all, rest) {
		t.Errorf("ExistingDDL is not DDL's publication and tables:\n%s", ddl)
	}
	if n := strings.Count(ddl, "CREATE INDEX"); n != 1 {
		t.Errorf("ExistingDDL has %d CREATE INDEX; want 1 (parked dead letters)", n)
	}
	// Any name, quoted: as an identifier and as a literal.
	c.Publication = "x'y\"z"
	ddl, err = ExistingDDL(c)
	if err != nil || !strings.Contains(ddl, `CREATE PUBLICATION "x'y""z" FOR TABLE`) || !strings.Contains(ddl, `pubname = 'x''y"z'`) {
		t.Errorf("ExistingDDL of publication %q: %v; want it quoted as an identifier and a literal:\n%s", c.Publication, err, ddl)
	}
}
