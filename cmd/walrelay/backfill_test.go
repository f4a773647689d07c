package main

import (
	"strings"
	"testing"
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

func TestReplayRefusesABadTopic(t *testing.T) {
	_, _, err := runArgs("replay", "--postgres-url", nowhere, "--to-topic", "no spaces")
	if err == nil || !strings.Contains(err.Error(), "--to-topic: topic name") {
		t.Errorf("replay --to-topic 'no spaces': %v; want the topic refused", err)
	}
}
