package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/schema"
)

// The DDL shipped for docker-compose and Kubernetes (one file, which both
// apply) is what `walrelay schema --grant-to walrelay` prints: both run
// walrelay as that least-privilege role.
func TestShippedDDLMatchesSchemaVerb(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"schema", "--grant-to", "walrelay"}, &out, &errOut); err != nil {
		t.Fatalf("walrelay schema: %v\n%s", err, errOut.String())
	}
	shipped, err := os.ReadFile("../../deploy/kubernetes/outbox.sql")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(shipped) {
		t.Errorf("deploy/kubernetes/outbox.sql differs from `walrelay schema --grant-to walrelay`; regenerate it with: go run ./cmd/walrelay schema --grant-to walrelay > deploy/kubernetes/outbox.sql")
	}
}

func TestOptionsFromEnvironmentAndFlags(t *testing.T) {
	t.Setenv("WALRELAY_SLOT", "from_env")
	t.Setenv("WALRELAY_STATUS_INTERVAL", "3s")
	t.Setenv("WALRELAY_PUBLICATION", "pub_env")
	var errOut bytes.Buffer
	o, err := parseOpts("run", []string{"--publication", "pub_flag"}, &errOut)
	if err != nil {
		t.Fatalf("parseOptions: %v\n%s", err, errOut.String())
	}
	if o.Slot.Slot != "from_env" || o.Slot.StatusInterval != 3*time.Second {
		t.Errorf("slot %q, status interval %s; want the environment's from_env and 3s", o.Slot.Slot, o.Slot.StatusInterval)
	}
	if o.Publication != "pub_flag" {
		t.Errorf("publication %q; want the flag to win over the environment", o.Publication)
	}
}

func TestBadEnvironmentValueIsAnError(t *testing.T) {
	t.Setenv("WALRELAY_STATUS_INTERVAL", "often")
	_, err := parseOpts("run", nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "WALRELAY_STATUS_INTERVAL") {
		t.Fatalf("err = %v; want one naming WALRELAY_STATUS_INTERVAL", err)
	}
}

// parseOpts is parseOptions with -h and the errors written to out.
func parseOpts(verb string, args []string, out io.Writer) (options, error) {
	o, _, err := parseOptions(verb, args, out, out)
	return o, err
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run", "--no-such-flag"}, {"schema", "extra"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 {
			t.Errorf("run(%q) = %v; want a usage error with exit code 2", args, err)
		}
	}
}

// TestExitCodes: 2 for a wrong command line or settings found before
// connecting to anything, 1 for what failed after (README "Exit codes").
func TestExitCodes(t *testing.T) {
	t.Setenv("WALRELAY_POSTGRES_URL", "")
	unreachable := "postgres://walrelay@127.0.0.1:1/x?connect_timeout=2&sslmode=disable"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"schema"}, 0},
		{[]string{"run", "--no-such-flag"}, 2},
		{[]string{"init"}, 2},   // --postgres-url missing
		{[]string{"status"}, 2}, // the same
		{[]string{"prune"}, 2},  // --retention missing
		{[]string{"prune", "--retention", "2h"}, 2},
		{[]string{"dlq", "list"}, 2},
		{[]string{"topics"}, 2},
		{[]string{"topics", "drop"}, 2},
		{[]string{"topics", "accept", "--postgres-url", unreachable}, 2}, // --topic missing
		{[]string{"topics", "accept", "--topic", "t"}, 2},                // --postgres-url missing
		{[]string{"topics", "accept", "--postgres-url", unreachable, "--topic", "bad topic"}, 2}, // found before connecting
		{[]string{"topics", "list", "--postgres-url", unreachable}, 1},
		{[]string{"init", "--postgres-url", unreachable, "--log-level", "loud"}, 2},
		{[]string{"init", "--postgres-url", unreachable, "--slot", "Bad Slot"}, 2},
		{[]string{"check", "--postgres-url", unreachable, "--null-payload", "drop"}, 2},
		{[]string{"init", "--postgres-url", unreachable}, 1},
		{[]string{"status", "--postgres-url", unreachable}, 1},
		{[]string{"prune", "--postgres-url", unreachable, "--retention", "2h"}, 1},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		code := 0
		if err != nil {
			code = exitCode(err)
		}
		if code != tc.code {
			t.Errorf("walrelay %q: exit %d (%v); want %d", tc.args, code, err, tc.code)
		}
	}
}

// A hostile name is a legal PostgreSQL name: walrelay schema prints it
// quoted, as an identifier or a literal, never bare. A bad slot name is
// still refused (PostgreSQL's own rule).
func TestHostileNamesAreQuoted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"schema", "--table", `public."x""; DROP TABLE y; --"`},
			[]string{`CREATE TABLE IF NOT EXISTS "public"."x""; DROP TABLE y; --" (`, `"public"."x""; DROP TABLE y; --_dead_letters"`}},
		{[]string{"schema", "--publication", "p'ub"},
			[]string{`pubname = 'p''ub'`, `CREATE PUBLICATION "p'ub" FOR TABLE`}},
		{[]string{"schema", "--table", "Sales-App.Outbox Events", "--column-aggregate-id", "Aggregate Id"},
			[]string{`CREATE TABLE IF NOT EXISTS "Sales-App"."Outbox Events" (`, `CHECK ("Aggregate Id" <> '')`}},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), tc.args, &out, &errOut); err != nil {
			t.Errorf("run(%q) = %v; want the DDL", tc.args, err)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("run(%q) printed no %s:\n%s", tc.args, want, out.String())
			}
		}
	}
	args := []string{"init", "--postgres-url", "postgres://127.0.0.1:1/x", "--slot", "Bad Slot"}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, &out, &errOut); err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "slot name") {
		t.Errorf("run(%q) = %v; want a validation error naming the slot", args, err)
	}
	args = []string{"schema", "--table", strings.Repeat("t", 51)}
	if err := run(context.Background(), args, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--table") || !strings.Contains(err.Error(), "--dead-letter-table") {
		t.Errorf("run(schema --table <51 bytes>) = %v; want the derived dead-letter table refused, naming --table and --dead-letter-table", err)
	}
}

// The recoveries table sits beside the dead-letter table: --dead-letter-table
// moves it for the preflight too.
func TestRecoveriesFollowTheDeadLetterTable(t *testing.T) {
	o, s, err := parseOptions("run", []string{"--postgres-url", "postgres://127.0.0.1:1/x", "--table", "app.events",
		"--dead-letter-table", "ops.parked"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.resolve(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Slot.Recoveries, (schema.Table{Schema: "ops", Name: "events_recoveries"}); got != want {
		t.Errorf("recoveries table of the slot: got %s; want %s", got, want)
	}
}

// --content-type and --null-payload reach the decoder's configuration,
// checked when resolved, with errors that name the flags.
func TestPayloadFlags(t *testing.T) {
	resolve := func(args ...string) (config, error) {
		t.Helper()
		o, s, err := parseOptions("run", append([]string{"--postgres-url", "postgres://127.0.0.1:1/x"}, args...), io.Discard, io.Discard)
		if err != nil {
			t.Fatalf("parse %q: %v", args, err)
		}
		return o.resolve(s)
	}
	c, err := resolve()
	if err != nil || c.Decoder.NullPayload != decoder.NullPayloadPark || c.Decoder.ContentType != "" ||
		c.Decoder.Table != c.Schema.Table || c.Decoder.Columns != c.Schema.Columns {
		t.Errorf("defaults: %+v, %v; want park, no content type, the outbox table and columns", c.Decoder, err)
	}
	c, err = resolve("--content-type", "application/json; charset=utf-8", "--null-payload", "tombstone")
	if err != nil || c.Decoder.NullPayload != decoder.NullPayloadTombstone || c.Decoder.ContentType != "application/json; charset=utf-8" {
		t.Errorf("set: %+v, %v; want tombstone, application/json; charset=utf-8", c.Decoder, err)
	}
	for args, want := range map[[2]string]string{
		{"--content-type", "json"}:                         `--content-type "json" is not a media type like application/json`,
		{"--content-type", "application/cloudevents+json"}: `--content-type "application/cloudevents+json" is a CloudEvents structured-mode type`,
		{"--null-payload", "drop"}:                         `--null-payload is "drop"; want park or tombstone`,
	} {
		if _, err := resolve(args[0], args[1]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s %s: got %v; want an error containing %q", args[0], args[1], err, want)
		}
	}
	t.Setenv("WALRELAY_NULL_PAYLOAD", "tombstone")
	if c, err := resolve(); err != nil || c.Decoder.NullPayload != decoder.NullPayloadTombstone {
		t.Errorf("WALRELAY_NULL_PAYLOAD=tombstone: %+v, %v; want tombstone", c.Decoder, err)
	}
}
