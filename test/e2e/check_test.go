package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// checkJSON is the JSON report of `walrelay check --json`.
type checkJSON struct {
	Checks []struct {
		Name, Status, Found, Fix string
	}
	OK, Warn, Fail int
	Failed         bool
}

func (r checkJSON) status(name string) string {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status
		}
	}
	return "(missing)"
}

// runCheck runs `walrelay check` twice, as a table and as JSON, and checks
// that both say the same and that the exit code follows the failures.
func runCheck(t *testing.T, f *harness.Fixture, extra ...string) (string, checkJSON) {
	t.Helper()
	start := time.Now()
	text, stderr, code := f.Walrelay("check", extra...)
	t.Logf("walrelay check (exit %d after %s):\n%s%s", code, time.Since(start).Round(time.Millisecond), text, stderr)
	jsonOut, jsonErr, jsonCode := f.Walrelay("check", append(extra, "--json")...)
	var report checkJSON
	if err := json.Unmarshal([]byte(jsonOut), &report); err != nil {
		t.Fatalf("check --json: got %v parsing\n%s; want a JSON report", err, jsonOut)
	}
	if len(report.Checks) == 0 {
		t.Fatalf("check --json: got no checks; want some\n%s", jsonOut)
	}
	wantCode, wantErr := 0, ""
	if report.Fail > 0 {
		wantCode, wantErr = 1, fmt.Sprintf("walrelay: check: %d check", report.Fail)
	}
	if code != wantCode || jsonCode != wantCode {
		t.Errorf("exit codes: got %d (table) and %d (json); want %d with %d failed checks", code, jsonCode, wantCode, report.Fail)
	}
	if wantErr != "" && (!strings.HasPrefix(lastLine(stderr), wantErr) || !strings.HasPrefix(lastLine(jsonErr), wantErr)) {
		t.Errorf("error lines: got %q and %q; want %q...", lastLine(stderr), lastLine(jsonErr), wantErr)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(report.Checks)+1 {
		t.Errorf("table: got %d lines; want %d checks and the counts", len(lines), len(report.Checks))
	}
	for i, c := range report.Checks {
		if i < len(lines) && !strings.HasPrefix(lines[i], fmt.Sprintf("%-4s  %s ", c.Status, c.Name)) {
			t.Errorf("table line %d: got %q; want status %s and check %q as in the JSON", i, lines[i], c.Status, c.Name)
		}
	}
	return text, report
}

func wantStatus(t *testing.T, r checkJSON, want map[string]string) {
	t.Helper()
	for name, status := range want {
		if got := r.status(name); got != status {
			t.Errorf("check %q: got %s; want %s", name, got, status)
		}
	}
}

// On the rig as `walrelay init` and the harness set it up, every check is
// made, none fails, and the topics come from the outbox rows.
func TestCheckGoodRig(t *testing.T) {
	f := harness.New(t, "order", "customer")
	f.WalrelayOK("init")
	// 100 rows: both aggregate types, and row 97 with its own topic.
	_, err := f.Write(context.Background(), harness.Load{Writers: 1, Rows: 100, MaxTxRows: 10, AggregatesPerWriter: 4, Types: []string{"order", "customer"}})
	testkit.Must(t, err, "write outbox rows")

	_, report := runCheck(t, f)

	if report.Fail != 0 || report.Failed {
		t.Errorf("failed checks: got %d (failed %v); want none", report.Fail, report.Failed)
	}
	want := map[string]string{}
	for _, name := range []string{"postgres reachable", "server version", "server role", "postgres provider", "wal_level", "max_replication_slots", "max_wal_senders",
		"database connect", "outbox table", "table columns", "publication", "publication inserts", "publication table", "publication scope",
		"recovery", "slot", "slot plugin", "slot database", "slot wal_status", "slot lag", "dead-letter table", "dead-letter privileges", "dead-letter message ids", "topics table", "prune privileges",
		"kafka reachable", "kafka idempotence", "topics", "topic partitions",
		// The fixture runs walrelay as harness.RelayRole: REPLICATION, not a superuser.
		"role replication", "lock session"} {
		want[name] = "ok"
	}
	for _, topic := range []string{f.Topic("order"), f.Topic("customer"), f.TopicPrefix + ".special"} {
		want["topic "+topic] = "ok"
		// The harness's topics have one replica, on the rig's one broker; with
		// no failure, min.insync.replicas is then 1, below 2.
		want["topic "+topic+" replication factor"] = "warn"
		want["topic "+topic+" min.insync.replicas"] = "warn"
		// The rig's broker keeps Kafka's default: no unclean leader election.
		want["topic "+topic+" unclean.leader.election.enable"] = "ok"
	}
	// The rig's broker has no TLS listener.
	want["kafka tls"] = "warn"
	// By version: a failover slot from 17 (init makes one), 18's idle
	// timeout off on the rig; no standby, so nothing on
	// synchronized_standby_slots.
	version := serverVersion(t, f)
	if version >= 170000 {
		want["slot failover"] = "ok"
	}
	if version >= 180000 {
		want["idle_replication_slot_timeout"] = "ok"
	}
	wantStatus(t, report, want)
	for _, name := range []string{"max_slot_wal_keep_size", "postgres tls"} {
		if got := report.status(name); got != "ok" && got != "warn" {
			t.Errorf("check %q: got %s; want ok or warn on the rig", name, got)
		}
	}
	if n, w := len(report.Checks), len(want)+2; n != w {
		t.Errorf("checks: got %d; want %d (%d named + max_slot_wal_keep_size + postgres tls)", n, w, len(want))
	}
}

// serverVersion is the rig server's server_version_num.
func serverVersion(t *testing.T, f *harness.Fixture) int {
	t.Helper()
	var v int
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&v), "server_version_num")
	return v
}

// A server without wal_level=logical fails that check, and the exit code
// says so; Kafka is still checked.
func TestCheckWalLevelReplica(t *testing.T) {
	f := harness.New(t, "order")
	_, report := runCheck(t, f, "--postgres-url", replicaLevelServer(t))
	wantStatus(t, report, map[string]string{"postgres reachable": "ok", "wal_level": "fail", "kafka reachable": "ok"})
	if !report.Failed {
		t.Errorf("failed: got false; want true")
	}
}

// An unreachable broker fails, the Kafka checks stop there, and it takes
// no long timeout.
func TestCheckUnreachableBroker(t *testing.T) {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	start := time.Now()
	_, report := runCheck(t, f, "--kafka-brokers", "127.0.0.1:1")
	wantStatus(t, report, map[string]string{"wal_level": "ok", "slot": "ok", "kafka reachable": "fail", "topics": "(missing)"})
	if last := report.Checks[len(report.Checks)-1]; last.Name != "kafka reachable" {
		t.Errorf("last check: got %q; want kafka reachable, with the other Kafka checks skipped", last.Name)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s for two runs; want a refused connection to fail fast", took)
	}
}
