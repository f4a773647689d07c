package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

var (
	outbox = schema.Table{Schema: "public", Name: "outbox"}
	readAt = time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
)

// missing is a reading of a database walrelay never set up.
func missing() Reading {
	return Reading{slot: "walrelay", publication: "walrelay_pub", table: outbox, at: readAt,
		st: slot.Status{Figures: slot.Figures{CurrentWAL: 0x16B3748}}}
}

// streaming is a reading of a slot a relay streams from, 1.5 MiB behind.
func streaming() Reading {
	r := missing()
	r.st = slot.Status{
		Figures: slot.Figures{
			Info: slot.Info{Exists: true, Plugin: "pgoutput", Database: "shop", Active: true, ActivePID: 4242,
				ConfirmedFlush: 0x1000000, RestartLSN: 0x1000000 - 72, WALStatus: "reserved", Failover: true},
			CurrentWAL: 0x1000000 + 1572864,
		},
		Publication: slot.PublicationStatus{Exists: true, Insert: true, Tables: []schema.Table{outbox}},
		IdleTimeout: ptr("0"),
		Provider:    "Amazon RDS", ProviderEvidence: "role rds_superuser",
	}
	r.holder, r.led = leader.Holder{PID: 4242, ApplicationName: "walrelay"}, true
	return r
}

func TestWriteTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Reading
		want string
	}{
		{"nothing set up", missing(), "" +
			"read at            2026-03-01T12:00:00.123Z\n" +
			"server WAL         0/16B3748\n" +
			"provider           -\n" +
			"slot               walrelay\n" +
			"slot state         missing\n" +
			"slot fix           run `walrelay init` to create it; if walrelay streamed from this database before, `walrelay recover --since TIME` instead\n" +
			"publication        walrelay_pub\n" +
			"publication state  missing (run `walrelay init` to create it)\n" +
			"leader             nobody\n" +
			"recovery           none\n"},
		{"streaming", streaming(), "" +
			"read at            2026-03-01T12:00:00.123Z\n" +
			"server WAL         0/1180000\n" +
			"provider           Amazon RDS (role rds_superuser)\n" +
			"slot               walrelay\n" +
			"slot state         active\n" +
			"active pid         4242\n" +
			"confirmed LSN      0/1000000\n" +
			"lag                1.5 MiB (1572864 bytes)\n" +
			"retained WAL       1.5 MiB (1572936 bytes)\n" +
			"wal_status         reserved\n" +
			"safe_wal_size      unlimited\n" +
			"failover           yes (failover slot)\n" +
			"invalidation       -\n" +
			"idle timeout       0 (off)\n" +
			"publication        walrelay_pub\n" +
			"publication state  present\n" +
			"tables             public.outbox\n" +
			"publishes          insert (inserts only)\n" +
			"leader             pid 4242, application walrelay, client -\n" +
			"recovery           none\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.r.WriteTable(&b); err != nil {
				t.Fatalf("WriteTable: got %v; want nil", err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("WriteTable:\ngot\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRowTexts(t *testing.T) {
	r := streaming()
	r.st.Publication = slot.PublicationStatus{Exists: true, Insert: true, Update: true, Tables: []schema.Table{{Schema: "public", Name: "orders"}}}
	r.st.WALStatus, r.st.SafeWALSize, r.st.Synced = "lost", nil, true
	for _, tc := range []struct{ name, got, want string }{
		{"safe_wal_size of a lost slot", r.safeWALSizeText(), "- (the slot is lost)"},
		{"failover of a synced copy", r.failoverText(), "yes (a synced copy of the primary's failover slot)"},
		{"idle timeout", idleTimeoutText("1d"), "1d (an idle slot is invalidated after this)"},
		{"small sizes in bytes only", bytesText(72), "72 B"},
		{"tables not covering the outbox", rowValue(r.publicationRows(), "tables"), "public.orders (not the outbox table public.outbox)"},
		{"operations", rowValue(r.publicationRows(), "publishes"), "insert, update"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, tc.got, tc.want)
		}
	}
	r.st.SafeWALSize = ptr(int64(1 << 20))
	if got, want := r.safeWALSizeText(), "1.0 MiB (1048576 bytes)"; got != want {
		t.Errorf("safe_wal_size: got %q; want %q", got, want)
	}
}

func rowValue(rows [][]string, key string) string {
	for _, row := range rows {
		if row[0] == key {
			return row[1]
		}
	}
	return "(no row " + key + ")"
}

func TestRecoveryText(t *testing.T) {
	finished := readAt.Add(time.Minute)
	pending := slot.Recovery{Slot: "walrelay", StartedAt: readAt, StartedBy: "host:1"}
	for _, tc := range []struct {
		name string
		set  func(*Reading)
		want string
	}{
		{"none", func(*Reading) {}, "none"},
		{"cannot read", func(r *Reading) { r.recoveryErr = errors.New("permission denied") }, "cannot read: permission denied"},
		{"pending", func(r *Reading) { r.recovery, r.recovered = pending, true },
			"PENDING: a " + pending.String() + "; run `walrelay recover` again to finish it (walrelay run refuses until then)"},
		{"finished", func(r *Reading) {
			r.recovery, r.recovered = pending, true
			r.recovery.FinishedAt, r.recovery.Published, r.recovery.Parked = &finished, 10, 1
		}, "last finished at 2026-03-01T12:01:00.123Z: 10 published, 1 parked"},
	} {
		r := streaming()
		tc.set(&r)
		if got := r.recoveryText(); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestProblem(t *testing.T) {
	if err := streaming().Problem(); err != nil {
		t.Errorf("a streaming slot: got %v; want nil", err)
	}
	want := `slot "walrelay" is missing, publication "walrelay_pub" is missing: walrelay run cannot stream`
	if err := missing().Problem(); err == nil || err.Error() != want {
		t.Errorf("nothing set up: got %v; want %q", err, want)
	}
	r := streaming()
	r.st.InvalidationReason = "wal_removed"
	r.recovery, r.recovered = slot.Recovery{Slot: "walrelay"}, true
	want = `slot "walrelay" is invalidated, a recovery is pending: walrelay run cannot stream`
	if err := r.Problem(); err == nil || err.Error() != want {
		t.Errorf("invalidated, recovery pending: got %v; want %q", err, want)
	}
}

func TestSlotState(t *testing.T) {
	r := streaming()
	for _, tc := range []struct {
		name string
		set  func(*slot.Status)
		want string
	}{
		{"active", func(*slot.Status) {}, "active"},
		{"inactive", func(s *slot.Status) { s.Active = false }, "inactive"},
		{"conflicting", func(s *slot.Status) { s.Conflicting = true }, "invalidated"},
		{"lost", func(s *slot.Status) { s.WALStatus = "lost" }, "invalidated"},
		{"missing", func(s *slot.Status) { s.Exists = false }, "missing"},
	} {
		c := r
		tc.set(&c.st)
		if got := c.slotState(); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.name, got, tc.want)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := missing().WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: got %v; want nil", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b.Bytes()); err != nil {
		t.Fatalf("WriteJSON wrote invalid JSON %q: %v", b.String(), err)
	}
	want := `{"read_at":"2026-03-01T12:00:00.123Z","current_wal_lsn":"0/16B3748","provider":"","provider_evidence":"",` +
		`"slot":{"name":"walrelay","state":"missing","active":false,"active_pid":null,"plugin":null,"database":null,` +
		`"confirmed_flush_lsn":null,"restart_lsn":null,"lag_bytes":null,"retained_wal_bytes":null,"wal_status":null,` +
		`"safe_wal_size_bytes":null,"failover":false,"synced":false,"invalidation_reason":null,"inactive_since":null,` +
		`"idle_replication_slot_timeout":null},` +
		`"publication":{"name":"walrelay_pub","exists":false,"operations":[],"inserts_only":false,"all_tables":false,` +
		`"tables":[],"table":"public.outbox","covers_table":false},"leader":null,"recovery":null}`
	if got := compact.String(); got != want {
		t.Errorf("WriteJSON:\ngot  %s\nwant %s", got, want)
	}
	r := streaming()
	r.recoveryErr = errors.New("permission denied")
	j := r.jsonForm()
	if j.Slot.LagBytes == nil || *j.Slot.LagBytes != 1572864 || j.Leader == nil || j.Leader.PID != 4242 ||
		j.RecoveryError == nil || *j.RecoveryError != "permission denied" {
		t.Errorf("jsonForm of a streaming slot: got %+v; want lag 1572864, leader 4242, the recovery error", j)
	}
}
