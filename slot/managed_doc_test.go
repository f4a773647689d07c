package slot

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/check"
)

// managedLines are the checks that differ by provider.
var managedLines = []string{"postgres provider", "wal_level", "max_slot_wal_keep_size", "role replication", "provider slots"}

// freshManaged is a server as a provider hands it out, before the
// set-up docs/MANAGED.md describes: logical decoding off, the WAL a slot
// keeps unlimited, and a new role the server does not let replicate.
func freshManaged(p provider, evidence string) *facts {
	f := goodFacts()
	f.provider, f.providerEvidence = p, evidence
	f.server.version, f.server.versionNum = "16.4", 160004
	f.settings.walLevel = "replica"
	keep := "-1"
	f.settings.keepSize = &keep
	f.role = roleFacts{connect: true, probeErr: errors.New("FATAL: must be superuser or replication role to start walsender (SQLSTATE 42501)")}
	if p == rds || p == aurora {
		f.role.providerRoles = map[string]bool{"rds_replication": false}
	}
	return f
}

// managedText is what `walrelay check` prints of managedLines for f.
func managedText(t *testing.T, f *facts) string {
	t.Helper()
	var r check.Report
	for _, res := range judge(f, allRules()...) {
		for _, n := range managedLines {
			if res.Name == n {
				r = append(r, res)
			}
		}
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	return text[:strings.LastIndex(strings.TrimSuffix(text, "\n"), "\n")+1] // without the counts line
}

// docs/MANAGED.md shows, per provider, what check prints on a server as
// the provider hands it out: this keeps the page what walrelay says.
func TestManagedDocShowsWhatCheckPrints(t *testing.T) {
	doc, err := os.ReadFile("../docs/MANAGED.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p        provider
		evidence string
	}{
		{selfManaged, ""}, {rds, "role rds_superuser"}, {aurora, "function aurora_version()"}, {cloudSQL, "role cloudsqlsuperuser"},
		{azure, "role azure_pg_admin"}, {supabase, "role supabase_admin"}, {neon, "role neon_superuser"},
	} {
		if text := managedText(t, freshManaged(tc.p, tc.evidence)); !strings.Contains(string(doc), text) {
			t.Errorf("docs/MANAGED.md does not show what check prints on %s; it prints:\n%s", tc.p, text)
		}
	}
}
