package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// statusOut is `walrelay status --json` as a script reads it. Pointers are
// the fields that may be null.
type statusOut struct {
	ReadAt        string `json:"read_at"`
	CurrentWALLSN string `json:"current_wal_lsn"`
	Provider      string `json:"provider"`
	Slot          struct {
		Name               string  `json:"name"`
		State              string  `json:"state"`
		Active             bool    `json:"active"`
		ActivePID          *int32  `json:"active_pid"`
		ConfirmedFlushLSN  *string `json:"confirmed_flush_lsn"`
		RestartLSN         *string `json:"restart_lsn"`
		LagBytes           *uint64 `json:"lag_bytes"`
		RetainedWALBytes   *uint64 `json:"retained_wal_bytes"`
		WALStatus          *string `json:"wal_status"`
		SafeWALSizeBytes   *int64  `json:"safe_wal_size_bytes"`
		Failover           bool    `json:"failover"`
		InvalidationReason *string `json:"invalidation_reason"`
		InactiveSince      *string `json:"inactive_since"`
		IdleTimeout        *string `json:"idle_replication_slot_timeout"`
	} `json:"slot"`
	Publication struct {
		Name        string   `json:"name"`
		Exists      bool     `json:"exists"`
		Operations  []string `json:"operations"`
		InsertsOnly bool     `json:"inserts_only"`
		Tables      []string `json:"tables"`
		CoversTable bool     `json:"covers_table"`
	} `json:"publication"`
	Leader *struct {
		PID             uint32 `json:"pid"`
		ApplicationName string `json:"application_name"`
	} `json:"leader"`
}

// slotRow is the fixture's row of pg_replication_slots, read by the test.
type slotRow struct {
	active    bool
	pid       int32 // 0 when inactive
	confirmed pglogrepl.LSN
	walStatus string
}

// With a relay streaming, status reports the slot active with the relay's
// walsender, its lag as the server computes it, the publication, and the
// relay's lock session as the leader; after the relay stopped, the slot is
// inactive and nobody leads. The table says the same as the JSON.
func TestStatusReportsTheRunningRelay(t *testing.T) {
	f := harness.New(t, "order")
	r := f.Start()
	r.WaitStarted()
	n, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 200, MaxTxRows: 10, AggregatesPerWriter: 4, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	end := f.CurrentLSN()
	f.WaitConfirmed(r, end, 2*time.Minute)
	// Paused, the relay keeps its walsender and its lock session but
	// confirms nothing more: the rows written now are lag, fixed while
	// status reads it.
	r.Pause()
	paused, err := f.Write(context.Background(), harness.Load{Writers: 1, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 2, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows while the relay is paused")

	startedAt := time.Now()
	before, curBefore := readSlotRow(t, f), f.CurrentLSN()
	st := statusJSON(t, f)
	after, curAfter := readSlotRow(t, f), f.CurrentLSN()
	t.Logf("wrote %d rows, then %d with the relay paused", n, paused)
	if before.confirmed != after.confirmed {
		t.Fatalf("confirmed_flush_lsn moved from %s to %s with the relay paused; want it fixed", before.confirmed, after.confirmed)
	}

	if st.Slot.Name != f.Slot || st.Slot.State != "active" || !st.Slot.Active {
		t.Errorf("slot: got name %q state %q active %v; want %q active", st.Slot.Name, st.Slot.State, st.Slot.Active, f.Slot)
	}
	if st.Slot.ActivePID == nil || !before.active || *st.Slot.ActivePID != before.pid || before.pid != after.pid {
		t.Errorf("active_pid: got %v; want pg_replication_slots.active_pid %d (and %d after)", st.Slot.ActivePID, before.pid, after.pid)
	}
	confirmed := lsnOf(t, "confirmed_flush_lsn", st.Slot.ConfirmedFlushLSN)
	if confirmed < before.confirmed || confirmed > after.confirmed || confirmed < end {
		t.Errorf("confirmed_flush_lsn: got %s; want between %s and %s (the server before and after), at least %s (the last write)",
			confirmed, before.confirmed, after.confirmed, end)
	}
	current := lsnOf(t, "current_wal_lsn", &st.CurrentWALLSN)
	if current < curBefore || current > curAfter {
		t.Errorf("current_wal_lsn: got %s; want between %s and %s", current, curBefore, curAfter)
	}
	if st.Slot.LagBytes == nil || *st.Slot.LagBytes != uint64(current-confirmed) || current <= confirmed {
		t.Errorf("lag_bytes: got %v; want current_wal_lsn - confirmed_flush_lsn = %d > 0", st.Slot.LagBytes, current-confirmed)
	}
	restart := lsnOf(t, "restart_lsn", st.Slot.RestartLSN)
	if st.Slot.RetainedWALBytes == nil || *st.Slot.RetainedWALBytes != uint64(current-restart) {
		t.Errorf("retained_wal_bytes: got %v; want current_wal_lsn - restart_lsn = %d", st.Slot.RetainedWALBytes, current-restart)
	}
	if st.Slot.WALStatus == nil || *st.Slot.WALStatus != after.walStatus {
		t.Errorf("wal_status: got %v; want %q", st.Slot.WALStatus, after.walStatus)
	}
	if unlimited := keepSizeUnlimited(t, f); unlimited != (st.Slot.SafeWALSizeBytes == nil) {
		t.Errorf("safe_wal_size_bytes: got %v with max_slot_wal_keep_size unlimited=%v; want null exactly when unlimited", st.Slot.SafeWALSizeBytes, unlimited)
	}
	// By version: walrelay init makes a failover slot from 17 on; 18 has
	// an idle timeout (off on the rig); an active slot was never released.
	version := serverVersion(t, f)
	if st.Slot.Failover != (version >= 170000) || st.Slot.InvalidationReason != nil || st.Slot.InactiveSince != nil {
		t.Errorf("failover %v, invalidation_reason %v, inactive_since %v: want failover from 17 (server %d), no invalidation, never released",
			st.Slot.Failover, st.Slot.InvalidationReason, st.Slot.InactiveSince, version)
	}
	if (st.Slot.IdleTimeout != nil) != (version >= 180000) || st.Slot.IdleTimeout != nil && *st.Slot.IdleTimeout != "0" {
		t.Errorf("idle_replication_slot_timeout: got %v; want \"0\" from 18 (server %d), null before", st.Slot.IdleTimeout, version)
	}
	if st.Provider != "self-managed" {
		t.Errorf("provider: got %q; want self-managed (the rig shows no managed provider's roles or settings)", st.Provider)
	}
	checkPublication(t, f, st)
	holder := lockHolder(t, f)
	if st.Leader == nil || holder == 0 || st.Leader.PID != holder || st.Leader.ApplicationName != applicationName(t, f, holder) {
		t.Errorf("leader: got %+v; want pid %d (the holder of the advisory lock in pg_locks) and its application_name", st.Leader, holder)
	}
	if at, err := time.Parse(time.RFC3339Nano, st.ReadAt); err != nil || at.Before(startedAt.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("read_at: got %q (%v); want a time during the command", st.ReadAt, err)
	}

	table := statusTable(t, f)
	want := map[string]string{
		"slot": f.Slot, "slot state": "active", "active pid": strconv.Itoa(int(before.pid)),
		"wal_status": after.walStatus, "publication": f.Publication, "publication state": "present",
		"tables": "public." + f.Table, "publishes": "insert (inserts only)", "failover": "no", "invalidation": "-", "idle timeout": "-",
	}
	if version >= 170000 {
		want["failover"] = "yes (failover slot)"
	}
	if version >= 180000 {
		want["idle timeout"] = "0 (off)"
	}
	checkRows(t, table, want)
	if got, want := table["leader"], "pid "+strconv.Itoa(int(holder))+", application "+applicationName(t, f, holder)+", client "; !strings.HasPrefix(got, want) {
		t.Errorf("table leader: got %q; want prefix %q", got, want)
	}
	if table["confirmed LSN"] != confirmed.String() {
		t.Errorf("table confirmed LSN: got %q; want %s (fixed while paused)", table["confirmed LSN"], confirmed)
	}
	tableCurrent := lsnOf(t, "table server WAL", ptr(table["server WAL"]))
	if got, want := tableBytes(t, table["lag"]), uint64(tableCurrent-confirmed); got != want {
		t.Errorf("table lag: got %d bytes (%q); want server WAL - confirmed LSN = %d", got, table["lag"], want)
	}
	if got, want := tableBytes(t, table["retained WAL"]), uint64(tableCurrent-restart); got != want {
		t.Errorf("table retained WAL: got %d bytes (%q); want server WAL - restart_lsn = %d", got, table["retained WAL"], want)
	}

	r.Resume()
	f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	waitReleased(t, f)
	st = statusJSON(t, f)
	if (st.Slot.InactiveSince != nil) != (version >= 170000) {
		t.Errorf("after stop: inactive_since %v; want a time from 17 (server %d), null before", st.Slot.InactiveSince, version)
	}
	if st.Slot.State != "inactive" || st.Slot.Active || st.Slot.ActivePID != nil || st.Leader != nil {
		t.Errorf("after stop: got state %q active %v active_pid %v leader %+v; want inactive, false, null, null",
			st.Slot.State, st.Slot.Active, st.Slot.ActivePID, st.Leader)
	}
	checkRows(t, statusTable(t, f), map[string]string{"slot state": "inactive", "active pid": "-", "leader": "nobody"})
}

// A slot that does not exist is a reading (state missing) that exits 1
// with a line saying so, for scripts; a server
// that cannot be reached is one error line and exit 1, and the password of
// the URL shows nowhere.
func TestStatusOnAMisconfiguredCluster(t *testing.T) {
	f := harness.New(t)
	f.WalrelayOK("init")
	missing := "no_such_slot_" + f.ID
	problem := fmt.Sprintf("slot %q is missing", missing)
	st := statusJSONExit(t, f, problem, "--slot", missing)
	if st.Slot.Name != missing || st.Slot.State != "missing" || st.Slot.ConfirmedFlushLSN != nil || st.Slot.LagBytes != nil || st.Leader != nil {
		t.Errorf("missing slot: got %+v; want state missing, nulls, no leader", st.Slot)
	}
	if !st.Publication.Exists || !st.Publication.CoversTable {
		t.Errorf("publication of the missing slot's reading: got %+v; want it present", st.Publication)
	}
	checkRows(t, statusTableExit(t, f, problem, "--slot", missing), map[string]string{"slot": missing, "slot state": "missing", "leader": "nobody"})

	password := "pw-" + f.ID
	// No sslmode: pgconn then tries twice and reports both attempts on
	// several lines, which status must fold into one.
	url := "postgres://walrelay:" + password + "@" + testkit.FreePort(t) + "/walrelay"
	for _, extra := range [][]string{{"--json"}, nil} {
		stdout, stderr, code := f.Walrelay("status", append([]string{"--postgres-url", url}, extra...)...)
		if code != 1 || stdout != "" {
			t.Errorf("status %v on an unreachable server: got exit %d, stdout %q; want exit 1, no stdout", extra, code, stdout)
		}
		if lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "walrelay: connect to postgres ") {
			t.Errorf("status %v stderr: got %q; want one line `walrelay: connect to postgres ...`", extra, stderr)
		}
		if strings.Contains(stdout+stderr, password) {
			t.Errorf("status %v printed the password: %q", extra, stdout+stderr)
		}
	}
}

// statusJSON runs `walrelay status --json`, which must exit 0 (the slot
// can be streamed).
func statusJSON(t *testing.T, f *harness.Fixture, extra ...string) statusOut {
	t.Helper()
	return statusJSONExit(t, f, "", extra...)
}

// statusJSONExit is statusJSON of a reading that shows a problem when
// problem is set: exit 1, the reading on stdout all the same, and on
// stderr one line `walrelay: status: <problem>: walrelay run cannot
// stream`.
func statusJSONExit(t *testing.T, f *harness.Fixture, problem string, extra ...string) statusOut {
	t.Helper()
	out := statusRun(t, f, problem, append([]string{"--json"}, extra...)...)
	t.Logf("status --json %v:\n%s", extra, out)
	var st statusOut
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("parse status --json: got %v; want JSON\n%s", err, out)
	}
	return st
}

// statusTable runs `walrelay status` and splits its `key  value` lines.
func statusTable(t *testing.T, f *harness.Fixture, extra ...string) map[string]string {
	t.Helper()
	return statusTableExit(t, f, "", extra...)
}

// statusTableExit is statusTable of a reading that shows problem (as
// statusJSONExit).
func statusTableExit(t *testing.T, f *harness.Fixture, problem string, extra ...string) map[string]string {
	t.Helper()
	out := statusRun(t, f, problem, extra...)
	t.Logf("status %v:\n%s", extra, out)
	rows := map[string]string{}
	sep := regexp.MustCompile(`\s{2,}`)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		kv := sep.Split(line, 2)
		if len(kv) != 2 {
			t.Fatalf("status line %q: got no `key  value`; want one\n%s", line, out)
		}
		rows[kv[0]] = kv[1]
	}
	return rows
}

func checkRows(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("table %q: got %q; want %q", k, got[k], v)
		}
	}
}

// tableBytes reads a byte count as the table prints it: "72 B", or
// "1.5 MiB (1572864 bytes)" where the unit is larger, whose rounded figure
// must agree with the exact one.
func tableBytes(t *testing.T, text string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`^(\d+) B$|^(\d+\.\d) ([KMGTPE])iB \((\d+) bytes\)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("table bytes: got %q; want like \"72 B\" or \"1.5 MiB (1572864 bytes)\"", text)
	}
	if m[1] != "" {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return n
	}
	n, _ := strconv.ParseUint(m[4], 10, 64)
	v, _ := strconv.ParseFloat(m[2], 64)
	unit := math.Pow(1024, float64(strings.Index("KMGTPE", m[3])+1))
	if math.Abs(v*unit-float64(n)) > 0.0501*unit { // half the last digit, and a hair for float error
		t.Errorf("table bytes %q: %s %siB is not %d bytes rounded", text, m[2], m[3], n)
	}
	return n
}

func ptr[T any](v T) *T { return &v }

func checkPublication(t *testing.T, f *harness.Fixture, st statusOut) {
	t.Helper()
	p := st.Publication
	want := "public." + f.Table
	if p.Name != f.Publication || !p.Exists || !p.InsertsOnly || !p.CoversTable || len(p.Tables) != 1 || p.Tables[0] != want ||
		len(p.Operations) != 1 || p.Operations[0] != "insert" {
		t.Errorf("publication: got %+v; want %q, existing, inserts only, tables [%s]", p, f.Publication, want)
	}
}

func lsnOf(t *testing.T, name string, s *string) pglogrepl.LSN {
	t.Helper()
	if s == nil {
		t.Fatalf("%s: got null; want an LSN", name)
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		t.Fatalf("%s: got %q (%v); want an LSN", name, *s, err)
	}
	return lsn
}

func readSlotRow(t *testing.T, f *harness.Fixture) slotRow {
	t.Helper()
	var (
		r         slotRow
		pid       *int32
		confirmed string
	)
	err := f.DB.QueryRow(context.Background(),
		"SELECT active, active_pid, confirmed_flush_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = $1",
		f.Slot).Scan(&r.active, &pid, &confirmed, &r.walStatus)
	testkit.Must(t, err, "read pg_replication_slots")
	if pid != nil {
		r.pid = *pid
	}
	r.confirmed, err = pglogrepl.ParseLSN(confirmed)
	testkit.Must(t, err, "parse confirmed_flush_lsn %q", confirmed)
	return r
}

// lockHolder is the pid holding the slot's leader lock in pg_locks, or 0.
func lockHolder(t *testing.T, f *harness.Fixture) uint32 {
	t.Helper()
	var db string
	ctx := context.Background()
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT current_database()").Scan(&db), "read current_database()")
	key := uint64(leader.LockKey(db, f.Slot))
	var pids []uint32
	rows, err := f.DB.Query(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid::int8 = $1 AND objid::int8 = $2 AND objsubid = 1`, int64(key>>32), int64(key&0xffffffff))
	testkit.Must(t, err, "read pg_locks")
	for rows.Next() {
		var pid uint32
		testkit.Must(t, rows.Scan(&pid), "scan pg_locks")
		pids = append(pids, pid)
	}
	testkit.Must(t, rows.Err(), "read pg_locks")
	if len(pids) > 1 {
		t.Fatalf("leader lock holders: got %v; want at most one", pids)
	}
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

func applicationName(t *testing.T, f *harness.Fixture, pid uint32) string {
	t.Helper()
	var name string
	err := f.DB.QueryRow(context.Background(), "SELECT application_name FROM pg_stat_activity WHERE pid = $1", pid).Scan(&name)
	testkit.Must(t, err, "read pg_stat_activity of pid %d", pid)
	return name
}

func keepSizeUnlimited(t *testing.T, f *harness.Fixture) bool {
	t.Helper()
	var keep int64
	err := f.DB.QueryRow(context.Background(), "SELECT setting::int8 FROM pg_settings WHERE name = 'max_slot_wal_keep_size'").Scan(&keep)
	testkit.Must(t, err, "read max_slot_wal_keep_size")
	return keep < 0
}

// waitReleased waits until the stopped relay's walsender and lock session
// are gone from the server.
func waitReleased(t *testing.T, f *harness.Fixture) {
	t.Helper()
	poll.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, "slot inactive and leader lock free after the relay stopped", func() (string, bool) {
		active, holder := readSlotRow(t, f).active, lockHolder(t, f)
		return fmt.Sprintf("slot active %v, lock holder %d", active, holder), !active && holder == 0
	})
}

// statusRun runs `walrelay status`: exit 0 with nothing on stderr when
// problem is empty, else exit 1 and the one line naming it.
func statusRun(t *testing.T, f *harness.Fixture, problem string, args ...string) string {
	t.Helper()
	stdout, stderr, code := f.Walrelay("status", args...)
	if problem == "" {
		if code != 0 {
			t.Fatalf("walrelay status %v: exit %d; want 0\n%s%s", args, code, stdout, stderr)
		}
		return stdout
	}
	want := "walrelay: status: " + problem + ": walrelay run cannot stream\n"
	if code != 1 || stderr != want || stdout == "" {
		t.Fatalf("walrelay status %v: exit %d, stderr %q; want exit 1, the reading, and %q\n%s", args, code, stderr, want, stdout)
	}
	return stdout
}
