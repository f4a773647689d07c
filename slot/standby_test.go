package slot

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/check"
)

func TestStandbyAddrsLeaveOutTheReachedServer(t *testing.T) {
	pc, err := pgconn.ParseConfig("host=127.0.0.1,127.0.0.2,localhost,/run/pg port=5432,5433,5432,5432 dbname=x target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fb := range standbyAddrs(pc, "127.0.0.1:5432") {
		got = append(got, fb.Host)
	}
	// localhost:5432 resolves to the reached server; the socket is local.
	if strings.Join(got, ",") != "127.0.0.2" {
		t.Errorf("standbys: got %v; want [127.0.0.2]", got)
	}
}

func TestStandbyResult(t *testing.T) {
	on, off := "on", "off"
	good := standbyFacts{addr: "db2:5432", inRecovery: true, versionNum: 170006, syncSlots: &on, hotStandbyFeed: "on",
		primarySlotName: "standby1", slotExists: true, synced: true}
	for _, tc := range []struct {
		name   string
		modify func(*standbyFacts)
		err    error
		status check.Status
		want   string
	}{
		{"ready", func(*standbyFacts) {}, nil, check.OK, "a failover to it keeps the slot (primary_slot_name standby1)"},
		{"unreachable", func(*standbyFacts) {}, errors.New("connection refused"), check.Warn, "cannot read: connection refused"},
		{"another primary", func(f *standbyFacts) { f.inRecovery = false }, nil, check.Warn, "a second primary"},
		{"16", func(f *standbyFacts) { f.versionNum = 160004; f.syncSlots = nil }, nil, check.Warn, "without failover slots"},
		{"no sync", func(f *standbyFacts) { f.syncSlots = &off; f.hotStandbyFeed = "off" }, nil, check.Warn,
			"sync_replication_slots = on, hot_standby_feedback = on missing"},
		{"no copy yet", func(f *standbyFacts) { f.synced = false }, nil, check.Warn, "no synced copy of the slot yet"},
		{"temporary copy", func(f *standbyFacts) { f.temporary = true }, nil, check.Warn, "still temporary"},
	} {
		sf := good
		tc.modify(&sf)
		r := standbyResult(sf, tc.err)
		if r.Name != "standby db2:5432" || r.Status != tc.status || !strings.Contains(r.Found, tc.want) {
			t.Errorf("%s: got %s %s %q; want %s with %q", tc.name, r.Name, r.Status, r.Found, tc.status, tc.want)
		}
	}
}
