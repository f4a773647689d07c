package flagset

import (
	"errors"
	"strings"
	"testing"
)

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"slot", "slot", 0}, {"slto", "slot", 2}, {"postgress-url", "postgres-url", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d; want %d", c.a, c.b, got, c.want)
		}
	}
}

// A variable sets its flag, the command line wins over it, and a
// command-line-only flag never reads one.
func TestVariablesFlagsAndFlagOnly(t *testing.T) {
	var slot, table, reason string
	s := New("walrelay test", nil)
	s.Str(&slot, "slot", "the slot")
	s.Str(&table, "table", "the table")
	s.Str(&reason, "reason", "why")
	s.FlagOnly("reason")
	env := map[string]string{"WALRELAY_SLOT": "from_env", "WALRELAY_TABLE": "env_table", "WALRELAY_REASON": "from_env"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var out, errOut strings.Builder
	if err := s.Parse([]string{"--table", "flag_table"}, lookup, &out, &errOut); err != nil {
		t.Fatalf("Parse: %v (%s)", err, errOut.String())
	}
	if slot != "from_env" || table != "flag_table" || reason != "" {
		t.Errorf("slot %q, table %q, reason %q; want from_env, flag_table and nothing", slot, table, reason)
	}
}

// A foreign flag names the verbs that have it; a misspelt one the flag
// meant; both are usage errors.
func TestUsageErrorsNameTheOwnerOrTheNearestFlag(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"--topic", "--topic is not a flag of walrelay test (it is one of 'walrelay topics accept')"},
		{"--slto", "--slto is not a flag of walrelay test; did you mean --slot?"},
	} {
		var slot string
		s := New("walrelay test", map[string][]string{"topic": {"topics accept"}})
		s.Str(&slot, "slot", "the slot")
		var out, errOut strings.Builder
		err := s.Parse([]string{c.arg, "x"}, func(string) (string, bool) { return "", false }, &out, &errOut)
		if !errors.Is(err, ErrUsage) || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%s: got %v, %q; want ErrUsage and %q", c.arg, err, errOut.String(), c.want)
		}
	}
}
