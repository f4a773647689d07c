package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// noSecret fails the test when out shows the password.
func noSecret(t *testing.T, what, out, password string) {
	t.Helper()
	if strings.Contains(out, password) {
		t.Errorf("%s shows the password %q:\n%s", what, password, out)
	}
}

// walrelayEnv runs the walrelay binary with args and extra environment
// variables, and returns everything it printed and its exit code.
func walrelayEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run walrelay %v: %v", args, err)
	}
	return string(out), code
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url) //nolint:gosec,noctx // the test's own loopback listener
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return res.StatusCode, string(body)
}

// The relay role's password is in the URL every command gets; it shows in
// none of the commands' output, the logs at debug level, /metrics, or -h
// with the URL in WALRELAY_POSTGRES_URL, nor in connection and parse
// errors. The listener serves no profiling endpoint.
func TestSecretsStayOutOfOutput(t *testing.T) {
	f := harness.New(t, "order")
	pw := harness.RelayPassword
	if !strings.Contains(f.RelayURL, pw) {
		t.Fatalf("the fixture's URL %q does not carry the password %q: the test would prove nothing", f.RelayURL, pw)
	}
	noSecret(t, "walrelay init", f.WalrelayOK("init", "--log-level", "debug"), pw)

	addr := testkit.FreePort(t)
	r := f.Run("--metrics-addr", addr, "--log-level", "debug", "--heartbeat-interval", "1s")
	r.WaitStarted()
	_, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)

	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "walrelay_") {
		t.Errorf("/metrics: got %d; want 200 with walrelay's metrics", code)
	}
	noSecret(t, "/metrics", body, pw)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/vars"} {
		if code, _ := httpGet(t, "http://"+addr+path); code != http.StatusNotFound {
			t.Errorf("GET %s: got %d; want 404 (no profiling endpoint)", path, code)
		}
	}
	for _, verb := range [][]string{{"status"}, {"status", "--json"}, {"check"}, {"check", "--json"}, {"dlq", "list"}, {"dlq", "list", "--json"}} {
		stdout, stderr, _ := f.Walrelay(verb[0], verb[1:]...)
		noSecret(t, "walrelay "+strings.Join(verb, " "), stdout+stderr, pw)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("relay exit code %d; want 0", code)
	}
	noSecret(t, "walrelay run's log", r.Stderr.String(), pw)

	// -h with the URL in its variable shows the URL without its password,
	// and the listener's default address.
	help, _ := walrelayEnv(t, []string{"WALRELAY_POSTGRES_URL=" + f.RelayURL}, "run", "-h")
	noSecret(t, "walrelay run -h", help, pw)
	if !strings.Contains(help, harness.RelayRole+":xxxxx@") || !strings.Contains(help, "127.0.0.1:9187") {
		t.Errorf("walrelay run -h: want the URL with its password as xxxxx and the default listener 127.0.0.1:9187:\n%s", help)
	}

	// Errors name the server, never the password.
	bad := map[string]string{
		"unreachable":       "postgres://walrelay:" + pw + "@127.0.0.1:1/walrelay?sslmode=disable&connect_timeout=2",
		"bad port":          "postgres://walrelay:" + pw + "@127.0.0.1:notaport/walrelay",
		"keyword/value":     "host=127.0.0.1 port=1 user=walrelay password='" + pw + "' connect_timeout=2 sslmode=disable",
		"bad keyword/value": "host=127.0.0.1 password='" + pw + "' port=x",
	}
	for name, url := range bad {
		for _, verb := range []string{"init", "status", "run"} {
			stdout, stderr, code := f.Walrelay(verb, "--postgres-url", url)
			if code == 0 {
				t.Errorf("%s with %s URL: exit 0; want a failure", verb, name)
			}
			noSecret(t, "walrelay "+verb+" with the "+name+" URL", stdout+stderr, pw)
		}
	}
}

// Names go into SQL and replication commands. A hostile publication,
// table, dead-letter table, column or role name is a legal PostgreSQL
// name, and walrelay takes it as one: `walrelay schema` makes exactly the
// objects so named, check finds them (failing on the slot alone before
// init), init, status and run work through them and the row written into
// the hostile table reaches Kafka, and nothing else happens: the canary
// table each name tries to drop is still there. A hostile slot name is
// refused by every verb (PostgreSQL's own rule for slots) before anything
// reaches the server.
func TestHostileNamesAreHarmless(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	ctx := context.Background()
	canary := "canary_" + f.ID
	_, err := f.DB.Exec(ctx, "CREATE TABLE "+canary+" (id int)")
	testkit.Must(t, err, "create the canary table")
	t.Cleanup(func() { f.DB.Exec(context.Background(), "DROP TABLE IF EXISTS "+canary) }) //nolint:errcheck // best effort

	hostile := []string{`x"; DROP TABLE ` + canary + `; --`, "x y " + f.ID, "x;y " + f.ID, `x'); DROP TABLE ` + canary + `; --`,
		"x\ny " + f.ID, `x$walrelay$;DROP TABLE ` + canary + `;--`}
	for _, verb := range []string{"init", "check", "status", "run"} {
		stdout, stderr, code := f.Walrelay(verb, "--slot", hostile[0])
		// check reports a bad name as its failing "postgres config" line on
		// stdout; the other verbs fail with it on stderr.
		if code == 0 || !strings.Contains(stdout+stderr, "slot name") {
			t.Errorf("walrelay %s --slot %q: exit %d, output %q; want a failure naming the slot name", verb, hostile[0], code, stdout+stderr)
		}
	}
	var rows []harness.Row
	for i, name := range hostile {
		rows = append(rows, hostileNameRelays(t, f, fmt.Sprintf("%s_%d", f.Slot, i), name))
	}
	harness.AssertClean(t, f.Verify(rows), 0)
	var exists bool
	err = f.DB.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", canary).Scan(&exists)
	testkit.Must(t, err, "look up the canary table")
	if !exists {
		t.Errorf("the canary table %s is gone: a hostile name reached the server as SQL", canary)
	}
}

// hostileNameRelays names the outbox table, its publication, its
// dead-letter table (with " dl"), its aggregate id column and a role
// after name, with slot: `walrelay schema` makes them and grants the role,
// check, init and status work, and run relays one row written into the
// table, which it returns.
func hostileNameRelays(t *testing.T, f *harness.Fixture, slot, name string) harness.Row {
	t.Helper()
	ctx := context.Background()
	table := schema.Table{Schema: "public", Name: name}
	dl := schema.Table{Schema: "public", Name: name + " dl"}
	t.Cleanup(func() {
		for _, sql := range []string{"DROP PUBLICATION IF EXISTS " + schema.QuoteIdentifier(name),
			"DROP TABLE IF EXISTS " + strings.Join([]string{table.Quoted(), dl.Quoted(), schema.Table{Schema: "public", Name: name + "_recoveries"}.Quoted(),
				schema.Table{Schema: "public", Name: name + "_topics"}.Quoted()}, ", "),
			"DROP OWNED BY " + schema.QuoteIdentifier(name), "DROP ROLE IF EXISTS " + schema.QuoteIdentifier(name)} {
			if _, err := f.DB.Exec(context.Background(), sql); err != nil {
				t.Logf("cleanup: %s: %v", sql, err)
			}
		}
	})
	f.PG.DropSlot(slot)
	flags := []string{"--table", table.String(), "--publication", name, "--dead-letter-table", dl.String(), "--column-aggregate-id", name}
	run := append([]string{"--slot", slot}, flags...)
	_, err := f.DB.Exec(ctx, "CREATE ROLE "+schema.QuoteIdentifier(name))
	testkit.Must(t, err, "create role %q", name)
	for _, role := range []string{harness.RelayRole, name} {
		ddl := f.WalrelayOK("schema", append(flags, "--grant-to", role)...)
		testkit.Must(t, harness.ExecGrants(ctx, f.DB, ddl), "apply `walrelay schema` with %q:\n%s", name, ddl)
	}
	var made bool
	err = f.DB.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
		AND EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $3 AND schemaname = 'public' AND tablename = $3)
		AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $3)
		AND has_table_privilege($3, to_regclass($1), 'SELECT') AND has_table_privilege($3, to_regclass($2), 'INSERT')`,
		table.Quoted(), dl.Quoted(), name).Scan(&made)
	if err != nil || !made {
		t.Fatalf("after `walrelay schema` with %q: the table, its column, the dead-letter table, the publication and the grants exist %v (%v); want all", name, made, err)
	}

	_, report := runCheck(t, f, run...)
	for _, c := range report.Checks {
		if c.Status == "fail" && !strings.HasPrefix(c.Name, "slot") {
			t.Errorf("check with %q before init: %s failed (%s); want only the slot missing", name, c.Name, c.Found)
		}
	}
	f.WalrelayOK("init", run...)
	if _, report = runCheck(t, f, run...); report.Fail != 0 {
		t.Errorf("check with %q after init: %d failed; want none", name, report.Fail)
	}
	f.WalrelayOK("status", "--slot", slot, "--table", table.String(), "--publication", name)

	row := harness.Row{ID: harness.NewUUID(), AggregateType: "order", AggregateID: "agg " + slot, Type: "order.placed.v1", Payload: `{"name": "x"}`}
	row.Version = new(int64)
	*row.Version = 1
	err = f.DB.QueryRow(ctx, "INSERT INTO "+table.Quoted()+" (message_id, aggregate_type, "+schema.QuoteIdentifier(name)+
		", aggregate_version, type, payload) VALUES ($1, $2, $3, 1, $4, $5) RETURNING occurred_at",
		row.ID, row.AggregateType, row.AggregateID, row.Type, row.Payload).Scan(&row.OccurredAt)
	testkit.Must(t, err, "insert into %s", table)
	r := f.Run(run...)
	target := f.CurrentLSN()
	poll.EventuallyEvery(t, time.Minute, 100*time.Millisecond, ">= "+target.String(), func() (string, bool) {
		r.Running()
		got := f.PG.ConfirmedLSN(slot)
		return "slot " + slot + " confirmed_flush_lsn " + got.String(), got >= target
	})
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run with %q: exit %d after SIGTERM; want 0", name, code)
	}
	return row
}

// Run as the least-privilege role, `walrelay init` and `check` say exactly
// what the table's owner must do when the publication, the dead-letter
// table or its privileges are missing; once the owner applied `walrelay
// schema --grant-to`, init works and the relay streams. check warns when
// walrelay runs as a superuser.
func TestLeastPrivilegeRoleSaysWhatIsMissing(t *testing.T) {
	f := harness.New(t, "order")
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		_, err := f.DB.Exec(ctx, sql)
		testkit.Must(t, err, "run %s", sql)
	}
	dl := `"public"."` + f.Table + `_dead_letters"`
	exec(`DROP PUBLICATION ` + f.Publication)
	exec(`DROP TABLE ` + dl)

	wantPub := `CREATE PUBLICATION "` + f.Publication + `" FOR TABLE "public"."` + f.Table + `" WITH (publish = 'insert', publish_via_partition_root = true)`
	_, stderr, code := f.Walrelay("init")
	if code != 1 || !strings.Contains(stderr, "role "+harness.RelayRole+" may not create it") || !strings.Contains(stderr, wantPub) {
		t.Errorf("init without the publication: exit %d, stderr %q; want exit 1 naming the role and the owner's %s", code, stderr, wantPub)
	}
	_, report := runCheck(t, f)
	if report.status("publication create") != "fail" || !strings.Contains(findCheck(report, "publication create").Fix, wantPub) {
		t.Errorf("check without the publication: %+v; want 'publication create' failing with the owner's DDL", findCheck(report, "publication create"))
	}

	exec(wantPub)
	_, stderr, code = f.Walrelay("init")
	if code != 1 || !strings.Contains(stderr, "may not create it") || !strings.Contains(stderr, "walrelay schema --grant-to") ||
		!strings.Contains(stderr, "no replication slot was created") {
		t.Errorf("init without the dead-letter table: exit %d, stderr %q; want exit 1 saying who creates it and how, and that no slot was made", code, stderr)
	}
	// All or nothing: the failed init left no slot retaining WAL.
	var slots int
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&slots), "count slots")
	if slots != 0 {
		t.Errorf("slots named %s after the failed init: %d; want none", f.Slot, slots)
	}

	ddl := f.WalrelayOK("schema", "--grant-to", harness.RelayRole)
	testkit.Must(t, harness.ExecGrants(ctx, f.DB, ddl), "apply `walrelay schema` DDL")
	exec(`REVOKE INSERT, UPDATE ON ` + dl + ` FROM ` + harness.RelayRole)
	f.WalrelayOK("init")
	_, report = runCheck(t, f)
	if c := findCheck(report, "dead-letter privileges"); c.Status != "fail" || !strings.Contains(c.Found, "INSERT, UPDATE") {
		t.Errorf("check with INSERT and UPDATE revoked: %+v; want 'dead-letter privileges' failing on INSERT, UPDATE", c)
	}

	exec(ddl)
	_, report = runCheck(t, f)
	if report.Fail != 0 || report.status("role replication") != "ok" || report.status("dead-letter privileges") != "ok" {
		t.Errorf("check after the owner's grants: %d failed, role replication %s, dead-letter privileges %s; want none failed and both ok",
			report.Fail, report.status("role replication"), report.status("dead-letter privileges"))
	}
	r := f.Run()
	r.WaitStarted()
	_, err := f.Write(ctx, harness.Load{Writers: 2, Rows: 40, MaxTxRows: 4, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)

	_, report = runCheck(t, f, "--postgres-url", f.PGURL)
	if c := findCheck(report, "role replication"); c.Status != "warn" || !strings.Contains(c.Found, "superuser") {
		t.Errorf("check as the rig's superuser: %+v; want a warning about the superuser", c)
	}
}

func findCheck(r checkJSON, name string) struct{ Name, Status, Found, Fix string } {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return struct{ Name, Status, Found, Fix string }{Name: name, Status: "(missing)"}
}
