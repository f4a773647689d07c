package leader

import (
	"strings"
	"testing"
	"time"
)

const testURL = "postgres://u:secret@127.0.0.1:1/db?sslmode=disable"

func TestNewDefaults(t *testing.T) {
	e, err := New(Config{ConnString: testURL, Slot: "orders"}, nil, nil)
	if err != nil {
		t.Fatalf("New: got %v; want nil", err)
	}
	c := e.cfg
	if c.RetryInterval != 2*time.Second || c.CheckInterval != time.Second || c.LeaseTimeout != 5*time.Second {
		t.Errorf("defaults: got retry %s, check %s, lease %s; want 2s, 1s, 5s", c.RetryInterval, c.CheckInterval, c.LeaseTimeout)
	}
	// The session's settings are SET once connected (TestSessionSettingsReachServer):
	// as startup parameters a session pooler would refuse them.
	if len(e.pg.RuntimeParams) != 1 || e.pg.RuntimeParams["application_name"] != "walrelay-leader" {
		t.Errorf("startup parameters: got %v; want application_name=walrelay-leader alone", e.pg.RuntimeParams)
	}
	if want := "SET idle_session_timeout = '10000'; SET tcp_keepalives_count = '3'; SET tcp_keepalives_idle = '5'; SET tcp_keepalives_interval = '2'; SET tcp_user_timeout = '10000'; "; setSQL(sessionParams(5*time.Second, 2*time.Second)) != want {
		t.Errorf("session settings: got %q; want %q", setSQL(sessionParams(5*time.Second, 2*time.Second)), want)
	}
	if e.Check() == nil {
		t.Errorf("Check before Run: got nil; want ErrNotLeader")
	}
}

// The server must keep the lock of a vanished leader longer than the
// leader's lease, whatever the lease.
func TestSessionParamsOutlastLease(t *testing.T) {
	p := sessionParams(12*time.Second, 2*time.Second)
	if p["tcp_user_timeout"] != "24000" || p["tcp_keepalives_idle"] != "12" || p["idle_session_timeout"] != "24000" {
		t.Errorf("lease 12s: got user timeout %s, idle %s, idle session %s; want 24000, 12, 24000",
			p["tcp_user_timeout"], p["tcp_keepalives_idle"], p["idle_session_timeout"])
	}
	// A standby that tries less often than the lease must not be cut off
	// between its tries.
	if p := sessionParams(time.Second, 5*time.Second); p["idle_session_timeout"] != "10000" {
		t.Errorf("retry 5s: idle session timeout %s; want 10000", p["idle_session_timeout"])
	}
}

func TestNewRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{Slot: "s"}, "url is required"},
		{"no slot", Config{ConnString: testURL}, "slot name"},
		{"bad slot", Config{ConnString: testURL, Slot: "Bad-Slot"}, "slot name"},
		{"bad url", Config{ConnString: "postgres://u:secret@host:notaport/db", Slot: "s"}, "parse postgres url"},
		{"lease not over check", Config{ConnString: testURL, Slot: "s", CheckInterval: 2 * time.Second, LeaseTimeout: 2 * time.Second}, "must exceed"},
	}
	for _, c := range cases {
		_, err := New(c.cfg, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want an error containing %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q shows the password", c.name, err)
		}
	}
}
