package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/retention"
	"github.com/walrelay/walrelay/schema"
)

func TestPruneOptionsFromEnvironmentAndFlags(t *testing.T) {
	t.Setenv("WALRELAY_PRUNE_BATCH", "50")
	t.Setenv("WALRELAY_PRUNE_WAIT", "3s")
	var errOut bytes.Buffer
	o, err := parseOpts("prune", []string{"--retention", "168h", "--prune-pause", "1s", "--dry-run", "--prune-batch", "70",
		"--table", "app.events", "--column-occurred-at", "event_time", "--slot", "s1", "--dead-letter-table", "ops.parked"}, &errOut)
	if err != nil {
		t.Fatalf("parseOptions: %v\n%s", err, errOut.String())
	}
	rc := o.mustConfig(t).Retention
	want := retention.Config{Table: schema.Table{Schema: "app", Name: "events"}, OccurredAt: "event_time", Slot: "s1",
		Recoveries: schema.Table{Schema: "ops", Name: "events_recoveries"}, Retention: 168 * time.Hour, Batch: 70, Pause: time.Second, Wait: 3 * time.Second, DryRun: true,
		PollInterval: retention.Defaults().PollInterval}
	if rc != want {
		t.Errorf("retention config: got %+v; want %+v (the flag wins over the environment)", rc, want)
	}
}

// What prune deletes is said on the command line only: --retention and
// --dry-run have no variables, so a leftover WALRELAY_DRY_RUN=false or
// WALRELAY_RETENTION cannot turn a dry run into a delete or choose what
// goes.
func TestPruneDeleteFlagsAreCommandLineOnly(t *testing.T) {
	t.Setenv("WALRELAY_RETENTION", "1h")
	t.Setenv("WALRELAY_DRY_RUN", "false")
	o, err := parseOpts("prune", []string{"--dry-run"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Retention.Retention != 0 || !o.Retention.DryRun {
		t.Errorf("retention %s, dry run %v; want the variables ignored (0, true)", o.Retention.Retention, o.Retention.DryRun)
	}
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"prune", "--postgres-url", "postgres://127.0.0.1:1/x"}, &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(errOut.String(), "--retention is required") {
		t.Errorf("prune with WALRELAY_RETENTION only: got %v, %q; want the usage error asking for --retention", err, errOut.String())
	}
}

func TestPruneOptionDefaults(t *testing.T) {
	o, err := parseOpts("prune", []string{"--retention", "24h"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	p := o.Retention
	if p.Batch != 1000 || p.Pause != 100*time.Millisecond || p.Wait != time.Minute || p.DryRun {
		t.Errorf("defaults: got %+v; want batch 1000, pause 100ms, wait 1m, no dry run", p)
	}
	o, err = parseOpts("prune", []string{"--retention", "24h", "--prune-pause", "0", "--prune-wait", "0"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rc := o.mustConfig(t).Retention
	if rc.Pause >= 0 || rc.Wait >= 0 {
		t.Errorf("zero pause and wait: got pause %s, wait %s; want negative (none; the package's zero is its default)", rc.Pause, rc.Wait)
	}
}

// mustConfig is o resolved as prune resolves it, with a URL that points
// nowhere.
func (o options) mustConfig(t *testing.T) config {
	t.Helper()
	o.PostgresURL = "postgres://127.0.0.1:1/x"
	_, s, err := parseOptions("prune", nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A command line prune cannot run with is exit 2, before any connection
// (the URL points nowhere).
func TestPruneUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		problem string
	}{
		{nil, "--retention is required"},
		{[]string{"--retention", "168"}, `invalid value "168" for flag --retention`}, // no unit
		{[]string{"--retention", "30s"}, "--retention 30s is under 1m0s"},
		{[]string{"--retention", "-1h"}, "is required"},
		{[]string{"--retention", "1h", "--prune-batch", "0"}, "--prune-batch 0"},
		{[]string{"--retention", "1h", "--prune-wait", "-1s"}, "must not be negative"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"prune", "--postgres-url", "postgres://127.0.0.1:1/x"}, tc.args...)
		err := run(context.Background(), args, &out, &errOut)
		if !errors.Is(err, errUsage) || !strings.Contains(errOut.String(), tc.problem) {
			t.Errorf("prune %q: got %v, stderr %q; want a usage error saying %q", tc.args, err, errOut.String(), tc.problem)
		}
		if out.Len() != 0 {
			t.Errorf("prune %q printed %q on stdout; want nothing", tc.args, out.String())
		}
	}
}

func TestPruneBadEnvironmentValueIsAnError(t *testing.T) {
	t.Setenv("WALRELAY_PRUNE_WAIT", "soon")
	err := run(context.Background(), []string{"prune", "--retention", "1h"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "WALRELAY_PRUNE_WAIT") {
		t.Fatalf("err = %v; want one naming WALRELAY_PRUNE_WAIT", err)
	}
}

func TestPruneWithoutPostgresURLIsAnError(t *testing.T) {
	t.Setenv("WALRELAY_POSTGRES_URL", "")
	err := run(context.Background(), []string{"prune", "--retention", "1h"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--postgres-url") {
		t.Fatalf("err = %v; want one asking for --postgres-url", err)
	}
}
