package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// retryRig is a test's own dead-letter table and Kafka topic, removed in
// t.Cleanup, with a Store over the table and a sink publisher to the topic.
type retryRig struct {
	t       *testing.T
	db      *pgxpool.Pool
	store   *dlq.Store
	brokers []string
	topic   string
	pub     *sink.ListPublisher
}

func newRetryRig(t *testing.T, topicConfig ...kafka.ConfigEntry) *retryRig {
	t.Helper()
	pg := pgtest.New(t, "outbox_dlqcmd_")
	brokers := rig.KafkaBrokers(t)
	r := &retryRig{t: t, db: pg.Pool, brokers: strings.Split(brokers, ","), topic: rig.Unique("walrelay-dlq-")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := schema.DefaultConfig()
	cfg.Table.Name = pg.Name
	table := cfg.DeadLetterTable()
	pg.DropTable(table.Quoted())
	if err := slot.EnsureDeadLetterTable(ctx, r.db, cfg); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.store, err = dlq.New(r.db, table); err != nil {
		t.Fatal(err)
	}
	kafkatest.CreateTopic(t, brokers, r.topic, 3, topicConfig...)
	o := defaultOptions()
	o.KafkaBrokers, o.Sink.TopicTemplate, o.Sink.Source = brokers, r.topic, "walrelay-dlq-test"
	sc, err := o.sinkConfig()
	if err != nil {
		t.Fatal(err)
	}
	r.pub = &sink.ListPublisher{Config: sc, Log: zaptest.NewLogger(t)}
	return r
}

// message is the n-th message of aggregate agg, with a payload of size
// bytes (a JSON string) when size is positive.
func testMessage(n int, agg string, size int) *schema.Message {
	payload := fmt.Sprintf(`{"n":%d}`, n)
	if size > 0 {
		payload = `"` + strings.Repeat("x", size-2) + `"`
	}
	m := &schema.Message{
		AggregateType: "order", AggregateID: agg, AggregateVersion: int64(n), HasVersion: true,
		Type: "order.changed.v1", Payload: []byte(payload), ContentType: "application/json",
		Headers:    []schema.Header{{Key: "traceparent", Value: fmt.Sprintf("00-%032x-%016x-01", n, n)}},
		OccurredAt: time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC),
		CommitLSN:  pglogrepl.LSN(0x3000000 + n*0x100), Seq: uint32(n % 2),
	}
	m.ID = schema.MessageID(fmt.Sprintf("%04x0000-0000-4000-8000-000000000077", n&0xffff))
	return m
}

// park parks msgs as one aggregate: the first refused, the others behind.
func (r *retryRig) park(msgs ...*schema.Message) {
	r.t.Helper()
	for i, m := range msgs {
		dl := schema.DeadLetter{Position: m.Position(), Message: m, Topic: r.topic, Reason: "kafka refused the record"}
		if i > 0 {
			dl.BlockedBy = &schema.Blocker{Position: msgs[0].Position(), MessageID: &msgs[0].ID}
			dl.Reason = "blocked by " + msgs[0].ID.String()
		}
		if ok, err := r.store.Park(context.Background(), dl); err != nil || !ok {
			r.t.Fatalf("Park(%s) = %v, %v; want true", dl.Position, ok, err)
		}
	}
}

// read returns the topic's records with key agg, in the order kcat read
// them, with kcat, a client that shares no code with the sink.
func (r *retryRig) read(agg string) []kafkatest.Record {
	r.t.Helper()
	var recs []kafkatest.Record
	for _, rec := range kafkatest.Read(r.t, strings.Join(r.brokers, ","), r.topic) {
		if rec.Key != nil && *rec.Key == agg {
			recs = append(recs, rec)
		}
	}
	return recs
}

// checkRecords compares what Kafka holds for an aggregate with msgs, in
// order: same message ids, payloads and headers.
func (r *retryRig) checkRecords(agg string, msgs ...*schema.Message) {
	r.t.Helper()
	got := r.read(agg)
	if len(got) != len(msgs) {
		r.t.Fatalf("aggregate %s: %d records in Kafka; want %d", agg, len(got), len(msgs))
	}
	for i, rec := range got {
		m := msgs[i]
		if id := rec.Headers["ce_id"]; id != m.ID.String() {
			r.t.Errorf("aggregate %s record %d: ce_id %s; want %s (original order and identity)", agg, i, id, m.ID)
		}
		if rec.Payload == nil || *rec.Payload != string(m.Payload) {
			r.t.Errorf("aggregate %s record %d: payload differs from the parked one", agg, i)
		}
		if tp := rec.Headers["traceparent"]; tp != m.Headers[0].Value {
			r.t.Errorf("aggregate %s record %d: traceparent %q; want %q", agg, i, tp, m.Headers[0].Value)
		}
		if v := rec.Headers["aggregate_version"]; v != strconv.FormatInt(m.AggregateVersion, 10) {
			r.t.Errorf("aggregate %s record %d: aggregate_version %q; want %d", agg, i, v, m.AggregateVersion)
		}
	}
}

func (r *retryRig) parked() []dlq.Entry {
	r.t.Helper()
	es, err := r.store.List(context.Background(), dlq.Filter{})
	if err != nil {
		r.t.Fatal(err)
	}
	return es
}

func TestRetryThroughKafkaKeepsOrderAndIdentity(t *testing.T) {
	r := newRetryRig(t)
	ctx := context.Background()
	a := []*schema.Message{testMessage(1, "A", 0), testMessage(2, "A", 0), testMessage(3, "A", 0), testMessage(5, "A", 0)}
	b := []*schema.Message{testMessage(4, "B", 0)}
	r.park(a...)
	r.park(b...)

	_, err := r.store.Retry(ctx, dlq.Selection{MessageID: &a[1].ID}, r.pub)
	var nf *dlq.NotFirstError
	if !errors.As(err, &nf) {
		t.Fatalf("Retry of the second message of A = %v; want *NotFirstError", err)
	}
	if got := r.read("A"); len(got) != 0 {
		t.Fatalf("a refused retry published %d records", len(got))
	}

	agg := schema.Aggregate{Type: "order", ID: "A"}
	res, err := r.store.Retry(ctx, dlq.Selection{Aggregate: &agg}, r.pub)
	if err != nil || len(res.Published) != len(a) || len(res.Left) != 0 {
		t.Fatalf("Retry(order/A) = %+v, %v; want %d published", res, err, len(a))
	}
	r.checkRecords("A", a...)
	if es := r.parked(); len(es) != 1 || es[0].Aggregate.ID != "B" {
		t.Errorf("parked after the retry: %v; want only B's message", positionsOf(es))
	}
}

func TestRetryThroughKafkaFailsThenSucceedsAfterTheFix(t *testing.T) {
	r := newRetryRig(t, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: "4096"})
	ctx := context.Background()
	a := []*schema.Message{testMessage(1, "A", 10000), testMessage(2, "A", 0), testMessage(3, "A", 0)}
	r.park(a...)

	res, err := r.store.Retry(ctx, dlq.Selection{All: true}, r.pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Published) != 0 || len(res.Left) != 3 || !errors.Is(res.PublishErr, kafka.MessageSizeTooLarge) {
		t.Fatalf("Retry over the topic's limit = %+v; want all left, MessageSizeTooLarge", res)
	}
	es := r.parked()
	if len(es) != 3 {
		t.Fatalf("parked after the failed retry: %d rows; want 3", len(es))
	}
	for _, e := range es {
		if e.Retries != 1 || e.LastError == "" {
			t.Errorf("row %s: retries %d, last_error %q; want 1 and the error", e.Position, e.Retries, e.LastError)
		}
	}
	if got := r.read("A"); len(got) != 0 {
		t.Fatalf("%d records in Kafka after the failed retry; want none", len(got))
	}

	r.raiseLimit()
	res, err = r.store.Retry(ctx, dlq.Selection{All: true}, r.pub)
	if err != nil || len(res.Published) != 3 || len(res.Left) != 0 {
		t.Fatalf("Retry after raising the limit = %+v, %v; want 3 published", res, err)
	}
	r.checkRecords("A", a...)
	if es := r.parked(); len(es) != 0 {
		t.Errorf("parked after the retry: %v; want none", positionsOf(es))
	}
}

// raiseLimit lifts the topic's max.message.bytes: the operator's fix.
func (r *retryRig) raiseLimit() {
	r.t.Helper()
	kafkatest.SetTopicConfig(r.t, strings.Join(r.brokers, ","), r.topic, "max.message.bytes", "1048588")
}

func positionsOf(es []dlq.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Position.String())
	}
	return out
}
