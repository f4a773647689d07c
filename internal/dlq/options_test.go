package dlq

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/schema"
)

func TestDLQSelectionAndFilterFromFlags(t *testing.T) {
	sel, err := Options{Aggregate: "order/eu/42"}.Selection()
	if err != nil || sel.Aggregate == nil || sel.Aggregate.Type != "order" || sel.Aggregate.ID != "eu/42" {
		t.Errorf("--aggregate order/eu/42: got %+v, %v; want type order, id eu/42", sel.Aggregate, err)
	}
	for _, bad := range []Options{{Aggregate: "order"}, {Aggregate: "/42"}, {MessageID: strings.Repeat("x", 1025)}, {Position: "0/16B3748"}} {
		if _, err := bad.Selection(); err == nil {
			t.Errorf("selection(%+v) = nil error; want one", bad)
		}
	}
	sel, err = Options{Position: "0/16B3748#2"}.Selection()
	if err != nil || sel.Position == nil || sel.Position.String() != "0/16B3748#2" {
		t.Errorf("--position 0/16B3748#2: got %v, %v", sel.Position, err)
	}
	if _, err := (Options{Status: "gone"}).Filter(); err == nil {
		t.Error("--status gone: got nil error; want one")
	}
}

func TestSelectionErrorsNameTheFlags(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Aggregate: "order"}, `--aggregate "order": want TYPE/ID, like order/42`},
		{Options{MessageID: strings.Repeat("x", 1025)}, "--message-id: "},
		{Options{Position: "0/16B3748"}, `--position: position "0/16B3748": want LSN#SEQ`},
	} {
		if _, err := tc.o.Selection(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Selection(%+v): got %v; want an error starting %q", tc.o, err, tc.want)
		}
	}
	if sel, err := (Options{All: true}).Selection(); err != nil || !sel.All {
		t.Errorf("--all: got %+v, %v; want All", sel, err)
	}
}

func TestFilterFromFlags(t *testing.T) {
	f, err := Options{Aggregate: "order/eu/42", Type: "placed", Reason: "too large", Status: "discarded", Limit: 5}.Filter()
	want := Filter{AggregateType: "order", AggregateID: "eu/42", Type: "placed", Reason: "too large", Status: Discarded, Limit: 5}
	if err != nil || f != want {
		t.Errorf("Filter: got %+v, %v; want %+v", f, err, want)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Status: "gone"}, `--status is "gone"; want parked or discarded`},
		{Options{Status: "parked", Limit: -1}, "--limit, --older-than and --newer-than must not be negative"},
		{Options{Status: "parked", NewerThan: -1}, "--limit, --older-than and --newer-than must not be negative"},
		{Options{Status: "parked", Aggregate: "order/"}, `--aggregate "order/": want TYPE/ID, like order/42`},
	} {
		if _, err := tc.o.Filter(); err == nil || err.Error() != tc.want {
			t.Errorf("Filter(%+v): got %v; want %q", tc.o, err, tc.want)
		}
	}
}

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		verb string
		o    Options
		want string // a part of the problem; empty for none
	}{
		{"list", Options{}, ""},
		{"list", Options{Aggregate: "order/1", AggregateType: "order"}, "not both"},
		{"retry", Options{}, "exactly one of --message-id, --position, --aggregate, --all"},
		{"retry", Options{All: true, Aggregate: "order/1"}, "exactly one of"},
		{"retry", Options{All: true}, ""},
		{"discard", Options{MessageID: "42"}, "--reason is required"},
		{"discard", Options{MessageID: "42", Reason: " \t"}, "--reason is required"},
		{"discard", Options{MessageID: "42", Reason: "duplicate"}, ""},
	} {
		got := tc.o.Problem(tc.verb)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Problem(%s, %+v): got %q; want %q", tc.verb, tc.o, got, tc.want)
		}
	}
}

func TestMissed(t *testing.T) {
	id := schema.MessageID("42")
	if err := (Selection{MessageID: &id}).Missed(0); err == nil || err.Error() != "no parked message matches message 42" {
		t.Errorf("a message id that matched nothing: got %v; want no parked message matches message 42", err)
	}
	for _, tc := range []struct {
		sel Selection
		n   int
	}{{Selection{MessageID: &id}, 1}, {Selection{All: true}, 0}, {Selection{Aggregate: &schema.Aggregate{Type: "order", ID: "1"}}, 0}} {
		if err := tc.sel.Missed(tc.n); err != nil {
			t.Errorf("Missed(%s, %d): got %v; want nil", tc.sel, tc.n, err)
		}
	}
}
