package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// nowhere is a URL no test connects to: a usage error comes before any
// connection.
const nowhere = "postgres://walrelay@127.0.0.1:1/x"

// runArgs runs walrelay with args and returns stdout, stderr and the error.
func runArgs(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func help(t *testing.T, verb ...string) string {
	t.Helper()
	out, errOut, err := runArgs(append(verb, "-h")...)
	if err != nil || errOut != "" {
		t.Fatalf("walrelay %s -h: %v\n%s", strings.Join(verb, " "), err, errOut)
	}
	return out
}

// schema reads PostgreSQL only for --existing's check of the table: no
// replication URL, slot or Kafka.
func TestSchemaHelpShowsNoKafkaOrReplicationFlag(t *testing.T) {
	h := help(t, "schema")
	for _, foreign := range []string{"--kafka", "--replication-url", "--retention", "--all", "--slot"} {
		if strings.Contains(h, foreign) {
			t.Errorf("walrelay schema -h shows %s:\n%s", foreign, h)
		}
	}
	for _, own := range []string{"--table", "--publication", "--column-payload", "--grant-to", "--existing", "--postgres-url"} {
		if !strings.Contains(h, own) {
			t.Errorf("walrelay schema -h lacks %s:\n%s", own, h)
		}
	}
}

// A flag of another verb, or a misspelt one, is exit 2 in two lines that
// name the flag and the verb's -h.
func TestForeignAndMisspeltFlagsAreShortUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--retention", "5h"}, "--retention is not a flag of walrelay status (it is one of 'walrelay prune')"},
		{[]string{"status", "--message-id", "x"}, "--message-id is not a flag of walrelay status (it is one of 'walrelay dlq discard', 'walrelay dlq retry')"},
		{[]string{"schema", "--kafka-brokers", "k:9092"}, "(it is one of 'walrelay check', 'walrelay dlq retry', 'walrelay recover', 'walrelay replay', 'walrelay run', 'walrelay topics accept', 'walrelay topics list')"},
		{[]string{"run", "--postgress-url", nowhere}, "--postgress-url is not a flag of walrelay run; did you mean --postgres-url?"},
		{[]string{"dlq", "list", "--frobnicate"}, "--frobnicate is not a flag of walrelay dlq list\n"},
		{[]string{"init", "--slot"}, "flag needs an argument: --slot"},
	} {
		out, errOut, err := runArgs(tc.args...)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 {
			t.Errorf("%q: got %v; want a usage error, exit 2", tc.args, err)
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: stderr %q; want it to say %q", tc.args, errOut, tc.want)
		}
		verb := "walrelay " + tc.args[0]
		if tc.args[0] == "dlq" {
			verb += " " + tc.args[1]
		}
		if n := strings.Count(errOut, "\n"); n > 2 || !strings.Contains(errOut, "Run '"+verb+" -h' for its flags.") {
			t.Errorf("%q: stderr of %d lines; want two, the second pointing at '%s -h':\n%s", tc.args, n, verb, errOut)
		}
		if out != "" {
			t.Errorf("%q: stdout %q; want nothing", tc.args, out)
		}
	}
}

// What retry and discard act on is never read from the environment: a
// leftover WALRELAY_ALL=true must not make "discard every parked message"
// of a command line that selects nothing.
func TestDestructiveSelectorsAreCommandLineOnly(t *testing.T) {
	t.Setenv("WALRELAY_POSTGRES_URL", nowhere)
	for _, v := range []string{"WALRELAY_ALL=true", "WALRELAY_MESSAGE_ID=0195b4a2-7c1d-7a3e-9f00-2b6c8d1e4f50", "WALRELAY_AGGREGATE=order/42", "WALRELAY_POSITION=0/16B3748#0"} {
		name, value, _ := strings.Cut(v, "=")
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			for _, sub := range []string{"discard", "retry"} {
				_, errOut, err := runArgs("dlq", sub, "--reason", "x")
				if sub == "retry" {
					_, errOut, err = runArgs("dlq", sub)
				}
				if !errors.Is(err, errUsage) || !strings.Contains(errOut, "say which messages") {
					t.Errorf("%s walrelay dlq %s: got %v, %q; want the usage error asking which messages", v, sub, err, errOut)
				}
			}
		})
	}
	t.Setenv("WALRELAY_REASON", "from the environment")
	if _, errOut, err := runArgs("dlq", "discard", "--all"); !errors.Is(err, errUsage) || !strings.Contains(errOut, "--reason is required") {
		t.Errorf("WALRELAY_REASON walrelay dlq discard --all: got %v, %q; want --reason asked for", err, errOut)
	}
}

// A variable of a flag the verb does not have is never read, even when its
// value would be an error for the verb that has the flag.
func TestVariablesOfOtherVerbsAreIgnored(t *testing.T) {
	t.Setenv("WALRELAY_RETENTION", "bogus")
	t.Setenv("WALRELAY_KAFKA_BROKERS", "not a broker list")
	t.Setenv("WALRELAY_STATUS_INTERVAL", "often")
	t.Setenv("WALRELAY_POSTGRES_URL", "host=x password='unterminated")
	if out, errOut, err := runArgs("schema"); err != nil || !strings.Contains(out, "CREATE TABLE") {
		t.Errorf("walrelay schema with other verbs' variables: %v\n%s", err, errOut)
	}
	// The verb that has the flag reads its variable.
	if _, _, err := runArgs("run"); err == nil || !strings.Contains(err.Error(), "WALRELAY_STATUS_INTERVAL") {
		t.Errorf("walrelay run with WALRELAY_STATUS_INTERVAL=often: got %v; want an error naming it", err)
	}
}

var helpFlag = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)(?: \w+)?   \((WALRELAY_[A-Z0-9_]+|command line only)\)$`)

// Every flag of every verb is listed by its -h, in a group, with its
// variable or "command line only"; flags of the same name mean the same on
// every verb (one variable each).
func TestEveryVerbListsItsFlagsWithVariables(t *testing.T) {
	for _, verb := range verbNames() {
		h := help(t, strings.Fields(verb)...)
		listed := map[string]bool{}
		for _, m := range helpFlag.FindAllStringSubmatch(h, -1) {
			listed[m[1]] = true
			if m[2] != "command line only" && m[2] != envName(m[1]) {
				t.Errorf("walrelay %s -h: --%s has variable %s; want %s", verb, m[1], m[2], envName(m[1]))
			}
		}
		_, s, err := parseOptions(verb, nil, &bytes.Buffer{}, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("parse %s: %v", verb, err)
		}
		n := 0
		for _, name := range s.Names() {
			n++
			if !listed[name] {
				t.Errorf("walrelay %s -h does not list --%s as a flag line:\n%s", verb, name, h)
			}
		}
		if n != len(listed) || n == 0 {
			t.Errorf("walrelay %s: %d flags bound, %d listed", verb, n, len(listed))
		}
	}
}

// The flags start at the packages' defaults, as -h shows them.
func TestFlagDefaultsAreThePackagesDefaults(t *testing.T) {
	h := help(t, "run")
	for flagName, want := range map[string]string{
		"status-interval":         slot.Defaults().StatusInterval.String(),
		"confirm-interval":        slot.Defaults().ConfirmInterval.String(),
		"slot-poll-interval":      slot.MonitorDefaults().PollInterval.String(),
		"stall-threshold":         slot.MonitorDefaults().StallThreshold.String(),
		"leader-lease":            leader.Defaults().LeaseTimeout.String(),
		"shutdown-timeout":        relay.Defaults().ShutdownTimeout.String(),
		"kafka-retry-backoff-max": sink.Defaults().RetryBackoffMax.String(),
		"slot":                    `"` + slot.Defaults().Slot + `"`,
		"ce-source":               `"` + sink.Defaults().Source + `"`,
	} {
		re := regexp.MustCompile(`(?m)^  --` + flagName + ` .*\n .*\(default ` + regexp.QuoteMeta(want) + `\)$`)
		if !re.MatchString(h) {
			t.Errorf("walrelay run -h: --%s does not show the package's default %s", flagName, want)
		}
	}
	o := defaultOptions()
	if o.Sink.MaxInFlightBytes != sink.Defaults().MaxInFlightBytes || o.Slot.MaxMessageBytes != slot.Defaults().MaxMessageBytes {
		t.Errorf("defaults: in-flight bytes %d, WAL message bytes %d; want the packages'", o.Sink.MaxInFlightBytes, o.Slot.MaxMessageBytes)
	}
}
