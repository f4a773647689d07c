package deploy_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// usedMetrics returns the walrelay_* names the dashboard and the alert
// rules query, read from the files, each with the files that use it.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	var ruleExprs []string
	for _, r := range loadRules(t) {
		ruleExprs = append(ruleExprs, r.Expr)
	}
	for file, queries := range map[string][]string{dashboardFile: dashboardQueries(t), rulesFile: ruleExprs} {
		names := walrelayMetrics(queries)
		if len(names) == 0 {
			t.Fatalf("found no walrelay_* metric in %s", file)
		}
		for _, n := range names {
			used[n] = append(used[n], file)
		}
	}
	return used
}

// safeWALSize is the one gauge walrelay leaves out by design: when
// pg_replication_slots.safe_wal_size is NULL.
const safeWALSize = "walrelay_slot_safe_wal_size_bytes"

// histogramSuffixes are the series of a histogram family.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// family maps a series name to its metric family: a histogram's series
// lose their suffix. suffixed tells whether one was removed.
func family(name string) (fam string, suffixed bool) {
	for _, s := range histogramSuffixes {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f, true
		}
	}
	return name, false
}

// exported reads a /metrics page: each family that has samples, with its
// type.
func exported(t *testing.T, addr string) map[string]string {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	testkit.Must(t, err, "scrape /metrics")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testkit.Must(t, err, "read /metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	types := map[string]string{}
	sampled := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				types[f[0]] = f[1]
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name := line[:end]
		sampled[name] = true
		if f, ok := family(name); ok {
			sampled[f] = true
		}
	}
	out := map[string]string{}
	for name, typ := range types {
		if sampled[name] {
			out[name] = typ
		}
	}
	return out
}

// missingMetrics compares the names in use with what the relay exports and
// describes each mismatch.
func missingMetrics(used map[string][]string, have map[string]string) []string {
	var problems []string
	for name, files := range used {
		fam, suffixed := family(name)
		typ, ok := have[fam]
		switch {
		case !ok:
			problems = append(problems, fam+" (used in "+strings.Join(files, ", ")+") is not exported")
		case suffixed && typ != "histogram" && typ != "summary":
			problems = append(problems, name+" is used as a histogram series, but "+fam+" is a "+typ)
		case !suffixed && (typ == "histogram" || typ == "summary"):
			problems = append(problems, name+" is a "+typ+": query its _bucket, _sum or _count series")
		}
	}
	sort.Strings(problems)
	return dedupe(problems)
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Every walrelay_* metric the dashboard and the alert rules query is
// exported by a running walrelay that has published a few messages: a
// renamed or missing metric would leave a panel empty or an alert silent.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	used := usedMetrics(t)
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("walrelay metrics in use (%d): %s", len(names), strings.Join(names, " "))

	f := harness.New(t, "order")
	addr := testkit.FreePort(t)
	r := f.Start("--metrics-addr", addr, "--slot-poll-interval", "1s", "--heartbeat-interval", "1s")
	r.WaitStarted()
	n, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 50, MaxTxRows: 5, AggregatesPerWriter: 3, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	t.Logf("wrote %d rows; the slot confirmed them", n)

	// safe_wal_size is NULL, and its gauge absent, when the server keeps WAL
	// for slots without limit; then nothing can show that gauge.
	var keep string
	testkit.Must(t, f.DB.QueryRow(context.Background(), "SHOW max_slot_wal_keep_size").Scan(&keep), "show max_slot_wal_keep_size")
	if keep == "-1" {
		if _, ok := used[safeWALSize]; ok {
			t.Logf("max_slot_wal_keep_size = -1: %s cannot be exported here and is not checked", safeWALSize)
			delete(used, safeWALSize)
		}
	}

	// Slot figures and heartbeats come on their own timers: give them a few
	// rounds before reporting what is missing.
	var problems []string
	poll.Until(15*time.Second, 500*time.Millisecond, func() bool {
		problems = missingMetrics(used, exported(t, addr))
		if len(problems) == 0 {
			return true
		}
		r.Running()
		return false
	})
	for _, p := range problems {
		t.Errorf("%s", p)
	}
}
