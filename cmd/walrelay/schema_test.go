package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
)

// Without a URL, --existing prints the publication, walrelay's tables and
// the grants, nothing for the outbox table, and says on stderr that no
// table was checked.
func TestSchemaExistingWithoutURL(t *testing.T) {
	pgtest.CleanEnv(t)
	out, errOut, err := runArgs("schema", "--existing", "--table", "app.OutboxMessages", "--column-occurred-at", "OccurredAtUtc", "--grant-to", "walrelay")
	if err != nil {
		t.Fatalf("schema --existing: %v\n%s", err, errOut)
	}
	c := schema.DefaultConfig()
	c.Table, c.Columns.OccurredAt = schema.Table{Schema: "app", Name: "OutboxMessages"}, "OccurredAtUtc"
	ddl, _ := schema.ExistingDDL(c)
	grants, _ := schema.GrantsSQL(c, "walrelay")
	if want := ddl + "\n" + grants; out != want {
		t.Errorf("schema --existing printed:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errOut, "not checked against a live table") {
		t.Errorf("stderr %q; want it to say the table was not checked", errOut)
	}
	// Mapping flags without --existing print walrelay's own table, and
	// point at --existing.
	out, errOut, err = runArgs("schema", "--table", "app.OutboxMessages", "--column-occurred-at", "OccurredAtUtc")
	if err != nil || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS \"app\".\"OutboxMessages\" (") || !strings.Contains(errOut, "--existing") {
		t.Errorf("schema with column flags: %v, stderr %q; want the table's DDL and a hint at --existing", err, errOut)
	}
}

// With a URL, --existing reads the table first: a table that does not
// fit prints nothing and fails with check's line; one that fits gets DDL
// that applies twice as one script (as psql -v ON_ERROR_STOP=1 would).
func TestSchemaExistingChecksTheLiveTable(t *testing.T) {
	pgtest.CleanEnv(t)
	db := pgtest.New(t, "wrschema_")
	ns := db.Name
	db.DropPublication("pub_" + ns)
	t.Cleanup(func() { db.Exec("DROP SCHEMA IF EXISTS " + schema.QuoteIdentifier(ns) + " CASCADE") })
	db.Exec("CREATE SCHEMA " + schema.QuoteIdentifier(ns))
	db.Exec(`CREATE TABLE "` + ns + `"."OutboxMessages" ("MessageId" uuid PRIMARY KEY, "AggregateId" uuid NOT NULL,
		"Type" text NOT NULL, "Payload" text NOT NULL, "OccurredAtUtc" timestamptz NOT NULL, "Retries" int NOT NULL DEFAULT 0)`)
	flags := []string{"schema", "--existing", "--postgres-url", db.URL, "--table", ns + ".OutboxMessages", "--publication", "pub_" + ns,
		"--column-message-id", "MessageId", "--column-aggregate-id", "AggregateId", "--column-type", "Type",
		"--column-payload", "Payload", "--column-occurred-at", "OccurredAtUtc"}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"missing table", []string{"--table", ns + ".Nothing"}, "outbox table: " + ns + ".Nothing does not exist"},
		{"no aggregate type", nil, `table columns: column "aggregate_type" is missing from ` + ns + `.OutboxMessages; fix: set --column-aggregate-type to its column, or --aggregate-type-default to a constant.`},
		{"missing column", []string{"--aggregate-type-default", "order", "--column-payload", "Body"}, `column "Body" (payload) is missing`},
		{"unreadable type", []string{"--aggregate-type-default", "order", "--column-payload", "Retries"}, `column "Retries" (payload) of ` + ns + `.OutboxMessages has type integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runArgs(append(flags, tc.extra...)...)
			if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("schema --existing: got %v (exit %d); want exit 1 saying %q", err, exitCode(err), tc.want)
			}
			if out != "" || errOut != "" {
				t.Errorf("schema --existing refused, yet printed %q, stderr %q; want nothing", out, errOut)
			}
		})
	}
	ok := append(flags, "--aggregate-type-default", "order", "--grant-to", "postgres")
	out, errOut, err := runArgs(ok...)
	if err != nil || errOut != "" {
		t.Fatalf("schema --existing of a table that fits: %v, stderr %q; want DDL", err, errOut)
	}
	conn := db.Conn()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := conn.PgConn().Exec(ctx, out).ReadAll(); err != nil {
			t.Fatalf("apply the DDL, time %d: %v\n%s", i+1, err, out)
		}
	}
	var viaRoot, insertOnly bool
	err = conn.QueryRow(ctx, "SELECT pubviaroot, pubinsert AND NOT pubupdate AND NOT pubdelete FROM pg_publication WHERE pubname = $1", "pub_"+ns).Scan(&viaRoot, &insertOnly)
	if err != nil || !viaRoot || !insertOnly {
		t.Errorf("publication: via root %v, insert-only %v, %v; want both", viaRoot, insertOnly, err)
	}
	if again, _, err := runArgs(ok...); err != nil || again != out {
		t.Errorf("schema --existing once applied: %v; want the same DDL", err)
	}
}
