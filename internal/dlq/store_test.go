package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/schema"
)

var (
	orderA = schema.Aggregate{Type: "order", ID: "A"}
	orderB = schema.Aggregate{Type: "order", ID: "B"}
	userA  = schema.Aggregate{Type: "user", ID: "A"}
)

func TestParkIsIdempotent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(0, orderA))
	again := parked(0, orderA)
	again.Reason = "a replay with another reason"
	ok, err := f.store.Park(ctx, again)
	if err != nil || !ok {
		t.Fatalf("Park of the same position again = %v, %v; want true, nil", ok, err)
	}
	es, err := f.store.List(ctx, dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Reason != parked(0, orderA).Reason {
		t.Fatalf("List = %+v; want one row with the first reason", es)
	}
}

func TestParkStoresEveryField(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dl := behind(1, orderA, 0)
	dl.Message.Topic = "special.orders"
	f.park(parked(0, orderA), dl, undecodable(2, orderB))

	var topic, target, contentType, reason string
	var payload, headers []byte
	var version int64
	var occurred, committed time.Time
	err := f.db.QueryRow(ctx, `SELECT topic, target_topic, content_type, reason, payload, headers, aggregate_version,
		occurred_at, committed_at FROM `+f.table.Quoted()+` WHERE message_id = $1`, id(1).String()).
		Scan(&topic, &target, &contentType, &reason, &payload, &headers, &version, &occurred, &committed)
	if err != nil {
		t.Fatal(err)
	}
	m := dl.Message
	if topic != m.Topic || target != dl.Topic || contentType != m.ContentType || reason != dl.Reason ||
		string(payload) != string(m.Payload) || version != m.AggregateVersion ||
		!occurred.Equal(m.OccurredAt) || !committed.Equal(m.CommitTime) {
		t.Errorf("stored topic=%q target=%q content_type=%q reason=%q payload=%q version=%d occurred=%v committed=%v; want %q %q %q %q %q %d %v %v",
			topic, target, contentType, reason, payload, version, occurred, committed,
			m.Topic, dl.Topic, m.ContentType, dl.Reason, m.Payload, m.AggregateVersion, m.OccurredAt, m.CommitTime)
	}
	var gotHeaders map[string]string
	if err := json.Unmarshal(headers, &gotHeaders); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"correlation_id": "c-1", "traceparent": "00-abc-def-01"}; !reflect.DeepEqual(gotHeaders, want) {
		t.Errorf("headers = %v; want %v", gotHeaders, want)
	}

	es, err := f.store.List(ctx, dlq.Filter{AggregateID: "A"})
	if err != nil || len(es) != 2 {
		t.Fatalf("List(aggregate A) = %d entries, %v; want 2", len(es), err)
	}
	if e := es[1]; e.BlockedBy == nil || *e.BlockedBy != id(0) || e.PayloadBytes == nil || *e.PayloadBytes != len(m.Payload) ||
		e.Undecodable || e.Status != dlq.Parked || e.Retries != 0 || e.Position != pos(1) {
		t.Errorf("entry = %+v; want blocked by %s, payload size %d, parked at %s", e, id(0), len(m.Payload), pos(1))
	}

	var rowData []byte
	var msgID *string
	if err := f.db.QueryRow(ctx, `SELECT row_data, message_id::text FROM `+f.table.Quoted()+` WHERE aggregate_id = 'B'`).
		Scan(&rowData, &msgID); err != nil {
		t.Fatal(err)
	}
	var row map[string]*string
	if err := json.Unmarshal(rowData, &row); err != nil {
		t.Fatal(err)
	}
	if len(row) != 3 || row["topic"] != nil || row["payload"] == nil || *row["payload"] != "{not json" || msgID != nil {
		t.Errorf("undecodable row: row_data %s, message_id %v; want its three columns (topic null) and no message id", rowData, msgID)
	}
}

func TestBlockedParkDependsOnWhatIsParkedAhead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(3, orderA))

	if ok, err := f.store.Park(ctx, behind(4, orderA, 3)); err != nil || !ok {
		t.Errorf("Park behind a parked message = %v, %v; want true", ok, err)
	}
	// A position before the blocker has nothing parked ahead of it.
	if ok, err := f.store.Park(ctx, behind(2, orderA, 3)); err != nil || ok {
		t.Errorf("Park before the first parked message = %v, %v; want false", ok, err)
	}
	// Another aggregate's parked rows do not count.
	if ok, err := f.store.Park(ctx, behind(5, orderB, 3)); err != nil || ok {
		t.Errorf("Park behind another aggregate's message = %v, %v; want false", ok, err)
	}

	n, err := f.store.Discard(ctx, dlq.Selection{Aggregate: &orderA}, "test")
	if err != nil || n != 2 {
		t.Fatalf("Discard(order/A) = %d, %v; want 2", n, err)
	}
	if ok, err := f.store.Park(ctx, behind(6, orderA, 3)); err != nil || ok {
		t.Errorf("Park behind discarded messages = %v, %v; want false", ok, err)
	}

	f.park(parked(7, userA))
	if _, err := f.store.Retry(ctx, dlq.Selection{Aggregate: &userA}, &fakePublisher{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.store.Park(ctx, behind(8, userA, 7)); err != nil || ok {
		t.Errorf("Park behind a message retried (deleted) = %v, %v; want false", ok, err)
	}
	if got := f.count("parked"); got != 0 {
		t.Errorf("parked rows = %d; want 0 (a Park that returns false stores nothing)", got)
	}
}

func TestBlockers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	noID := schema.Aggregate{Type: "order"}
	f.park(parked(1, orderB), behind(2, orderB, 1), parked(3, orderA), behind(4, orderA, 3),
		parked(5, userA), undecodable(6, noID), parked(7, schema.Aggregate{Type: "gone", ID: "X"}))
	if _, err := f.store.Discard(ctx, dlq.Selection{Position: ptr(pos(3))}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Discard(ctx, dlq.Selection{Aggregate: &schema.Aggregate{Type: "gone", ID: "X"}}, "test"); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Blockers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id4, id1, id5 := id(4), id(1), id(5)
	want := []schema.Blocker{
		{Aggregate: orderA, Position: pos(4), MessageID: &id4},
		{Aggregate: orderB, Position: pos(1), MessageID: &id1},
		{Aggregate: userA, Position: pos(5), MessageID: &id5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Blockers = %s; want %s", blockersText(got), blockersText(want))
	}
}

func blockersText(bs []schema.Blocker) string {
	s := ""
	for _, b := range bs {
		s += fmt.Sprintf("[%s/%s %s %v] ", b.Aggregate.Type, b.Aggregate.ID, b.Position, b.MessageID)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestListFilters(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderB), behind(2, orderB, 1), parked(3, orderA), parked(4, userA), undecodable(5, userA))
	if _, err := f.db.Exec(ctx, `UPDATE `+f.table.Quoted()+` SET parked_at = now() - interval '2 hours'
		WHERE message_id IN ($1, $2)`, id(1).String(), id(3).String()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Discard(ctx, dlq.Selection{MessageID: ptr(id(4))}, "duplicate"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter dlq.Filter
		want   []schema.Position
	}{
		{"parked by default, by aggregate then position", dlq.Filter{}, []schema.Position{pos(3), pos(1), pos(2), pos(5)}},
		{"aggregate type", dlq.Filter{AggregateType: "order"}, []schema.Position{pos(3), pos(1), pos(2)}},
		{"aggregate", dlq.Filter{AggregateType: "order", AggregateID: "B"}, []schema.Position{pos(1), pos(2)}},
		{"type", dlq.Filter{Type: "order.changed.v1"}, []schema.Position{pos(3), pos(1), pos(2)}},
		{"reason, any case", dlq.Filter{Reason: "BLOCKED by"}, []schema.Position{pos(2)}},
		{"older than", dlq.Filter{OlderThan: time.Hour}, []schema.Position{pos(3), pos(1)}},
		{"newer than", dlq.Filter{NewerThan: time.Hour}, []schema.Position{pos(2), pos(5)}},
		{"discarded", dlq.Filter{Status: dlq.Discarded}, []schema.Position{pos(4)}},
		{"limit", dlq.Filter{Limit: 2}, []schema.Position{pos(3), pos(1)}},
		{"combined", dlq.Filter{AggregateType: "order", NewerThan: time.Hour}, []schema.Position{pos(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := f.store.List(ctx, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got := positions(es); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("List(%+v) = %v; want %v", tc.filter, got, tc.want)
			}
		})
	}
	es, err := f.store.List(ctx, dlq.Filter{Status: dlq.Discarded})
	if err != nil || len(es) != 1 {
		t.Fatalf("List(discarded) = %v, %v", es, err)
	}
	if e := es[0]; e.DiscardReason != "duplicate" || e.DiscardedAt.IsZero() || e.Status != dlq.Discarded {
		t.Errorf("discarded entry: reason %q at %v status %s; want duplicate, a time, discarded", e.DiscardReason, e.DiscardedAt, e.Status)
	}
	if _, err := f.store.List(ctx, dlq.Filter{Status: "gone"}); err == nil {
		t.Error("List with status gone = nil error; want an error")
	}
}

func TestDiscard(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderA), behind(2, orderA, 1), parked(3, orderB), parked(4, userA), parked(5, userA))

	if n, err := f.store.Discard(ctx, dlq.Selection{All: true}, "  "); !errors.Is(err, dlq.ErrNoReason) || n != 0 {
		t.Errorf("Discard without a reason = %d, %v; want 0, ErrNoReason", n, err)
	}
	if got := f.count("parked"); got != 5 {
		t.Fatalf("parked rows after a refused discard = %d; want 5", got)
	}
	for _, sel := range []dlq.Selection{{}, {All: true, MessageID: ptr(id(1))}} {
		if _, err := f.store.Discard(ctx, sel, "x"); err == nil {
			t.Errorf("Discard(%+v) = nil error; want one choice required", sel)
		}
	}
	for _, tc := range []struct {
		sel  dlq.Selection
		want int
	}{
		{dlq.Selection{MessageID: ptr(id(3))}, 1},
		{dlq.Selection{MessageID: ptr(id(3))}, 0}, // already discarded
		{dlq.Selection{Position: ptr(pos(4))}, 1},
		{dlq.Selection{Aggregate: &orderA}, 2},
		{dlq.Selection{All: true}, 1},
	} {
		n, err := f.store.Discard(ctx, tc.sel, "bad data, fixed by a new row")
		if err != nil || n != tc.want {
			t.Errorf("Discard(%s) = %d, %v; want %d", tc.sel, n, err, tc.want)
		}
	}
	if parked, discarded := f.count("parked"), f.count("discarded"); parked != 0 || discarded != 5 {
		t.Errorf("parked %d, discarded %d; want 0 and 5 (discarded rows are kept)", parked, discarded)
	}
}

// A replay parks rows that are in the table already: a discarded row stays
// discarded and is reported as handled (true), blocked or not.
func TestParkAgainAfterDiscardLeavesTheRowDiscarded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderA), behind(2, orderA, 1))
	if _, err := f.store.Discard(ctx, dlq.Selection{Aggregate: &orderA}, "given up"); err != nil {
		t.Fatal(err)
	}
	for _, dl := range []schema.DeadLetter{parked(1, orderA), behind(2, orderA, 1)} {
		ok, err := f.store.Park(ctx, dl)
		if err != nil || !ok {
			t.Errorf("Park(%s) again after its discard = %v, %v; want true (handled, not to be published)", dl.Position, ok, err)
		}
	}
	if parked, discarded := f.count("parked"), f.count("discarded"); parked != 0 || discarded != 2 {
		t.Errorf("parked %d, discarded %d; want 0 and 2", parked, discarded)
	}
}
