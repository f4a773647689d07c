package schema

import (
	"strings"
	"testing"
)

func TestInboxDDLUsesQuotedNames(t *testing.T) {
	ddl, err := InboxDDL(Table{"app", "Inbox$1"}, Table{"app", "versions"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "app"."Inbox$1" (`,
		`CREATE INDEX IF NOT EXISTS "Inbox$1_processed" ON "app"."Inbox$1" (consumer_id, processed_at);`,
		`CREATE TABLE IF NOT EXISTS "app"."versions" (`,
		`PRIMARY KEY (consumer_id, message_id)`,
		`PRIMARY KEY (consumer_id, aggregate_type, aggregate_id)`,
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("InboxDDL lacks %q:\n%s", want, ddl)
		}
	}
	if n := strings.Count(ddl, "IF NOT EXISTS"); n != 3 {
		t.Errorf("IF NOT EXISTS appears %d times; want 3 (two tables and the index)", n)
	}
}

func TestInboxDDLRefusesBadNames(t *testing.T) {
	ok := Table{"public", "inbox"}
	for _, tc := range []struct {
		name            string
		inbox, versions Table
	}{
		{"inbox name with a NUL", Table{"public", "in\x00box"}, Table{"public", "v"}},
		{"empty inbox schema", Table{"", "inbox"}, Table{"public", "v"}},
		{"versions name too long", ok, Table{"public", strings.Repeat("v", 64)}},
		{"empty versions name", ok, Table{"public", ""}},
		{"index name too long", Table{"public", strings.Repeat("i", 60)}, Table{"public", "v"}},
		{"versions is the inbox", ok, ok},
	} {
		if ddl, err := InboxDDL(tc.inbox, tc.versions); err == nil {
			t.Errorf("%s: InboxDDL(%v, %v) = nil error; want an error\n%s", tc.name, tc.inbox, tc.versions, ddl)
		}
	}
}
