package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

// parkLog is a Park callback that records what it was handed, in order.
// decide, when set, answers each call; otherwise every message is parked.
type parkLog struct {
	mu     sync.Mutex
	dls    []schema.DeadLetter
	decide func(dl schema.DeadLetter) (bool, error)
}

func (p *parkLog) park(_ context.Context, dl schema.DeadLetter) (bool, error) {
	parked, err := true, error(nil)
	if p.decide != nil {
		parked, err = p.decide(dl)
	}
	if parked && err == nil {
		p.mu.Lock()
		p.dls = append(p.dls, dl)
		p.mu.Unlock()
	}
	return parked, err
}

func (p *parkLog) get() []schema.DeadLetter {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]schema.DeadLetter(nil), p.dls...)
}

// pmsg is msg with a WAL position: commit LSN 1000+i.
func pmsg(i int, key string) *schema.Message {
	m := msg(i, key)
	m.CommitLSN = pglogrepl.LSN(1000 + i)
	m.CommitTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Second)
	return m
}

// writes is a producer that acknowledges every batch without bad, and
// refuses a batch holding bad as Kafka does: a partition error and a record
// error, nothing written; with maxBatch, it refuses a batch of more records
// whole, as too large. It records written values and every request's
// values.
type writes struct {
	bad      string
	maxBatch int

	mu       sync.Mutex
	written  []string
	requests [][]string
}

func (w *writes) producer(t *testing.T) *fakeProducer {
	return &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		_, vs := readRecords(t, req)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.requests = append(w.requests, vs)
		if w.maxBatch > 0 && len(vs) > w.maxBatch {
			return &kafka.ProduceResponse{Error: kafka.MessageSizeTooLarge}, nil
		}
		for i, v := range vs {
			if w.bad != "" && v == w.bad {
				return &kafka.ProduceResponse{Error: kafka.InvalidRecord, RecordErrors: map[int]error{i: errors.New("compacted topic needs a key")}}, nil
			}
		}
		w.written = append(w.written, vs...)
		return okResponse(), nil
	}}
}

func (w *writes) get() (written []string, requests [][]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.written...), append([][]string(nil), w.requests...)
}

// noProduce is a producer for tests that must not produce.
func noProduce(t *testing.T) *fakeProducer {
	return &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		t.Errorf("unexpected produce request")
		return okResponse(), nil
	}}
}

func value(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }

func publishAll(t *testing.T, s *Sink, ms ...*schema.Message) {
	t.Helper()
	for _, m := range ms {
		tok := uint64(m.CommitLSN - 1000)
		if err := s.Publish(context.Background(), m, tok); err != nil {
			t.Fatalf("Publish(token %d) = %v", tok, err)
		}
	}
}

func closeAndWait(t *testing.T, h *harness) {
	t.Helper()
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
}

func parkedCount(t *testing.T, h *harness, reason string) float64 {
	t.Helper()
	return metricValue(t, h.s.m.parked.WithLabelValues(reason))
}

// checkDeadLetter compares the fields of a sink-side dead letter.
func checkDeadLetter(t *testing.T, dl schema.DeadLetter, m *schema.Message, topic string, by *schema.Message) {
	t.Helper()
	if dl.Message != m || dl.Position != m.Position() || dl.MessageID == nil || *dl.MessageID != m.ID ||
		dl.Aggregate != (schema.Aggregate{Type: m.AggregateType, ID: m.AggregateID}) || dl.Topic != topic || !dl.CommitTime.Equal(m.CommitTime) {
		t.Errorf("dead letter = %+v; want message %s at %s, aggregate %s/%s, topic %s, commit time %v",
			dl, m.ID, m.Position(), m.AggregateType, m.AggregateID, topic, m.CommitTime)
	}
	switch {
	case by == nil && dl.BlockedBy != nil:
		t.Errorf("dead letter of %s: BlockedBy = %+v; want nil", m.ID, dl.BlockedBy)
	case by != nil && (dl.BlockedBy == nil || dl.BlockedBy.Position != by.Position() || dl.BlockedBy.MessageID == nil || *dl.BlockedBy.MessageID != by.ID):
		t.Errorf("dead letter of %s: BlockedBy = %+v; want message %s at %s", m.ID, dl.BlockedBy, by.ID, by.Position())
	case by != nil && dl.Reason != "blocked by "+by.ID.String():
		t.Errorf("dead letter of %s: reason %q; want %q", m.ID, dl.Reason, "blocked by "+by.ID.String())
	}
}

func TestParkPayloadOverLimitAckedOnlyAfterPark(t *testing.T) {
	w := &writes{}
	gate := make(chan struct{})
	var h *harness
	pl := &parkLog{decide: func(schema.DeadLetter) (bool, error) {
		<-gate
		return true, nil
	}}
	cfg := testConfig()
	cfg.MaxPayloadBytes = 12
	cfg.Park = pl.park
	h = start(t, cfg, w.producer(t), fixedPartitions(1))
	big := pmsg(1, "a")
	big.Payload = []byte(`{"i":1,"pad":"xxxxxx"}`)
	m2 := pmsg(2, "a")
	publishAll(t, h.s, pmsg(0, "a"), big, m2, pmsg(3, "b"))

	poll.Until(2*time.Second, time.Millisecond, func() bool { return len(h.acks.get()) >= 1 })
	time.Sleep(20 * time.Millisecond)
	if got := fmt.Sprint(h.acks.get()); got != "[0]" {
		t.Fatalf("acks while Park has not returned = %s; want [0] (token 1 waits for Park)", got)
	}
	close(gate)
	closeAndWait(t, h)

	if got := fmt.Sprint(h.acks.get()); got != "[0 1 2 3]" {
		t.Errorf("acks = %s; want [0 1 2 3]", got)
	}
	dls := pl.get()
	if len(dls) != 2 {
		t.Fatalf("parked %d messages; want 2", len(dls))
	}
	checkDeadLetter(t, dls[0], big, "outbox.order", nil)
	if want := "payload of 22 bytes is over the limit of 12 bytes (the maximum payload size)"; dls[0].Reason != want {
		t.Errorf("reason = %q; want %q", dls[0].Reason, want)
	}
	checkDeadLetter(t, dls[1], m2, "outbox.order", big)
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(0), value(3)}) {
		t.Errorf("written = %v; want messages 0 and 3 only", written)
	}
	if v := parkedCount(t, h, parkedTooLarge); v != 1 {
		t.Errorf("parked{payload_too_large} = %v; want 1", v)
	}
	if v := parkedCount(t, h, parkedBlocked); v != 1 {
		t.Errorf("parked{blocked} = %v; want 1", v)
	}
	if msgs, bytes := h.s.inflight.load(); msgs != 0 || bytes != 0 {
		t.Errorf("in flight after drain = %d, %d; want 0, 0 (parked messages free their room)", msgs, bytes)
	}
}

func TestParkIsolatesRefusedRecordInBatch(t *testing.T) {
	w := &writes{bad: value(2)}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Linger = time.Hour // one batch of 5, sent on Close
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	ms := []*schema.Message{pmsg(0, "a"), pmsg(1, "b"), pmsg(2, "a"), pmsg(3, "a"), pmsg(4, "b")}
	publishAll(t, h.s, ms...)
	closeAndWait(t, h)

	written, requests := w.get()
	if want := []string{value(0), value(1), value(4)}; fmt.Sprint(written) != fmt.Sprint(want) {
		t.Errorf("written = %v; want %v, each once, in order", written, want)
	}
	wantReq := fmt.Sprint([][]string{{value(0), value(1), value(2), value(3), value(4)}, {value(0)}, {value(1)}, {value(2)}, {value(4)}})
	if fmt.Sprint(requests) != wantReq {
		t.Errorf("requests = %v; want %v", requests, wantReq)
	}
	if got := fmt.Sprint(h.acks.get()); got != "[0 1 2 3 4]" {
		t.Errorf("acks = %s; want [0 1 2 3 4]", got)
	}
	dls := pl.get()
	if len(dls) != 2 {
		t.Fatalf("parked %d messages; want 2", len(dls))
	}
	checkDeadLetter(t, dls[0], ms[2], "outbox.order", nil)
	if !strings.Contains(dls[0].Reason, "[87] Invalid Record") || !strings.Contains(dls[0].Reason, "compacted topic needs a key") {
		t.Errorf("reason = %q; want Kafka's code and text", dls[0].Reason)
	}
	checkDeadLetter(t, dls[1], ms[3], "outbox.order", ms[2])
	if v := metricValue(t, h.s.m.published.WithLabelValues("outbox.order")); v != 3 {
		t.Errorf("published_messages_total = %v; want 3", v)
	}
	if v := parkedCount(t, h, parkedRefused); v != 1 {
		t.Errorf("parked{kafka_refused} = %v; want 1", v)
	}
}

// A batch refused as a whole (too large for the topic together) whose
// records are each fine: all go, one at a time, in order, none parked.
func TestParkIsolationWithoutCulprit(t *testing.T) {
	w := &writes{maxBatch: 1}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Linger = time.Hour
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	publishAll(t, h.s, pmsg(0, "a"), pmsg(1, "b"), pmsg(2, "a"))
	closeAndWait(t, h)
	written, _ := w.get()
	if want := []string{value(0), value(1), value(2)}; fmt.Sprint(written) != fmt.Sprint(want) {
		t.Errorf("written = %v; want %v", written, want)
	}
	if got := pl.get(); len(got) != 0 {
		t.Errorf("parked %d messages; want none", len(got))
	}
}

func TestParkErrorIsRetriedWithoutAck(t *testing.T) {
	var calls atomic.Int32
	var h *harness
	pl := &parkLog{}
	pl.decide = func(schema.DeadLetter) (bool, error) {
		if got := h.acks.get(); len(got) != 0 {
			t.Errorf("acks while parking = %v; want none", got)
		}
		if calls.Add(1) <= 3 {
			return false, errors.New("dead-letter table unreachable")
		}
		return true, nil
	}
	cfg := testConfig()
	cfg.MaxPayloadBytes = 5
	cfg.Park = pl.park
	h = start(t, cfg, noProduce(t), fixedPartitions(1))
	publishAll(t, h.s, pmsg(0, "a"))
	closeAndWait(t, h)
	if calls.Load() != 4 {
		t.Errorf("Park called %d times; want 4", calls.Load())
	}
	if got := fmt.Sprint(h.acks.get()); got != "[0]" {
		t.Errorf("acks = %s; want [0] once parked", got)
	}
	if v := metricValue(t, h.s.m.parkFailures); v != 3 {
		t.Errorf("park_failures_total = %v; want 3", v)
	}
}

func TestParkDeclinedForBlockedMessageProducesItInOrder(t *testing.T) {
	w := &writes{}
	var calls atomic.Int32
	pl := &parkLog{decide: func(dl schema.DeadLetter) (bool, error) {
		calls.Add(1)
		if dl.BlockedBy == nil {
			t.Errorf("Park asked to decline a message that is not blocked")
		}
		return false, nil // the operator retried the aggregate meanwhile
	}}
	cfg := testConfig()
	cfg.Linger = time.Hour
	cfg.Park = pl.park
	blocker := pmsg(5, "a")
	cfg.Blocked = []schema.Blocker{{Aggregate: schema.Aggregate{Type: "order", ID: "a"}, Position: blocker.Position(), MessageID: &blocker.ID}}
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	publishAll(t, h.s, pmsg(6, "a"), pmsg(7, "b"), pmsg(8, "a"))
	closeAndWait(t, h)
	if calls.Load() != 1 {
		t.Errorf("Park called %d times; want 1 (the block is dropped after the first decline)", calls.Load())
	}
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(6), value(7), value(8)}) {
		t.Errorf("written = %v; want 6, 7, 8 in order", written)
	}
	if got := fmt.Sprint(h.acks.get()); got != "[6 7 8]" {
		t.Errorf("acks = %s; want [6 7 8]", got)
	}
	if v := metricValue(t, h.s.m.blocked); v != 0 {
		t.Errorf("blocked_aggregates = %v; want 0", v)
	}
}

func TestParkBlockedAtStartBlocksLaterPositionsOnly(t *testing.T) {
	w := &writes{}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	blocker := pmsg(5, "a")
	cfg.Blocked = []schema.Blocker{
		{Aggregate: schema.Aggregate{Type: "order", ID: "a"}, Position: blocker.Position(), MessageID: &blocker.ID},
		{Aggregate: schema.Aggregate{Type: "order"}, Position: schema.Position{CommitLSN: 1}}, // no id: blocks nothing
	}
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	if v := metricValue(t, h.s.m.blocked); v != 1 {
		t.Errorf("blocked_aggregates = %v; want 1", v)
	}
	other := pmsg(6, "a")
	other.AggregateType, other.Topic = "invoice", "outbox.order" // same id and partition, other aggregate
	ms := []*schema.Message{pmsg(4, "a"), pmsg(5, "a"), other, pmsg(7, "a"), pmsg(8, "b")}
	publishAll(t, h.s, ms...)
	closeAndWait(t, h)
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(4), value(5), value(6), value(8)}) {
		t.Errorf("written = %v; want 4 and 5 (replays at or before the blocker), 6 (other aggregate) and 8", written)
	}
	dls := pl.get()
	if len(dls) != 1 {
		t.Fatalf("parked %d messages; want 1", len(dls))
	}
	checkDeadLetter(t, dls[0], ms[3], "outbox.order", blocker)
}

// badRow is a row that is not a message, as the decoder reports one.
type badRow struct {
	dl schema.DeadLetter
}

func (b badRow) Error() string {
	return "bad outbox row in transaction " + b.dl.Position.CommitLSN.String()
}
func (b badRow) DeadLetter() schema.DeadLetter { return b.dl }

func newBadRow(lsn int, aggregateID string) badRow {
	null, empty := (*string)(nil), ""
	return badRow{schema.DeadLetter{
		Position:  schema.Position{CommitLSN: pglogrepl.LSN(lsn)},
		Aggregate: schema.Aggregate{Type: "order", ID: aggregateID},
		Row:       map[string]*string{"aggregate_id": &empty, "payload": null},
		Reason:    "the decoder's reason",
	}}
}

// A bad row is parked at once, in the caller's order, and acked once
// parked; it blocks the later messages of its aggregate, not the earlier
// ones, nor other aggregates.
func TestPublishBadParksAndBlocks(t *testing.T) {
	w := &writes{}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	publishAll(t, h.s, pmsg(1, "a"))
	bad := newBadRow(1002, "a") // no message id
	if err := h.s.PublishBad(context.Background(), bad, 2); err != nil {
		t.Fatalf("PublishBad = %v; want nil", err)
	}
	if got := h.acks.get(); !slices.Contains(got, 2) {
		t.Errorf("acks after PublishBad = %v; want 2 among them (parked before it returned)", got)
	}
	publishAll(t, h.s, pmsg(3, "a"), pmsg(4, "b"))
	closeAndWait(t, h)
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(1), value(4)}) {
		t.Errorf("written = %v; want 1 and 4", written)
	}
	dls := pl.get()
	if len(dls) != 2 {
		t.Fatalf("dead letters = %+v; want the bad row and message 3", dls)
	}
	if row := dls[0]; row.Position != bad.dl.Position || row.Message != nil || row.MessageID != nil || row.Row["aggregate_id"] == nil ||
		row.Reason != bad.Error() || row.BlockedBy != nil {
		t.Errorf("dead letter of the bad row = %+v; want its position, columns and the error as reason", row)
	}
	if dl := dls[1]; dl.BlockedBy == nil || dl.BlockedBy.Position != bad.dl.Position || dl.Reason != "blocked by the row at 0/3EA#0" {
		t.Errorf("dead letter = %+v; want message 3 blocked by the row at 0/3EA#0", dl)
	}
	// The bad row was acked in the caller's order, the messages in their
	// partition's: only the set is fixed.
	got := h.acks.get()
	slices.Sort(got)
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("acks = %v; want 1, 2, 3 and 4", got)
	}
	if v := parkedCount(t, h, parkedBadRow); v != 1 {
		t.Errorf("parked bad rows = %v; want 1", v)
	}
}

// A bad row without an aggregate id is parked and blocks nothing.
func TestPublishBadWithoutAggregateBlocksNothing(t *testing.T) {
	w := &writes{}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	if err := h.s.PublishBad(context.Background(), newBadRow(1001, ""), 1); err != nil {
		t.Fatalf("PublishBad = %v; want nil", err)
	}
	publishAll(t, h.s, pmsg(2, "a"))
	closeAndWait(t, h)
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(2)}) {
		t.Errorf("written = %v; want 2", written)
	}
	if v := metricValue(t, h.s.m.blocked); v != 0 {
		t.Errorf("blocked_aggregates = %v; want 0", v)
	}
	if got := fmt.Sprint(h.acks.get()); got != "[1 2]" {
		t.Errorf("acks = %s; want [1 2]", got)
	}
}

// Storing a bad row is retried, checked against the Guard before each
// attempt, and acked only once stored.
func TestPublishBadRetriesUnderTheGuard(t *testing.T) {
	var calls, guards atomic.Int32
	var h *harness
	pl := &parkLog{decide: func(schema.DeadLetter) (bool, error) {
		if got := h.acks.get(); len(got) != 0 {
			t.Errorf("acks while parking = %v; want none", got)
		}
		if calls.Add(1) <= 2 {
			return false, errors.New("dead-letter table unreachable")
		}
		return true, nil
	}}
	cfg := testConfig()
	cfg.Park = pl.park
	cfg.Guard = func() error { guards.Add(1); return nil }
	h = start(t, cfg, noProduce(t), fixedPartitions(1))
	if err := h.s.PublishBad(context.Background(), newBadRow(1001, "a"), 1); err != nil {
		t.Fatalf("PublishBad = %v; want nil", err)
	}
	if calls.Load() != 3 || guards.Load() != 3 {
		t.Errorf("Park called %d times, Guard %d; want 3 and 3", calls.Load(), guards.Load())
	}
	if got := fmt.Sprint(h.acks.get()); got != "[1]" {
		t.Errorf("acks = %s; want [1]", got)
	}
	lost := errors.New("lease lost")
	cfg.Guard = func() error { return lost }
	h2 := start(t, cfg, noProduce(t), fixedPartitions(1))
	if err := h2.s.PublishBad(context.Background(), newBadRow(1002, "a"), 2); !errors.Is(err, lost) {
		t.Errorf("PublishBad without the lease = %v; want the Guard's error", err)
	}
	if got := h2.acks.get(); len(got) != 0 {
		t.Errorf("acks without the lease = %v; want none", got)
	}
}

func TestParkMissingTopicWithCreationOff(t *testing.T) {
	var creates, lookups atomic.Int32
	meta := &fakeMetadata{partitions: func(_ context.Context, topic string, create bool) (int, error) {
		if create {
			creates.Add(1)
		}
		if topic == "outbox.ghost" {
			lookups.Add(1)
			return 0, kafka.UnknownTopicOrPartition
		}
		return 1, nil
	}}
	w := &writes{}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.NoCreateTopics = true
	cfg.Park = pl.park
	h := start(t, cfg, w.producer(t), meta)
	h.s.createWait = 30 * time.Millisecond
	ghost := func(i int, key string) *schema.Message {
		m := pmsg(i, key)
		m.AggregateType = "ghost"
		return m
	}
	ms := []*schema.Message{ghost(0, "a"), ghost(1, "a"), pmsg(2, "a"), ghost(3, "b")}
	for i, m := range ms {
		if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
		if i == 0 && fmt.Sprint(h.acks.get()) != "[0]" {
			t.Errorf("acks after Publish(0) returned = %v; want [0]: parked and acked in the caller's order", h.acks.get())
		}
	}
	closeAndWait(t, h)
	if creates.Load() != 0 {
		t.Errorf("%d metadata requests allowed topic creation; want none", creates.Load())
	}
	dls := pl.get()
	if len(dls) != 3 {
		t.Fatalf("parked %d messages; want 3", len(dls))
	}
	checkDeadLetter(t, dls[0], ms[0], "outbox.ghost", nil)
	if !strings.Contains(dls[0].Reason, `topic "outbox.ghost" does not exist and topic creation is off`) || !strings.Contains(dls[0].Reason, "[3] Unknown Topic Or Partition") {
		t.Errorf("reason = %q; want the topic missing with creation off", dls[0].Reason)
	}
	checkDeadLetter(t, dls[1], ms[1], "outbox.ghost", ms[0])
	checkDeadLetter(t, dls[2], ms[3], "outbox.ghost", nil)
	if written, _ := w.get(); fmt.Sprint(written) != fmt.Sprint([]string{value(2)}) {
		t.Errorf("written = %v; want message 2 (another topic)", written)
	}
	if v := parkedCount(t, h, parkedTopicMissing); v != 2 {
		t.Errorf("parked{topic_missing} = %v; want 2", v)
	}
	got := h.acks.get()
	slices.Sort(got) // 2 went through its partition, 3 was parked at once
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("acks = %v; want 0, 1, 2 and 3 once each", got)
	}
	t.Logf("metadata lookups of the missing topic: %d", lookups.Load())
}

func TestParkMessageWithoutAggregateID(t *testing.T) {
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	h := start(t, cfg, noProduce(t), fixedPartitions(1))
	m := pmsg(0, "")
	publishAll(t, h.s, m)
	closeAndWait(t, h)
	dls := pl.get()
	if len(dls) != 1 || dls[0].Reason != errNoAggregateID.Error() || dls[0].BlockedBy != nil {
		t.Fatalf("dead letters = %+v; want one with reason %q", dls, errNoAggregateID)
	}
	if v := parkedCount(t, h, parkedBadRow); v != 1 {
		t.Errorf("parked{bad_row} = %v; want 1", v)
	}
	if v := metricValue(t, h.s.m.blocked); v != 0 {
		t.Errorf("blocked_aggregates = %v; want 0 (no id blocks nothing)", v)
	}
}

func TestParkNilFailsWithError(t *testing.T) {
	t.Run("payload over the limit", func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxPayloadBytes = 5
		h := start(t, cfg, noProduce(t), fixedPartitions(3))
		err := h.s.Publish(context.Background(), pmsg(0, "k"), 9)
		var perr *Error
		if !errors.As(err, &perr) || perr.Token != 9 || perr.Topic != "outbox.order" || perr.Partition != partitionFor("k", 3) ||
			!strings.Contains(err.Error(), "payload of 7 bytes is over the limit of 5 bytes (the maximum payload size)") {
			t.Fatalf("Publish = %v; want *Error naming token 9, its partition and the limit", err)
		}
		if err := h.wait(t); !errors.As(err, &perr) {
			t.Errorf("Run = %v; want the *Error", err)
		}
	})
	t.Run("blocked aggregate", func(t *testing.T) {
		cfg := testConfig()
		cfg.Blocked = []schema.Blocker{{Aggregate: schema.Aggregate{Type: "order", ID: "k"}, Position: schema.Position{CommitLSN: 1}}}
		h := start(t, cfg, noProduce(t), fixedPartitions(1))
		publishAll(t, h.s, pmsg(0, "k"))
		var perr *Error
		if err := h.wait(t); !errors.As(err, &perr) || perr.Token != 0 || !strings.Contains(err.Error(), "blocked by the row at 0/1#0") {
			t.Errorf("Run = %v; want *Error for token 0, blocked", err)
		}
		if got := h.acks.get(); len(got) != 0 {
			t.Errorf("acks = %v; want none", got)
		}
	})
	t.Run("bad row", func(t *testing.T) {
		h := start(t, testConfig(), noProduce(t), fixedPartitions(1))
		bad := newBadRow(1001, "k")
		err := h.s.PublishBad(context.Background(), bad, 3)
		var row badRow
		if !errors.As(err, &row) || !strings.Contains(err.Error(), "row at 0/3E9#0: "+bad.Error()) {
			t.Fatalf("PublishBad = %v; want the row's error, with its position", err)
		}
		if err := h.wait(t); !errors.As(err, &row) {
			t.Errorf("Run = %v; want the row's error", err)
		}
		if got := h.acks.get(); len(got) != 0 {
			t.Errorf("acks = %v; want none", got)
		}
	})
	t.Run("missing topic with creation off", func(t *testing.T) {
		meta := &fakeMetadata{partitions: func(_ context.Context, _ string, create bool) (int, error) {
			if create {
				t.Errorf("metadata request allowed topic creation")
			}
			return 0, kafka.UnknownTopicOrPartition
		}}
		cfg := testConfig()
		cfg.NoCreateTopics = true
		h := start(t, cfg, noProduce(t), meta)
		h.s.createWait = 20 * time.Millisecond
		err := h.s.Publish(context.Background(), pmsg(0, "k"), 4)
		var perr *Error
		if !errors.As(err, &perr) || perr.Token != 4 || perr.Partition != -1 || !errors.Is(err, kafka.UnknownTopicOrPartition) {
			t.Fatalf("Publish = %v; want *Error for token 4 wrapping UnknownTopicOrPartition", err)
		}
	})
}

// Park may decline only a blocked message; declining a first failure is a
// broken contract and fails the sink rather than losing the message.
func TestParkDeclinedFirstFailureFails(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPayloadBytes = 5
	cfg.Park = func(context.Context, schema.DeadLetter) (bool, error) { return false, nil }
	h := start(t, cfg, noProduce(t), fixedPartitions(1))
	publishAll(t, h.s, pmsg(0, "k"))
	var perr *Error
	if err := h.wait(t); !errors.As(err, &perr) || perr.Token != 0 {
		t.Errorf("Run = %v; want *Error for token 0", err)
	}
	if got := h.acks.get(); len(got) != 0 {
		t.Errorf("acks = %v; want none", got)
	}
}

func TestBlocks(t *testing.T) {
	a := schema.Aggregate{Type: "order", ID: "a"}
	at := func(lsn int) schema.Position { return schema.Position{CommitLSN: pglogrepl.LSN(lsn)} }
	m := func(lsn int, seq uint32) *schema.Message {
		return &schema.Message{AggregateType: "order", AggregateID: "a", CommitLSN: pglogrepl.LSN(lsn), Seq: seq}
	}
	b := newBlocks([]schema.Blocker{{Aggregate: a, Position: at(20)}}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"}))
	b.add(schema.Blocker{Aggregate: a, Position: at(30)}) // later: the earlier block stays
	b.add(schema.Blocker{Aggregate: schema.Aggregate{Type: "order"}, Position: at(1)})
	tests := []struct {
		m    *schema.Message
		want bool
	}{
		{m(19, 5), false}, {m(20, 0), false}, {m(20, 1), true}, {m(25, 0), true},
		{&schema.Message{AggregateType: "order", AggregateID: "b", CommitLSN: 99}, false},
		{&schema.Message{AggregateType: "order", CommitLSN: 99}, false},
	}
	for _, tt := range tests {
		if x, got := b.blocking(tt.m); got != tt.want || got && x.Position != at(20) {
			t.Errorf("blocking(%s/%s at %s) = %v, %v; want %v by 0/14#0", tt.m.AggregateType, tt.m.AggregateID, tt.m.Position(), x.Position, got, tt.want)
		}
	}
	b.add(schema.Blocker{Aggregate: a, Position: at(10)}) // earlier: replaces
	if _, got := b.blocking(m(15, 0)); !got {
		t.Errorf("blocking at 15 after a block at 10 = false; want true")
	}
	b.lift(schema.Blocker{Aggregate: a, Position: at(20)}) // not the blocker any more
	if _, got := b.blocking(m(15, 0)); !got {
		t.Errorf("lifting a replaced blocker lifted the block")
	}
	b.lift(schema.Blocker{Aggregate: a, Position: at(10)})
	if _, got := b.blocking(m(99, 0)); got {
		t.Errorf("blocking after lift = true; want false")
	}
	if v := metricValue(t, b.gauge); v != 0 {
		t.Errorf("gauge = %v; want 0", v)
	}
}

func TestParkedMetricStartsAtZeroForEveryReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	mustMetrics(t, reg)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "walrelay_parked_messages_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"kafka_refused": 0, "payload_too_large": 0, "topic_missing": 0, "topic_refused": 0, "blocked": 0, "bad_row": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("walrelay_parked_messages_total = %v; want %v", got, want)
	}
}
