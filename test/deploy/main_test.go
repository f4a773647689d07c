// Package deploy_test checks what walrelay ships for operators under
// deploy/: the Prometheus alert rules (with promtool), the Grafana
// dashboard, the docker-compose stack (with docker-compose config), the
// image's build (the Dockerfile's own build line), the Kubernetes manifests
// (decoded into the API types), and that every walrelay metric they use is
// exported by a running walrelay. The directory holds no Go code of its
// own, only these tests.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m))
}

// Paths of the shipped files, relative to the repository root.
const (
	dashboardFile = "deploy/grafana/walrelay-dashboard.json"
	rulesFile     = "deploy/prometheus/walrelay-rules.yml"
	rulesTestFile = "deploy/prometheus/walrelay-rules.test.yml"
	promConfFile  = "deploy/prometheus/prometheus.yml"
	runbookFile   = "docs/RUNBOOK.md"
	composeFile   = "docker-compose.yml"
)

// repo returns the absolute path of a file in the repository.
func repo(t *testing.T, rel string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	testkit.Must(t, err, "repository root")
	return filepath.Join(root, filepath.FromSlash(rel))
}

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(repo(t, rel))
	testkit.Must(t, err, "read %s", rel)
	return b
}

// inCI reports whether missing tools must fail the tests instead of
// skipping them.
func inCI() bool {
	return os.Getenv("CI") == "true" || os.Getenv("WALRELAY_TEST_PG_URL") != ""
}

// promtool returns the path of promtool from scripts/promtool.sh, which
// installs it when missing. Under -short outside CI it only looks, and the
// test skips when there is none.
func promtool(t *testing.T) string {
	t.Helper()
	lookOnly := testing.Short() && !inCI()
	cmd := exec.Command(repo(t, "scripts/promtool.sh"))
	if lookOnly {
		cmd.Env = append(os.Environ(), "WALRELAY_PROMTOOL_NO_INSTALL=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if lookOnly {
			t.Skipf("promtool is not installed (scripts/promtool.sh installs it): %s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("scripts/promtool.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// runPromtool runs promtool in dir and fails the test on a non-zero exit.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// alertRule is one rule of the rules file.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	testkit.Must(t, yaml.Unmarshal(read(t, rulesFile), &f), "parse %s", rulesFile)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s holds no rules", rulesFile)
	}
	return rules
}

// panel is a dashboard panel with what the tests look at.
type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(read(t, dashboardFile)))
	testkit.Must(t, dec.Decode(&d), "parse %s", dashboardFile)
	return d
}

// allPanels flattens rows: the panels of collapsed rows are nested.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardQueries returns every PromQL query of the dashboard: panel
// targets and the queries of template variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	d := loadDashboard(t)
	var qs []string
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			qs = append(qs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Query, &s) == nil:
		case json.Unmarshal(v.Query, &q) == nil:
			s = q.Query
		default:
			t.Fatalf("dashboard variable %s: query %s is neither a string nor an object", v.Name, v.Query)
		}
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("dashboard variable %s: query %q; want label_values(<selector>, <label>)", v.Name, s)
		}
		qs = append(qs, m[1])
	}
	return qs
}

// labelValues matches Grafana's label_values(selector, label) variable
// query; the selector is PromQL.
var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	metricName = regexp.MustCompile(`\bwalrelay_[a-zA-Z0-9_]+`)
)

// walrelayMetrics returns the walrelay_* metric names in PromQL queries,
// sorted and unique, and skips string literals (label values). A
// histogram's _bucket, _sum and _count series keep their suffix here.
func walrelayMetrics(queries []string) []string {
	seen := map[string]bool{}
	for _, q := range queries {
		for _, n := range metricName.FindAllString(quoted.ReplaceAllString(q, `""`), -1) {
			seen[n] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
