package slot

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/check"
)

// Each provider is named by a signal its own documentation shows
// (docs/MANAGED.md), Aurora before RDS, whose roles it shares; nothing
// known is self-managed.
func TestProviderDetection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pf       providerFacts
		want     provider
		evidence string
	}{
		{"plain PostgreSQL", providerFacts{}, selfManaged, ""},
		{"RDS roles", providerFacts{roles: map[string]bool{"rds_superuser": false, "rds_replication": true}}, rds, "role rds_superuser"},
		{"RDS setting only", providerFacts{settings: map[string]string{"rds.logical_replication": "1"}}, rds, "setting rds.logical_replication"},
		{"Aurora", providerFacts{roles: map[string]bool{"rds_superuser": false}, aurora: true}, aurora, "function aurora_version()"},
		{"Cloud SQL", providerFacts{roles: map[string]bool{"cloudsqlsuperuser": true}}, cloudSQL, "role cloudsqlsuperuser"},
		{"Cloud SQL flag", providerFacts{settings: map[string]string{"cloudsql.logical_decoding": "on"}}, cloudSQL, "setting cloudsql.logical_decoding"},
		{"Azure", providerFacts{roles: map[string]bool{"azure_pg_admin": true}}, azure, "role azure_pg_admin"},
		{"Azure parameter", providerFacts{settings: map[string]string{"azure.extensions": ""}}, azure, "setting azure.extensions"},
		{"Supabase", providerFacts{roles: map[string]bool{"supabase_admin": false}}, supabase, "role supabase_admin"},
		{"Neon", providerFacts{roles: map[string]bool{"neon_superuser": true}}, neon, "role neon_superuser"},
	} {
		got, ev := tc.pf.detect()
		if got != tc.want || ev != tc.evidence {
			t.Errorf("%s: got %s (%q); want %s (%q)", tc.name, got, ev, tc.want, tc.evidence)
		}
	}
}

// Every fix speaks the provider's way: its parameter group, flag, server
// parameter or console; never postgresql.conf or ALTER ROLE where the
// provider does not let a user use them.
func TestRulesSpeakTheProvidersWay(t *testing.T) {
	refused := errorString("FATAL: must be superuser or replication role to start walsender (SQLSTATE 42501)")
	for _, tc := range []struct {
		p       provider
		edit    func(f *facts)
		rule    string
		status  check.Status
		want    []string
		notWant []string
	}{
		{selfManaged, walLevelReplica, "wal_level", check.Fail, []string{"wal_level = logical (postgresql.conf or ALTER SYSTEM)", "restart the server"}, nil},
		{rds, walLevelReplica, "wal_level", check.Fail, []string{"rds.logical_replication = 1", "DB parameter group", "reboot"}, []string{"postgresql.conf", "ALTER SYSTEM"}},
		{aurora, walLevelReplica, "wal_level", check.Fail, []string{"rds.logical_replication = 1", "DB cluster parameter group", "writer"}, []string{"postgresql.conf"}},
		{cloudSQL, walLevelReplica, "wal_level", check.Fail, []string{"cloudsql.logical_decoding = on", "database flag"}, []string{"postgresql.conf"}},
		{azure, walLevelReplica, "wal_level", check.Fail, []string{"server parameter wal_level = logical", "restart the server"}, []string{"postgresql.conf"}},
		{neon, walLevelReplica, "wal_level", check.Fail, []string{"Logical Replication", "Enable", "cannot be turned off"}, []string{"postgresql.conf"}},
		{supabase, walLevelReplica, "wal_level", check.Fail, []string{"db.<project-ref>.supabase.co:5432"}, []string{"postgresql.conf"}},
		{azure, keepUnlimited, "max_slot_wal_keep_size", check.Warn, []string{"fixes max_slot_wal_keep_size at -1", "walrelay_slot_retained_wal_bytes"}, []string{"Set max_slot_wal_keep_size"}},
		{rds, keepUnlimited, "max_slot_wal_keep_size", check.Warn, []string{"max_slot_wal_keep_size = ", "DB parameter group"}, []string{"postgresql.conf"}},
		{selfManaged, keepSmall, "max_slot_wal_keep_size", check.Warn, []string{"512MB: a slot more than this behind loses"}, nil},
		{supabase, slotsFull, "max_replication_slots", check.Warn, []string{"compute size"}, []string{"postgresql.conf"}},
		{neon, slotsFull, "max_replication_slots", check.Warn, []string{"is 10", "Neon's support"}, []string{"postgresql.conf"}},
		{cloudSQL, slotsFull, "max_replication_slots", check.Warn, []string{"database flag max_replication_slots"}, []string{"postgresql.conf"}},
		{cloudSQL, func(f *facts) { f.role = roleFacts{connect: true, probeErr: refused} }, "role replication", check.Fail,
			[]string{"cloudsqlsuperuser", "ALTER USER \"relay\" WITH REPLICATION", "cloudsql.logical_decoding"}, nil},
		{azure, func(f *facts) { f.role = roleFacts{connect: true, probeErr: refused} }, "role replication", check.Fail,
			[]string{"azure_pg_admin", "ALTER ROLE \"relay\" WITH REPLICATION"}, nil},
		{neon, func(f *facts) { f.role = roleFacts{connect: true, probeErr: refused} }, "role replication", check.Fail,
			[]string{"Neon Console, CLI or API", "neon_superuser"}, []string{"ALTER ROLE"}},
		{supabase, func(f *facts) { f.role = roleFacts{connect: true, probeErr: refused} }, "role replication", check.Fail,
			[]string{"As postgres", "before 17 only postgres"}, nil},
		{neon, nil, "provider slots", check.Warn, []string{"removes inactive replication slots", "40 hours", "walrelay recover"}, nil},
		{azure, nil, "provider slots", check.Warn, []string{"PostgreSQL 16 and earlier", "pg_failover_slots"}, nil},
		{rds, nil, "provider slots", check.Warn, []string{"major version upgrade", "dropped first"}, nil},
		{cloudSQL, nil, "provider slots", check.Warn, []string{"logical failover slot"}, nil},
	} {
		t.Run(tc.p.String()+"/"+tc.rule, func(t *testing.T) {
			f := goodFacts()
			f.provider = tc.p
			if tc.edit != nil {
				tc.edit(f)
			}
			var r check.Result
			for _, got := range judge(f, allRules()...) {
				if got.Name == tc.rule {
					r = got
				}
			}
			if r.Name == "" {
				t.Fatalf("no %s result", tc.rule)
			}
			text := r.Found + " | " + r.Fix
			if r.Status != tc.status {
				t.Errorf("status %s; want %s (%s)", r.Status, tc.status, text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(text, w) {
					t.Errorf("%q says %q, which %s does not let a user do", text, w, tc.p)
				}
			}
		})
	}
	// A self-managed server has no provider hazard to warn of.
	for _, r := range judge(goodFacts(), allRules()...) {
		if r.Name == "provider slots" {
			t.Errorf("self-managed: %+v; want no provider slots result", r)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func walLevelReplica(f *facts) { f.settings.walLevel = "replica" }
func keepUnlimited(f *facts)   { k := "-1"; f.settings.keepSize = &k }
func keepSmall(f *facts)       { k := "512MB"; f.settings.keepSize = &k }
func slotsFull(f *facts) {
	f.settings.maxSlots, f.settings.slotsUsed = 10, 10
	f.figures = Figures{}
}
