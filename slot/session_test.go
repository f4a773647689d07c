package slot

import (
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/check"
)

// The rules of the two URLs: the replication connection through a pooler,
// the lock's session sharing its backend, and a replication URL that
// reaches another database or server. Each failure names the setting that
// fixes it and, where the provider has one, its direct endpoint.
func TestConnectionRules(t *testing.T) {
	pgbouncer := errors.New(`server error: FATAL: unsupported startup parameter: replication (SQLSTATE 08P01)`)
	for _, tc := range []struct {
		name    string
		edit    func(f *facts)
		rule    func(f *facts) []check.Result
		none    bool // no result at all
		status  check.Status
		want    []string
		notWant string
	}{
		{"one URL, its own backend", func(f *facts) { f.conn.sessionPID = 42 }, sessionRule, false,
			check.OK, []string{"keeps its own server backend (pid 42)"}, ""},
		{"transaction pooler under the lock", func(f *facts) { f.conn.sessionPID, f.conn.shared = 42, true }, sessionRule, false,
			check.Fail, []string{"shares its server backend (pid 42)", "transaction pooler", SettingReplicationConnString, SettingConnString + " may stay"}, ""},
		{"transaction pooler on Neon", func(f *facts) { f.conn.shared, f.provider = true, neon }, sessionRule, false,
			check.Fail, []string{"without -pooler"}, ""},
		{"session unreachable", func(f *facts) { f.conn.sessionErr = errors.New("connection refused") }, sessionRule, false,
			check.Fail, []string{"cannot open a session", "connection refused", SettingReplicationConnString}, ""},
		{"pooler refuses replication", func(f *facts) { f.role.probeErr = pgbouncer }, replicationRule, false,
			check.Fail, []string{"refused by a connection pooler", "unsupported startup parameter", SettingReplicationConnString, "direct endpoint"}, "ALTER ROLE"},
		{"pooler refuses replication on Supabase", func(f *facts) { f.role.probeErr, f.provider = pgbouncer, supabase }, replicationRule, false,
			check.Fail, []string{"db.<project-ref>.supabase.co:5432"}, "ALTER ROLE"},
		{"RDS Proxy refuses replication", func(f *facts) {
			f.role.probeErr, f.provider = errors.New("Feature not supported: RDS Proxy currently doesn't support streaming replication mode."), rds
		}, replicationRule, false,
			check.Fail, []string{"refused by a connection pooler", "not an RDS Proxy's"}, "ALTER ROLE"},
		{"one URL: no replication url result", func(f *facts) {}, replicationURLRule, true, check.OK, nil, ""},
		{"separate, same server", func(f *facts) {
			f.conn = connFacts{separate: true, addr: "10.0.0.5:5432", database: "app", system: "7301", sqlSystem: "7301"}
		}, replicationURLRule, false, check.OK, []string{"10.0.0.5:5432, database app", "same server", "7301"}, ""},
		{"separate, another database", func(f *facts) {
			f.conn = connFacts{separate: true, addr: "10.0.0.5:5432", database: "other", system: "7301", sqlSystem: "7301"}
		}, replicationURLRule, false, check.Fail, []string{"database other", "database app"}, ""},
		{"separate, another server", func(f *facts) {
			f.conn = connFacts{separate: true, addr: "10.0.0.6:5432", database: "app", system: "9999", sqlSystem: "7301"}
		}, replicationURLRule, false, check.Fail, []string{"system 9999", "system 7301"}, ""},
		{"separate, system unreadable: database compared", func(f *facts) {
			f.conn = connFacts{separate: true, addr: "10.0.0.5:5432", database: "app", system: "7301"}
		}, replicationURLRule, false, check.OK, []string{"database app"}, "same server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			tc.edit(f)
			rs := tc.rule(f)
			if tc.none {
				if len(rs) != 0 {
					t.Fatalf("%v; want no result", rs)
				}
				return
			}
			if len(rs) != 1 {
				t.Fatalf("%d results; want 1", len(rs))
			}
			r := rs[0]
			text := r.Found + " | " + r.Fix
			if r.Status != tc.status {
				t.Errorf("status %s; want %s (%s)", r.Status, tc.status, text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
			if tc.notWant != "" && strings.Contains(text, tc.notWant) {
				t.Errorf("%q says %q", text, tc.notWant)
			}
		})
	}
}
