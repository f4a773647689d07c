package preset

import (
	"slices"
	"testing"
)

// The usage of --preset, as walrelay has always said it.
const wantHelp = "fill the defaults of another tool's setup; a flag or variable set explicitly still wins. debezium: Debezium's Outbox Event Router at its defaults " +
	"(--column-message-id id, --column-aggregate-type aggregatetype, --column-aggregate-id aggregateid, --column-type type, --column-payload payload, " +
	"--column-occurred-at timestamp, --column-tracing-span-context tracingspancontext, --null-payload tombstone, --content-type application/json, " +
	"--topic-template outbox.event.{aggregate_type}, --message-id-header id; see docs/TABLES.md)"

func TestHelp(t *testing.T) {
	if got := Help(); got != wantHelp {
		t.Errorf("Help:\n%s\nwant\n%s", got, wantHelp)
	}
}

func TestLookupAndNames(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"debezium"}) {
		t.Errorf("Names = %q; want [debezium]", got)
	}
	for _, n := range Names() {
		if p, ok := Lookup(n); !ok || p.Name != n || len(p.Flags) == 0 {
			t.Errorf("Lookup(%q) = %+v, %v; want the preset", n, p, ok)
		}
	}
	if _, ok := Lookup("debezum"); ok {
		t.Errorf("Lookup(debezum): found; want none")
	}
}

// The summary leaves out the flags the verb lacks and says the explicit
// ones as such.
func TestSummary(t *testing.T) {
	p := Preset{Name: "p", About: "a test", Flags: []Flag{{"a", "1"}, {"b", "2"}, {"c", "3"}}}
	has := func(f string) bool { return f != "b" }
	explicit := func(f string) bool { return f == "c" }
	if got, want := p.Summary(has, explicit), "p (a test): --a 1, --c (set explicitly)"; got != want {
		t.Errorf("Summary = %q; want %q", got, want)
	}
}
