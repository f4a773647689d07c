package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDLQUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dlq"}, "Usage:"},
		{[]string{"dlq", "purge"}, `unknown command "purge"`},
		{[]string{"dlq", "retry"}, "exactly one of --message-id, --position, --aggregate, --all"},
		{[]string{"dlq", "retry", "--all", "--aggregate", "order/1"}, "exactly one of"},
		{[]string{"dlq", "discard", "--all"}, "--reason is required"},
		{[]string{"dlq", "discard", "--all", "--reason", "  "}, "--reason is required"},
		{[]string{"dlq", "list", "--aggregate", "order/1", "--aggregate-type", "order"}, "not both"},
		{[]string{"dlq", "list", "extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("walrelay %v: got %v, stderr %q; want a usage error saying %q", tc.args, err, stderr.String(), tc.want)
		}
	}
}

func TestDLQSelectionAndFilterFromFlags(t *testing.T) {
	sel, err := dlqOptions{Aggregate: "order/eu/42"}.selection()
	if err != nil || sel.Aggregate == nil || sel.Aggregate.Type != "order" || sel.Aggregate.ID != "eu/42" {
		t.Errorf("--aggregate order/eu/42: got %+v, %v; want type order, id eu/42", sel.Aggregate, err)
	}
	for _, bad := range []dlqOptions{{Aggregate: "order"}, {Aggregate: "/42"}, {MessageID: strings.Repeat("x", 1025)}, {Position: "0/16B3748"}} {
		if _, err := bad.selection(); err == nil {
			t.Errorf("selection(%+v) = nil error; want one", bad)
		}
	}
	sel, err = dlqOptions{Position: "0/16B3748#2"}.selection()
	if err != nil || sel.Position == nil || sel.Position.String() != "0/16B3748#2" {
		t.Errorf("--position 0/16B3748#2: got %v, %v", sel.Position, err)
	}
	if _, err := (dlqOptions{Status: "gone"}).filter(); err == nil {
		t.Error("--status gone: got nil error; want one")
	}
}

func TestAgeAndShorten(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 12 * time.Minute: "12m",
		3*time.Hour + 5*time.Minute: "3h05m", 52 * time.Hour: "2d04h",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q; want %q", d, got, want)
		}
	}
	if got := shorten("a\nb  c", 10); got != "a b c" {
		t.Errorf("shorten = %q; want one line", got)
	}
	if got := shorten(strings.Repeat("é", 70), 60); len([]rune(got)) != 60 || !strings.HasSuffix(got, "...") {
		t.Errorf("shorten of 70 runes = %q; want 60 runes ending in ...", got)
	}
}
