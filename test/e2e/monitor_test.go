package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// With an idle outbox while another database writes 200 MB of WAL, the
// leader's heartbeats reach the stream, nothing is published, and the
// slot's confirmed position keeps moving with the WAL, so the server
// retains next to nothing for the slot.
func TestHeartbeatKeepsTheSlotMovingWhileAnotherDatabaseWrites(t *testing.T) {
	f := harness.New(t, "order")
	metrics := testkit.FreePort(t)
	r := f.Start("--metrics-addr", metrics, "--heartbeat-interval", "500ms", "--slot-poll-interval", "500ms")
	ctx := context.Background()
	oc := otherDatabase(t, f)
	_, err := oc.Exec(ctx, "CREATE TABLE noise (id bigserial PRIMARY KEY, v text)")
	testkit.Must(t, err, "create table in the other database")

	start := f.CurrentLSN()
	f.WaitConfirmed(r, start, 30*time.Second)
	const want = 200 << 20
	moves, last := 0, f.ConfirmedLSN()
	var maxLag uint64
	began := time.Now()
	for f.CurrentLSN()-start < want {
		_, err := oc.Exec(ctx, "INSERT INTO noise (v) SELECT repeat(md5(g::text), 32) FROM generate_series(1, 5000) g")
		testkit.Must(t, err, "write in the other database")
		if c := f.ConfirmedLSN(); c != last {
			moves, last = moves+1, c
		}
		maxLag = max(maxLag, uint64(f.CurrentLSN()-last))
	}
	end, writing := f.CurrentLSN(), time.Since(began)
	took := f.WaitConfirmed(r, end, 30*time.Second)
	t.Logf("wrote %d MB of WAL in another database in %s; the confirmed position moved %d times meanwhile (largest lag seen %d MB) and reached the end %s after it",
		(end-start)>>20, writing.Round(time.Millisecond), moves, maxLag>>20, took.Round(time.Millisecond))
	// Status updates go out every second (--status-interval 1s): the
	// position must move with them, not only once the writes stop.
	if wantMoves := max(1, int(writing/(3*time.Second))); moves < wantMoves {
		t.Errorf("confirmed position moved %d times during %s of writes; want it to keep moving (>= %d)", moves, writing.Round(time.Millisecond), wantMoves)
	}
	waitMetric(t, metrics, "walrelay_heartbeats_received_total", func(v float64) bool { return v >= 2 }, 15*time.Second)
	waitMetric(t, metrics, "walrelay_slot_lag_bytes", func(v float64) bool { return v >= 0 && v < 1<<20 }, 15*time.Second)
	if v := harness.Scrape(metrics, "walrelay_published_messages_total"); v > 0 {
		t.Errorf("walrelay_published_messages_total = %v with an idle outbox; want nothing published (heartbeats are never published)", v)
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
	for _, topic := range []string{f.Topic("order")} {
		if recs := f.ReadTopic(topic); len(recs) != 0 {
			t.Errorf("topic %s holds %d records; want 0", topic, len(recs))
		}
	}
}

// A walsender frozen (SIGSTOP) while the WAL moves on is a stall: the
// watchdog says so in walrelay_stalled, a log line and /readyz, and lifts
// the verdict once the walsender runs again.
func TestWatchdogReportsAStall(t *testing.T) {
	f := harness.New(t, "order")
	metrics := testkit.FreePort(t)
	r := f.Start("--metrics-addr", metrics, "--heartbeat-interval", "300ms", "--slot-poll-interval", "300ms", "--stall-threshold", "3s")
	ctx := context.Background()
	_, err := f.Write(ctx, harness.Load{Writers: 1, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	waitReady(t, metrics, http.StatusOK, 15*time.Second)

	var pid int
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&pid), "read walsender pid")
	testkit.Must(t, syscall.Kill(pid, syscall.SIGSTOP), "SIGSTOP walsender %d", pid)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			testkit.Must(t, syscall.Kill(pid, syscall.SIGCONT), "SIGCONT walsender %d", pid)
		}
	}
	t.Cleanup(resume)
	frozen := time.Now()
	waitMetric(t, metrics, "walrelay_stalled", func(v float64) bool { return v == 1 }, 30*time.Second)
	t.Logf("stall reported %s after the walsender froze (threshold 3s)", time.Since(frozen).Round(time.Millisecond))
	body := waitReady(t, metrics, http.StatusServiceUnavailable, 5*time.Second)
	if !strings.Contains(body, "stalled") {
		t.Errorf("/readyz while stalled: got %q; want the reason to say stalled", body)
	}
	if !strings.Contains(r.Stderr.String(), "replication stalled") {
		t.Errorf("no \"replication stalled\" log line while stalled:\n%s", r.Stderr.String())
	}

	resume()
	waitMetric(t, metrics, "walrelay_stalled", func(v float64) bool { return v == 0 }, 30*time.Second)
	waitReady(t, metrics, http.StatusOK, 15*time.Second)
	_, err = f.Write(ctx, harness.Load{Writers: 1, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write after the stall")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
	harness.AssertClean(t, f.Verify(f.OutboxRows()), 0)
}

// otherDatabase creates a database of the test's own and connects to it.
func otherDatabase(t *testing.T, f *harness.Fixture) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	name := "db_" + f.ID
	_, err := f.DB.Exec(ctx, "CREATE DATABASE "+name)
	testkit.Must(t, err, "create database %s", name)
	t.Cleanup(func() { f.DB.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") }) //nolint:errcheck // best effort
	cfg, err := pgx.ParseConfig(f.PGURL)
	testkit.Must(t, err, "parse url")
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	testkit.Must(t, err, "connect to %s", name)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitMetric waits until the relay's metric satisfies ok.
func waitMetric(t *testing.T, addr, name string, ok func(float64) bool, within time.Duration) float64 {
	t.Helper()
	var v float64
	poll.EventuallyEvery(t, within, 100*time.Millisecond, name+" to reach the expected value", func() (string, bool) {
		v = harness.Scrape(addr, name)
		return fmt.Sprintf("%s = %v", name, v), ok(v)
	})
	return v
}

// waitReady waits until /readyz answers with code and returns its body.
func waitReady(t *testing.T, addr string, code int, within time.Duration) string {
	t.Helper()
	var body string
	poll.EventuallyEvery(t, within, 100*time.Millisecond, fmt.Sprintf("/readyz = %d", code), func() (string, bool) {
		var got int
		got, body = get(addr, "/readyz")
		return fmt.Sprintf("/readyz = %d %q", got, body), got == code
	})
	return body
}

func get(addr, path string) (int, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
