package slot

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/check"
	"github.com/walrelay/walrelay/schema"
)

// goodFacts are a setup walrelay can stream from.
func goodFacts() *facts {
	cfg := &Config{Slot: "relay", Publication: "outbox_pub", Table: schema.Table{Schema: "public", Name: "outbox"}}
	keep := "10GB"
	return &facts{
		cfg:         cfg,
		server:      serverFacts{database: "app", user: "relay", version: "15.4", versionNum: 150004},
		settings:    serverSettings{walLevel: "logical", maxSlots: 10, maxSenders: 10, slotsUsed: 1, keepSize: &keep},
		role:        roleFacts{replication: true, connect: true},
		tableExists: true,
		pub:         PublicationStatus{Exists: true, Insert: true, Tables: []schema.Table{cfg.Table}},
		figures: Figures{Info: Info{Exists: true, Plugin: "pgoutput", Type: "logical", Database: "app",
			ConfirmedFlush: 100, WALStatus: "reserved"}, CurrentWAL: 200},
	}
}

func names(rs []check.Result, s check.Status) []string {
	var out []string
	for _, r := range rs {
		if r.Status == s {
			out = append(out, r.Name)
		}
	}
	return out
}

func TestRulesPassAGoodSetup(t *testing.T) {
	rs := judge(goodFacts(), allRules()...)
	if bad := append(names(rs, check.Fail), names(rs, check.Warn)...); len(bad) > 0 {
		t.Errorf("a good setup: got failures or warnings %v; want none", bad)
	}
	if err := firstFailure(rs); err != nil {
		t.Errorf("firstFailure: got %v; want nil", err)
	}
}

// The preflight's verdict is the first failure of the list, as a
// *ConfigError that names the rule and says the fix.
func TestPreflightVerdictIsTheFirstFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*facts)
		rule   string
		want   []string
	}{
		{"wal_level replica", func(f *facts) { f.settings.walLevel = "replica" }, "wal_level", []string{"wal_level: replica", "fix: Set wal_level = logical"}},
		{"no REPLICATION", func(f *facts) { f.role.replication = false }, "role replication", []string{"ALTER ROLE"}},
		{"missing table, publication of another", func(f *facts) { f.tableExists = false; f.pub.Tables = nil }, "outbox table", []string{"public.outbox does not exist", SettingTable}},
		{"publication without inserts", func(f *facts) { f.pub.Insert = false }, "publication inserts", []string{`"outbox_pub" does not publish inserts`}},
		{"missing slot", func(f *facts) { f.figures = Figures{} }, "slot", []string{`slot "relay" does not exist`, "walrelay init"}},
		{"physical slot", func(f *facts) { f.figures.Type, f.figures.Plugin, f.figures.Database = "physical", "", "" }, "slot plugin",
			[]string{`slot "relay" is a physical slot`, "logical pgoutput"}},
		{"lost slot", func(f *facts) { f.figures.WALStatus = "lost" }, "slot wal_status", []string{`slot "relay"`, "Reconcile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			tc.modify(f)
			err := firstFailure(judge(f, allRules()...))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Result.Name != tc.rule {
				t.Fatalf("verdict: got %v; want a *ConfigError of rule %q", err, tc.rule)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("verdict %q: want it to mention %q", err, w)
				}
			}
		})
	}
}

// A missing publication says whether the role could create it, and what
// the owner must run when it cannot.
func TestCreatorRule(t *testing.T) {
	f := goodFacts()
	f.pub = PublicationStatus{}
	f.creatorSet, f.creator = true, creatorFacts{owner: "app_owner"}
	rs := judge(f, publicationRules)
	if got := names(rs, check.Fail); !slices.Equal(got, []string{"publication", "publication create"}) {
		t.Fatalf("failures: got %v; want publication and publication create", got)
	}
	r := rs[1]
	if !strings.Contains(r.Found, "role relay may not create it") || !strings.Contains(r.Found, "does not own") ||
		!strings.Contains(r.Fix, "Have app_owner run: CREATE PUBLICATION") {
		t.Errorf("publication create: got %+v; want the role, the owner and the owner's DDL", r)
	}
	f.creator.owns, f.creator.create = true, true
	if r := creatorRule(f)[0]; r.Status != check.OK {
		t.Errorf("owner with CREATE: got %+v; want ok", r)
	}
}

// A fact that could not be read fails the checks that need it, and only
// those; the preflight returns the read error itself, not a verdict.
func TestUnreadableFacts(t *testing.T) {
	f := goodFacts()
	f.settingsErr = errors.New("boom")
	rs := judge(f, allRules()...)
	want := []string{"wal_level", "max_replication_slots", "max_wal_senders", "max_slot_wal_keep_size"}
	if got := names(rs, check.Fail); !slices.Equal(got, want) {
		t.Errorf("failures: got %v; want %v", got, want)
	}
	var ce *ConfigError
	if err := f.err(); err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("facts error: got %v; want the read error, not a *ConfigError", err)
	}
}
