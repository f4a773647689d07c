package sink

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// A sink of several outbox tables routes each message by its table's own
// template and stamps its table's source and id header; an aggregate
// blocked in one table blocks nothing of another table's aggregate of the
// same type and id; a message of a table the sink does not know is refused.
func TestSinkOfSeveralTables(t *testing.T) {
	type rec struct{ topic, source, id string }
	var mu sync.Mutex
	var got []rec
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		for {
			r, err := req.Records.ReadRecord()
			if err != nil {
				break
			}
			x := rec{topic: req.Topic}
			for _, h := range r.Headers {
				switch h.Key {
				case "ce_source":
					x.source = string(h.Value)
				case "id":
					x.id = string(h.Value)
				}
			}
			mu.Lock()
			got = append(got, x)
			mu.Unlock()
		}
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.Tables = []TableConfig{{}, {TopicTemplate: "billing.{aggregate_type}", Source: "billing", MessageIDHeader: "id"}}
	cfg = cfg.withDefaults()
	pl := &parkLog{}
	cfg.Park = pl.park
	cfg.Blocked = []schema.Blocker{{Table: 1, Aggregate: schema.Aggregate{Type: "order", ID: "blocked"}, Position: schema.Position{CommitLSN: 1}}}
	h := start(t, cfg, prod, fixedPartitions(3))

	a, b := pmsg(1, "k"), pmsg(2, "k")
	b.Table = 1
	ownBlocked, otherBlocked := pmsg(3, "blocked"), pmsg(4, "blocked")
	otherBlocked.Table = 1
	publishAll(t, h.s, a, b, ownBlocked, otherBlocked)
	bad := pmsg(5, "k")
	bad.Table = 2
	if err := h.s.Publish(context.Background(), bad, 5); err == nil || !strings.Contains(err.Error(), "table 2, of a sink configured for 2") {
		t.Errorf("a message of table 2: %v; want it refused", err)
	}
	closeAndWait(t, h)

	mu.Lock()
	defer mu.Unlock()
	want := map[rec]bool{
		{"outbox.order", "walrelay", ""}:           true, // a, and table 0's "blocked": not blocked there
		{"billing.order", "billing", string(b.ID)}: true,
	}
	for _, r := range got {
		if !want[r] {
			t.Errorf("record %+v; want one of %v", r, want)
		}
	}
	if len(got) != 3 {
		t.Errorf("records: %d (%v); want 3: table 1's blocked aggregate parked behind its blocker", len(got), got)
	}
	dls := pl.get()
	if len(dls) != 1 || dls[0].Table != 1 || dls[0].Message != otherBlocked || dls[0].BlockedBy == nil {
		t.Errorf("dead letters: %+v; want table 1's message of the blocked aggregate, blocked", dls)
	}
	if topic := cfg.Topic(b); topic != "billing.order" {
		t.Errorf("Config.Topic of table 1's message: %q; want billing.order", topic)
	}
}

func TestSinkTablesValidated(t *testing.T) {
	cfg := testConfig()
	cfg.Tables = []TableConfig{{}, {TopicTemplate: "bad topic"}, {MessageIDHeader: "traceparent"}}
	err := cfg.withDefaults().validate()
	if err == nil || !strings.Contains(err.Error(), "table 1: topic template") || !strings.Contains(err.Error(), "table 2: ") {
		t.Errorf("validate: %v; want table 1's template and table 2's header named", err)
	}
}

// check's topics of several tables: each table's routes by its own
// template, all in one result; a table whose topics cannot be known yet
// makes it a warning, and the others' topics are still checked.
func TestTablesTopics(t *testing.T) {
	cfg := testConfig()
	cfg.Tables = []TableConfig{{TopicTemplate: "own.{aggregate_type}"}, {TopicTemplate: "billing.{type}"}, {TopicTemplate: "fixed"}}
	cfg = cfg.withDefaults()
	routes := []schema.Message{
		{AggregateType: "order", Type: "order.placed.v1"},
		{AggregateType: "invoice", Type: "invoice.issued.v1", Table: 1},
	}
	topics, known, res := tablesTopics(cfg, routes, nil)
	if want := []string{"billing.invoice.issued.v1", "fixed", "own.order"}; !known || res.Status != check.OK || strings.Join(topics, " ") != strings.Join(want, " ") {
		t.Errorf("tablesTopics: %v, known %v, %+v; want %v, known, ok", topics, known, res, want)
	}
	topics, known, res = tablesTopics(cfg, routes[:1], nil) // the billing table has no rows yet
	if !known || res.Status != check.Warn || !strings.Contains(res.Found, "table 2: template \"billing.{type}\" has placeholders and the outbox table has no rows") ||
		strings.Join(topics, " ") != "fixed own.order" {
		t.Errorf("tablesTopics without billing's rows: %v, known %v, %+v; want the others' topics and a warning naming table 2", topics, known, res)
	}
}
