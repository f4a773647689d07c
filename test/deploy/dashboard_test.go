package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit"
	"go.yaml.in/yaml/v3"
)

// The dashboard is valid JSON; every panel but the rows has a query, uses
// the datasource variable, and has an id of its own.
func TestDashboardPanelsHaveQueries(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q; want both set", d.UID, d.Title)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		hasVar = hasVar || (v.Name == "datasource" && v.Type == "datasource")
	}
	if !hasVar {
		t.Errorf("dashboard has no datasource variable named datasource")
	}
	ids := map[int]string{}
	panels := 0
	for _, p := range allPanels(d.Panels) {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		panels++
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v; want uid ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, tg.RefID)
			}
		}
	}
	if panels == 0 {
		t.Fatalf("dashboard has no panels")
	}
}

// The panels the brief asks for are there, each using its metric.
func TestDashboardCoversTheFigures(t *testing.T) {
	used := strings.Join(dashboardQueries(t), "\n")
	for _, want := range []string{
		"walrelay_slot_lag_bytes", "walrelay_slot_retained_wal_bytes", "walrelay_slot_wal_status",
		"walrelay_oldest_unpublished_message_age_seconds", "walrelay_published_messages_total",
		"histogram_quantile(0.5,", "histogram_quantile(0.99,", "histogram_quantile(0.999,",
		"walrelay_sink_errors_total", "walrelay_sink_retries_total", "walrelay_sink_in_flight_messages",
		"walrelay_sink_in_flight_bytes", "walrelay_leader", "walrelay_leader_changes_total",
		"walrelay_streaming", "walrelay_stalled", "walrelay_last_status_update_timestamp_seconds",
	} {
		if !strings.Contains(used, want) {
			t.Errorf("no dashboard query uses %s", want)
		}
	}
}

// Every dashboard query is valid PromQL: promtool checks them as recording
// rules, with Grafana's variables replaced by plausible values.
func TestDashboardQueriesParse(t *testing.T) {
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
		"$job", ".*", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range dashboardQueries(t) {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: grafana.Replace(q)})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	testkit.Must(t, err, "marshal dashboard queries")
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	testkit.Must(t, os.WriteFile(file, b, 0o644), "write %s", file)
	out := runPromtool(t, ".", "check", "rules", file)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Fatalf("promtool check rules on the dashboard's queries:\n%s\nwant %q", out, want)
	}
}
