package dlq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// Options are `walrelay dlq`'s selectors and filters as its command line
// gives them, before they are read: cmd/walrelay binds a flag to each
// field, and Problem, Selection and Filter turn them into what a Store
// takes. Their errors name the flags (--aggregate, --status), since these
// values come from nowhere else.
type Options struct {
	MessageID     string
	Position      string
	Aggregate     string // TYPE/ID
	AggregateType string
	Type          string
	// Reason is a filter of list and the audit reason of discard.
	Reason    string
	OlderThan time.Duration
	NewerThan time.Duration
	Status    string
	Limit     int
	All       bool
}

// Problem says why options cannot mean anything for the verb (list, retry
// or discard), before anything connects; empty when they can.
func (o Options) Problem(verb string) string {
	switch {
	case verb != "list" && o.choices() != 1:
		return "say which messages: exactly one of --message-id, --position, --aggregate, --all"
	case verb == "discard" && strings.TrimSpace(o.Reason) == "":
		return "--reason is required: it is kept with the discarded messages for audit"
	case verb == "list" && o.Aggregate != "" && o.AggregateType != "":
		return "give --aggregate TYPE/ID or --aggregate-type T, not both"
	}
	return ""
}

// choices counts the selections given.
func (o Options) choices() int {
	n := 0
	for _, set := range []bool{o.MessageID != "", o.Position != "", o.Aggregate != "", o.All} {
		if set {
			n++
		}
	}
	return n
}

// Selection is the rows retry or discard act on: the one choice Problem
// let through (All when none is given).
func (o Options) Selection() (Selection, error) {
	switch {
	case o.MessageID != "":
		id, err := schema.ParseMessageID(o.MessageID)
		if err != nil {
			return Selection{}, fmt.Errorf("--message-id: %w", err)
		}
		return Selection{MessageID: &id}, nil
	case o.Position != "":
		p, err := ParsePosition(o.Position)
		if err != nil {
			return Selection{}, fmt.Errorf("--position: %w", err)
		}
		return Selection{Position: &p}, nil
	case o.Aggregate != "":
		agg, err := parseAggregate(o.Aggregate)
		if err != nil {
			return Selection{}, err
		}
		return Selection{Aggregate: &agg}, nil
	}
	return Selection{All: true}, nil
}

// Filter is the rows list shows. Status must be parked or discarded, and
// no limit or age negative.
func (o Options) Filter() (Filter, error) {
	f := Filter{
		AggregateType: o.AggregateType,
		Type:          o.Type,
		Reason:        o.Reason,
		OlderThan:     o.OlderThan,
		NewerThan:     o.NewerThan,
		Status:        Status(o.Status),
		Limit:         o.Limit,
	}
	if o.Aggregate != "" {
		agg, err := parseAggregate(o.Aggregate)
		if err != nil {
			return Filter{}, err
		}
		f.AggregateType, f.AggregateID = agg.Type, agg.ID
	}
	if f.Status != Parked && f.Status != Discarded {
		return Filter{}, fmt.Errorf("--status is %q; want parked or discarded", o.Status)
	}
	if f.Limit < 0 || f.OlderThan < 0 || f.NewerThan < 0 {
		return Filter{}, fmt.Errorf("--limit, --older-than and --newer-than must not be negative")
	}
	return f, nil
}

// parseAggregate reads TYPE/ID; the id may itself contain slashes.
func parseAggregate(s string) (schema.Aggregate, error) {
	typ, id, ok := strings.Cut(s, "/")
	if !ok || typ == "" || id == "" {
		return schema.Aggregate{}, fmt.Errorf("--aggregate %q: want TYPE/ID, like order/42", s)
	}
	return schema.Aggregate{Type: typ, ID: id}, nil
}

// Missed is the error of a retry or discard of one message (by id or
// position) that matched none of the n parked rows it acted on; nil when
// n > 0 or sel names more than one message, where none parked is an answer.
func (sel Selection) Missed(n int) error {
	if n == 0 && sel.single() {
		return fmt.Errorf("no parked message matches %s", sel)
	}
	return nil
}

// ListCut is List, and whether f.Limit cut the list short: it asks for one
// row more than the limit to know, and returns at most the limit.
func (s *Store) ListCut(ctx context.Context, f Filter) ([]Entry, bool, error) {
	limit := f.Limit
	if limit > 0 {
		f.Limit++
	}
	es, err := s.List(ctx, f)
	if err != nil || limit <= 0 || len(es) <= limit {
		return es, false, err
	}
	return es[:limit], true, nil
}
