package slot

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/check"
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
		columns:     defaultTableColumns(),
		pub:         PublicationStatus{Exists: true, Insert: true, Tables: []schema.Table{cfg.Table}},
		figures: Figures{Info: Info{Exists: true, Plugin: "pgoutput", Type: "logical", Database: "app",
			ConfirmedFlush: 100, WALStatus: "reserved"}, CurrentWAL: 200},
	}
}

// defaultTableColumns are the columns of the table `walrelay schema` creates.
func defaultTableColumns() []decoder.Column {
	return []decoder.Column{
		{Name: "message_id", Type: 2950, TypeName: "uuid"}, {Name: "aggregate_type", Type: 25, TypeName: "text"},
		{Name: "aggregate_id", Type: 25, TypeName: "text"}, {Name: "aggregate_version", Type: 20, TypeName: "bigint"},
		{Name: "type", Type: 25, TypeName: "text"}, {Name: "payload", Type: 3802, TypeName: "jsonb"},
		{Name: "headers", Type: 3802, TypeName: "jsonb"}, {Name: "occurred_at", Type: 1184, TypeName: "timestamp with time zone"},
		{Name: "topic", Type: 25, TypeName: "text"},
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
		{"no REPLICATION", func(f *facts) {
			f.role.replication, f.role.probeErr = false, errors.New("must have the REPLICATION attribute")
		}, "role replication",
			[]string{"cannot open a replication connection (neither REPLICATION nor superuser): must have", "ALTER ROLE"}},
		{"missing table, publication of another", func(f *facts) { f.tableExists = false; f.pub.Tables = nil }, "outbox table", []string{"public.outbox does not exist", SettingTable}},
		{"aggregate type column missing", func(f *facts) { f.columns = slices.Delete(f.columns, 1, 2) }, "table columns",
			[]string{`table columns: column "aggregate_type" is missing from public.outbox; fix: set schema.Columns.AggregateType to its column, or ` + decoder.SettingAggregateTypeDefault + " to a constant."}},
		{"payload of integer", func(f *facts) { f.columns[5] = decoder.Column{Name: "payload", Type: 23, TypeName: "integer"} }, "table columns",
			[]string{`column "payload" of public.outbox has type integer`, "set schema.Columns.Payload"}},
		{"publication without inserts", func(f *facts) { f.pub.Insert = false }, "publication inserts", []string{`"outbox_pub" does not publish inserts`}},
		{"missing slot", func(f *facts) { f.figures = Figures{} }, "slot", []string{`slot "relay" does not exist`, "walrelay init"}},
		{"physical slot", func(f *facts) { f.figures.Type, f.figures.Plugin, f.figures.Database = "physical", "", "" }, "slot plugin",
			[]string{`slot "relay" is a physical slot`, "logical pgoutput"}},
		{"lost slot", func(f *facts) { f.figures.WALStatus = "lost" }, "slot wal_status", []string{`slot "relay"`, "walrelay recover --since TIME"}},
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

// goodFacts17 is a primary of PostgreSQL 17 with one standby, a failover
// slot and synchronized_standby_slots naming the standby's slot.
func goodFacts17() *facts {
	f := goodFacts()
	f.server.version, f.server.versionNum = "17.6", 170006
	sync, idle := "sb1", "0"
	f.ha = haFacts{standbys: 1, physicalSlots: []string{"sb1"}, syncStandbySlots: &sync, idleTimeout: &idle}
	f.figures.Failover = true
	return f
}

func TestFailoverRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		facts  func() *facts
		rule   string
		status check.Status
		want   string
	}{
		{"17, failover slot, standby slots set", goodFacts17, "synchronized_standby_slots", check.OK, "sb1: walrelay receives only WAL these standbys have"},
		{"17, failover slot", goodFacts17, "slot failover", check.OK, "is a failover slot"},
		{"17, slot without failover", func() *facts { f := goodFacts17(); f.figures.Failover = false; return f }, "slot failover", check.Warn, `ALTER_REPLICATION_SLOT "relay" (FAILOVER true)`},
		{"17, no synchronized_standby_slots", func() *facts { f := goodFacts17(); e := ""; f.ha.syncStandbySlots = &e; return f }, "synchronized_standby_slots", check.Warn, "(this server has: sb1)"},
		{"17, a standby slot that does not exist", func() *facts { f := goodFacts17(); v := "sb1, gone"; f.ha.syncStandbySlots = &v; return f }, "synchronized_standby_slots", check.Warn, "no physical slot gone"},
		{"15 with a standby", func() *facts { f := goodFacts(); f.ha.standbys = 1; return f }, "slot failover", check.Warn, "PostgreSQL 15.4 has no failover slots"},
		{"18, idle timeout", func() *facts { f := goodFacts17(); v := "1d"; f.ha.idleTimeout = &v; return f }, "idle_replication_slot_timeout", check.Warn, `1d: a walrelay stopped longer than this loses slot "relay"`},
		{"18, no idle timeout", goodFacts17, "idle_replication_slot_timeout", check.OK, "0 (slots are never invalidated"},
		{"a standby", func() *facts { f := goodFacts17(); f.ha.inRecovery = true; return f }, "server role", check.Fail, "a standby (in recovery)"},
		{"primary with a standby", goodFacts17, "server role", check.OK, "primary, with 1 standby streaming"},
		{"invalidated", func() *facts { f := goodFacts17(); f.figures.InvalidationReason = "idle_timeout"; return f }, "slot invalidated", check.Fail, `slot "relay" was invalidated (idle_timeout)`},
		{"conflicting (16)", func() *facts { f := goodFacts(); f.figures.Conflicting = true; return f }, "slot invalidated", check.Fail, "(a conflict with recovery)"},
	} {
		rs := judge(tc.facts(), allRules()...)
		i := slices.IndexFunc(rs, func(r check.Result) bool { return r.Name == tc.rule })
		if i < 0 {
			t.Errorf("%s: no %q result in %v", tc.name, tc.rule, rs)
			continue
		}
		if r := rs[i]; r.Status != tc.status || !strings.Contains(r.Found+" fix: "+r.Fix, tc.want) {
			t.Errorf("%s: got %s %q (fix %q); want %s with %q", tc.name, r.Status, r.Found, r.Fix, tc.status, tc.want)
		}
	}
	// Nothing to say of failover on 15 without standbys, nor of 18's
	// timeout below 18.
	rs := judge(goodFacts(), allRules()...)
	for _, n := range []string{"slot failover", "synchronized_standby_slots", "idle_replication_slot_timeout", "slot invalidated"} {
		if slices.ContainsFunc(rs, func(r check.Result) bool { return r.Name == n }) {
			t.Errorf("15 without standbys: got a %q result; want none", n)
		}
	}
	if err := firstFailure(judge(goodFacts17(), allRules()...)); err != nil {
		t.Errorf("a good 17 primary: got %v; want no failure", err)
	}
}

// Below 14 walrelay refuses the server with one line saying so; 14 to 18
// pass.
func TestVersionRule(t *testing.T) {
	for _, tc := range []struct {
		version string
		num     int
		status  check.Status
	}{{"13.16", 130016, check.Fail}, {"14.19", 140019, check.OK}, {"18.1", 180001, check.OK}} {
		f := goodFacts()
		f.server.version, f.server.versionNum = tc.version, tc.num
		r := versionRule(f)[0]
		if r.Status != tc.status || !strings.Contains(r.Found, "PostgreSQL "+tc.version) {
			t.Errorf("%s: got %s %q; want %s", tc.version, r.Status, r.Found, tc.status)
		}
		if tc.status == check.Fail && (!strings.Contains(r.Found, "walrelay needs 14 or newer") || firstFailure(judge(f, allRules()...)) == nil) {
			t.Errorf("%s: got %q and no refusal; want the preflight to refuse, naming 14", tc.version, r.Found)
		}
	}
}

// A pending recovery refuses the slot, before the slot's own rules (a
// recovery may be between dropping the old slot and creating the new);
// a finished one, or none, passes.
func TestRecoveryRule(t *testing.T) {
	since := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	started := time.Date(2025, 3, 2, 8, 30, 0, 0, time.FixedZone("CET", 3600))
	finished := started.Add(time.Minute)
	pending := Recovery{Slot: "relay", Since: &since, StartedAt: started, StartedBy: "host-a:4242"}
	for _, tc := range []struct {
		name   string
		modify func(*facts)
		status check.Status
		want   string
	}{
		{"no recovery", func(*facts) {}, check.OK, "none pending"},
		{"finished", func(f *facts) {
			r := pending
			r.FinishedAt = &finished
			f.recovery, f.recoveryFound = r, true
		}, check.OK, "none pending (the last finished at 2025-03-02T07:31:00Z)"},
		{"pending since a time", func(f *facts) { f.recovery, f.recoveryFound = pending, true }, check.Fail,
			`a recovery of slot "relay" (rows since 2025-03-01T12:00:00Z, started at 2025-03-02T07:30:00Z by host-a:4242) is pending; ` +
				"fix: Run `walrelay recover` again to finish it; walrelay will not stream before that."},
		{"pending for every row, slot dropped", func(f *facts) {
			r := pending
			r.Since, r.StartedBy = nil, ""
			f.recovery, f.recoveryFound, f.figures = r, true, Figures{}
		}, check.Fail, `a recovery of slot "relay" (every row, started at 2025-03-02T07:30:00Z) is pending`},
		{"unreadable", func(f *facts) { f.recoveryErr = errors.New("permission denied for table outbox_recoveries") }, check.Fail,
			"cannot read: permission denied for table outbox_recoveries; fix: Fix the cause in the error; walrelay's role needs SELECT on public.outbox_recoveries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			f.cfg.Recoveries = schema.Table{Schema: "public", Name: "outbox_recoveries"}
			tc.modify(f)
			r := recoveryRule(f)[0]
			if got := r.Name + ": " + r.Found + "; fix: " + r.Fix; r.Status != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("got %s %q; want %s with %q", r.Status, got, tc.status, tc.want)
			}
			err := firstFailure(judge(f, allRules()...))
			var ce *ConfigError
			if tc.status == check.Fail && f.recoveryErr == nil && (!errors.As(err, &ce) || ce.Result.Name != "recovery") {
				t.Errorf("verdict: got %v; want the recovery rule's", err)
			}
			if tc.status == check.OK && err != nil {
				t.Errorf("verdict: got %v; want none", err)
			}
		})
	}
}

// The recoveries table that cannot be read is a read error of the facts:
// the preflight returns it as such, not as a verdict.
func TestUnreadableRecoveryIsNoVerdict(t *testing.T) {
	f := goodFacts()
	f.recoveryErr = errors.New("permission denied for table outbox_recoveries")
	var ce *ConfigError
	if err := f.err(); err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("facts error: got %v; want the read error, not a *ConfigError", err)
	}
}

// The table's columns are judged as the decoder judges them: optional
// columns may be absent, and so may the aggregate type's with a default;
// the pass says what is absent. Columns that cannot be read fail the rule
// as unreadable and are the preflight's error, not a verdict.
func TestColumnsRule(t *testing.T) {
	ef := []decoder.Column{
		{Name: "MessageId", Type: 2950}, {Name: "AggregateId", Type: 2950}, {Name: "AggregateVersion", Type: 20},
		{Name: "Type", Type: 25}, {Name: "Payload", Type: 25}, {Name: "OccurredAtUtc", Type: 1184}, {Name: "AvailableAtUtc", Type: 1184},
	}
	efCols := schema.Columns{MessageID: "MessageId", AggregateType: "AggregateType", AggregateID: "AggregateId",
		AggregateVersion: "AggregateVersion", Type: "Type", Payload: "Payload", Headers: "Headers", OccurredAt: "OccurredAtUtc", Topic: "Topic"}
	for _, tc := range []struct {
		name   string
		modify func(*facts)
		status check.Status
		found  string
	}{
		{"every column", func(*facts) {}, check.OK, "the configured columns, of types walrelay reads"},
		{"optional columns absent", func(f *facts) { f.columns = f.columns[:6] }, check.OK,
			`the required columns, of types walrelay reads; absent, read as null: "headers", "occurred_at", "topic"`},
		{"EF Core shape with a default", func(f *facts) {
			f.cfg.Columns, f.cfg.AggregateTypeDefault, f.columns = efCols, "order", ef
		}, check.OK, `absent, read as null: "Headers", "Topic"; no column "AggregateType": every row's aggregate type is "order" (` + decoder.SettingAggregateTypeDefault + ")"},
		{"content type column absent", func(f *facts) { f.cfg.ContentTypeColumn = "ContentType" }, check.OK,
			`the required columns, of types walrelay reads; absent, read as null: "ContentType"`},
		{"content type column of another type", func(f *facts) {
			f.cfg.ContentTypeColumn, f.cfg.Columns = "aggregate_version", schema.DefaultColumns()
			f.cfg.Columns.AggregateVersion = "version"
		}, check.Fail, `column "aggregate_version" (content type) of public.outbox has type`},
		{"EF Core shape without a default", func(f *facts) { f.cfg.Columns, f.columns = efCols, ef }, check.Fail,
			`column "AggregateType" (aggregate_type) is missing from public.outbox`},
		{"unreadable", func(f *facts) { f.columns, f.columnsErr = nil, errors.New("permission denied for table outbox") }, check.Fail,
			"cannot read: permission denied for table outbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			tc.modify(f)
			rs := columnsRule(f)
			if len(rs) != 1 || rs[0].Name != "table columns" || rs[0].Status != tc.status || !strings.Contains(rs[0].Found, tc.found) {
				t.Fatalf("table columns: got %+v; want %v, found containing %q", rs, tc.status, tc.found)
			}
			var ce *ConfigError
			if err := f.err(); (f.columnsErr != nil) != (err != nil) || errors.As(err, &ce) {
				t.Errorf("facts error: got %v; want the read error exactly when the columns were unreadable", err)
			}
		})
	}
	f := goodFacts()
	f.tableExists, f.columns = false, nil
	if rs := columnsRule(f); len(rs) != 0 {
		t.Errorf("missing table: got %+v; want nothing (the outbox table rule says it)", rs)
	}
}

// The right to replicate is what the server allows: a role without the
// REPLICATION attribute whose replication connection works passes (RDS
// grants it by membership of rds_replication), and a refused one gets the
// fix of the server it is on: on RDS the GRANT and the parameter group,
// never ALTER ROLE, which an RDS user cannot run.
func TestReplicationRuleJudgesTheProbe(t *testing.T) {
	refused := errors.New(`FATAL: must be superuser or replication role to start walsender (SQLSTATE 42501)`)
	for _, tc := range []struct {
		name    string
		role    roleFacts
		status  check.Status
		want    []string
		notWant string
	}{
		{"rds member, probe works", roleFacts{connect: true, providerRoles: map[string]bool{"rds_replication": true}},
			check.OK, []string{"opens replication connections (member of rds_replication)"}, ""},
		{"rds, not a member", roleFacts{connect: true, providerRoles: map[string]bool{"rds_replication": false}, probeErr: refused},
			check.Fail, []string{"must be superuser or replication role", "GRANT rds_replication TO \"relay\"", "rds.logical_replication = 1"}, "ALTER ROLE"},
		{"rds member, logical replication off", roleFacts{connect: true, providerRoles: map[string]bool{"rds_replication": true}, probeErr: refused},
			check.Fail, []string{"member of rds_replication", "rds.logical_replication = 1"}, "ALTER ROLE"},
		{"self-managed, no attribute", roleFacts{connect: true, probeErr: refused},
			check.Fail, []string{"neither REPLICATION nor superuser", "ALTER ROLE \"relay\" REPLICATION"}, "rds_"},
		{"attribute, refused by pg_hba", roleFacts{replication: true, connect: true, probeErr: errors.New("no pg_hba.conf entry for replication connection")},
			check.Fail, []string{"(REPLICATION): no pg_hba.conf entry", "pg_hba.conf needs a line"}, "ALTER ROLE"},
		{"attribute, probe works", roleFacts{replication: true, connect: true},
			check.OK, []string{"opens replication connections (REPLICATION)"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			f.role = tc.role
			rs := replicationRule(f)
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
