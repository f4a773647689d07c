package main

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// What recover and replay act on is said on the command line: a variable
// never selects it, and recover wants exactly one selection.
func TestRecoverWantsExactlyOneSelection(t *testing.T) {
	t.Setenv("WALRELAY_SINCE", "1h") // flag only: ignored
	t.Setenv("WALRELAY_ALL", "true")
	for _, args := range [][]string{
		{"recover", "--postgres-url", nowhere},
		{"recover", "--postgres-url", nowhere, "--since", "1h", "--all"},
	} {
		_, _, err := runArgs(args...)
		if err == nil || !strings.Contains(err.Error(), "give exactly one of --since TIME, --since-message-id ID or --all") {
			t.Errorf("%q: got %v; want the selection asked for", args, err)
		}
	}
	for _, flag := range []string{"since", "since-message-id", "all", "force"} {
		if h := help(t, "recover"); !strings.Contains(h, "--"+flag) {
			t.Errorf("walrelay recover -h lacks --%s", flag)
		}
	}
	for _, foreign := range []string{"--retention", "--to-topic", "--metrics-addr"} {
		if strings.Contains(help(t, "recover"), foreign) {
			t.Errorf("walrelay recover -h lists %s", foreign)
		}
	}
	if h := help(t, "replay"); strings.Contains(h, "--slot") || strings.Contains(h, "--on-bad-message") || !strings.Contains(h, "--to-topic") {
		t.Errorf("walrelay replay -h: want --to-topic and no --slot or --on-bad-message:\n%s", h)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-04T08:10:03Z":      time.Date(2026, 12, 4, 8, 10, 3, 0, time.UTC),
		"2026-12-04T10:10:03+02:00": time.Date(2026, 12, 4, 8, 10, 3, 0, time.UTC),
		"90m":                       now.Add(-90 * time.Minute),
	} {
		got, err := parseWhen("--since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-1h", "2026-12-04 08:10"} {
		if _, err := parseWhen("--since", bad, now); err == nil || !strings.Contains(err.Error(), "--since is") {
			t.Errorf("parseWhen(%q) = %v; want an error naming --since", bad, err)
		}
	}
}

// A replayed message carries one walrelay_replay header, replacing the
// row's own of any case, and goes to --to-topic when given.
func TestMarkReplay(t *testing.T) {
	m := &schema.Message{Headers: []schema.Header{{Key: "traceparent", Value: "t"}, {Key: "Walrelay_Replay", Value: "forged"}}}
	markReplay(m, "rebuild", "2026-12-04T09:00:00Z")
	want := []schema.Header{{Key: "traceparent", Value: "t"}, {Key: schema.HeaderReplay, Value: "2026-12-04T09:00:00Z"}}
	if len(m.Headers) != 2 || m.Headers[0] != want[0] || m.Headers[1] != want[1] || m.Topic != "rebuild" {
		t.Errorf("markReplay: headers %v, topic %q; want %v, rebuild", m.Headers, m.Topic, want)
	}
	m = &schema.Message{Topic: "own"}
	markReplay(m, "", "x")
	if m.Topic != "own" {
		t.Errorf("markReplay without a topic: topic %q; want the row's own", m.Topic)
	}
}

func TestReplayRefusesABadTopic(t *testing.T) {
	_, _, err := runArgs("replay", "--postgres-url", nowhere, "--to-topic", "no spaces")
	if err == nil || !strings.Contains(err.Error(), "--to-topic: topic name") {
		t.Errorf("replay --to-topic 'no spaces': %v; want the topic refused", err)
	}
}
