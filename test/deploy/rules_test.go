package deploy_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit"
	"go.yaml.in/yaml/v3"
)

// The rules are valid, their promtool unit tests pass, and the compose
// stack's prometheus.yml loads them.
func TestRulesPassPromtool(t *testing.T) {
	root := repo(t, ".")
	t.Log(strings.TrimSpace(runPromtool(t, root, "check", "rules", rulesFile)))
	t.Log(strings.TrimSpace(runPromtool(t, root, "test", "rules", rulesTestFile)))
	t.Log(strings.TrimSpace(runPromtool(t, root, "check", "config", promConfFile)))
}

// runbookBase is what every runbook_url starts with.
const runbookBase = "https://github.com/walrelay/walrelay/blob/main/docs/RUNBOOK.md#"

// Every alert has a summary, a description, a severity and a runbook_url
// whose anchor is a section of docs/RUNBOOK.md named after the alert; every
// alert section of the runbook belongs to an alert.
func TestEveryAlertHasARunbookSection(t *testing.T) {
	sections := runbookSections(t)
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s: annotation %s is empty", r.Alert, a)
			}
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q; want warning or critical", r.Alert, s)
		}
		want := runbookBase + anchor(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("alert %s: runbook_url %q; want %q", r.Alert, got, want)
		}
		if !sections[anchor(r.Alert)] {
			t.Errorf("alert %s: %s has no section %q", r.Alert, runbookFile, "## "+r.Alert)
		}
	}
	for a := range sections {
		if strings.HasPrefix(a, "walrelay") && !alertsByAnchor(alerts)[a] {
			t.Errorf("%s has section #%s, but no alert of that name", runbookFile, a)
		}
	}
}

// runbookSections returns the anchors of the runbook's ## headings.
func runbookSections(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(string(read(t, runbookFile)), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			out[anchor(h)] = true
		}
	}
	return out
}

var notInAnchor = regexp.MustCompile(`[^a-z0-9 _-]`)

// anchor is the fragment GitHub gives a Markdown heading.
func anchor(heading string) string {
	a := notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), "")
	return strings.ReplaceAll(a, " ", "-")
}

func alertsByAnchor(alerts map[string]bool) map[string]bool {
	out := map[string]bool{}
	for a := range alerts {
		out[anchor(a)] = true
	}
	return out
}

// Every alert has a promtool unit test in which it fires, and one in which
// it stays quiet; and the tests name no alert the rules lack.
func TestEveryAlertHasFiringAndQuietTests(t *testing.T) {
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name      string `yaml:"name"`
			RuleTests []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	testkit.Must(t, yaml.Unmarshal(read(t, rulesTestFile), &f), "parse %s", rulesTestFile)
	if len(f.RuleFiles) != 1 || filepath.Join(filepath.Dir(rulesTestFile), f.RuleFiles[0]) != filepath.FromSlash(rulesFile) {
		t.Errorf("%s: rule_files %q; want [%q]", rulesTestFile, f.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, rt := range tc.RuleTests {
			if len(rt.ExpAlerts) > 0 {
				fires[rt.Alertname] = true
			} else {
				quiet[rt.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		if !fires[r.Alert] {
			t.Errorf("alert %s: no unit test expects it to fire", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("alert %s: no unit test expects it to stay quiet", r.Alert)
		}
	}
	for a := range fires {
		if !alerts[a] {
			t.Errorf("%s tests alert %s, which %s lacks", rulesTestFile, a, rulesFile)
		}
	}
}
