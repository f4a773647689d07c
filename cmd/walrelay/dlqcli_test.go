package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
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
