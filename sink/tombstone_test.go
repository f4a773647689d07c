package sink

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walrelay/walrelay/schema"
)

// sentRecord is a record as a fake producer received it: a nil value is
// a null (a tombstone).
type sentRecord struct {
	key     string
	value   []byte
	headers map[string]string
}

// sentRecords reads a produce request's records, keeping null values nil.
func sentRecords(t *testing.T, req *kafka.ProduceRequest) []sentRecord {
	t.Helper()
	var out []sentRecord
	for {
		r, err := req.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("ReadRecord: %v", err)
		}
		k, _ := io.ReadAll(r.Key)
		sr := sentRecord{key: string(k), headers: headerMap(t, r.Headers)}
		if r.Value != nil {
			if sr.value, err = io.ReadAll(r.Value); sr.value == nil {
				sr.value = []byte{}
			}
		}
		out = append(out, sr)
	}
}

// tombstone is pmsg(i, key) with a NULL payload decoded as a tombstone.
func tombstone(i int, key string) *schema.Message {
	m := pmsg(i, key)
	m.Payload, m.ContentType, m.Tombstone = nil, "", true
	return m
}

// A tombstone goes out as a record with a null value, the usual key and
// headers but no content-type, in order among its aggregate's messages,
// and is acknowledged like any other; an empty payload stays an empty
// value.
func TestTombstoneIsARecordWithANullValue(t *testing.T) {
	var mu sync.Mutex
	var sent []sentRecord
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		rs := sentRecords(t, req)
		mu.Lock()
		sent = append(sent, rs...)
		mu.Unlock()
		return okResponse(), nil
	}}
	h := start(t, testConfig(), prod, fixedPartitions(1))
	first, dead, empty := pmsg(0, "a"), tombstone(1, "a"), pmsg(2, "a")
	first.ContentType, empty.ContentType, empty.Payload = "application/json", "text/plain; charset=utf-8", []byte{}
	publishAll(t, h.s, first, dead, empty)
	closeAndWait(t, h)

	if got := h.acks.get(); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("acks %v; want [0 1 2]", got)
	}
	if len(sent) != 3 {
		t.Fatalf("%d records sent; want 3", len(sent))
	}
	if sent[0].value == nil || string(sent[0].value) != value(0) || sent[0].headers["content-type"] != "application/json" {
		t.Errorf("first record: value %q, content-type %q; want %s, application/json", sent[0].value, sent[0].headers["content-type"], value(0))
	}
	tomb := sent[1]
	if tomb.value != nil || tomb.key != "a" {
		t.Errorf("tombstone: key %q, value %q (nil %v); want key a, a null value", tomb.key, tomb.value, tomb.value == nil)
	}
	if ct, ok := tomb.headers["content-type"]; ok {
		t.Errorf("tombstone has content-type %q; want none", ct)
	}
	if tomb.headers["ce_id"] != dead.ID.String() || tomb.headers["ce_type"] != dead.Type || tomb.headers["aggregate_type"] != "order" {
		t.Errorf("tombstone headers %v; want ce_id %s, ce_type %s, aggregate_type order", tomb.headers, dead.ID, dead.Type)
	}
	if sent[2].value == nil || len(sent[2].value) != 0 {
		t.Errorf("empty payload: value %q (nil %v); want an empty, non-null value", sent[2].value, sent[2].value == nil)
	}
}

// A tombstone whose payload is set anyway (a message changed after
// decoding) still has a null value; its size and wire estimate count no
// payload.
func TestNewRecordOfATombstone(t *testing.T) {
	m := testMessage()
	m.Tombstone, m.ContentType = true, ""
	r, _ := newRecord(m, 1, recordHeaders{source: "walrelay"}, time.Now())
	if r.value != nil {
		t.Errorf("value %q; want nil", r.value)
	}
	m.Payload = nil
	r, _ = newRecord(m, 1, recordHeaders{source: "walrelay"}, time.Now())
	if r.size != m.Size() || r.size != len(m.AggregateType)+len(m.AggregateID)+len(m.Type)+len("traceparent")+len("00-abc-def-01") {
		t.Errorf("size %d; want Message.Size() %d, without a payload", r.size, m.Size())
	}
	if _, ok := headerMap(t, r.headers)["content-type"]; ok {
		t.Error("tombstone record has a content-type header; want none")
	}
}

// A tombstone Kafka refuses for good is parked as itself, a message with
// Tombstone set and no payload, so that a retry publishes a tombstone again.
func TestTombstoneRefusedIsParkedAsATombstone(t *testing.T) {
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		for i, r := range sentRecords(t, req) {
			if r.value == nil {
				return &kafka.ProduceResponse{Error: kafka.InvalidRecord, RecordErrors: map[int]error{i: errors.New("no null values here")}}, nil
			}
		}
		return okResponse(), nil
	}}
	pl := &parkLog{}
	cfg := testConfig()
	cfg.Park = pl.park
	h := start(t, cfg, prod, fixedPartitions(1))
	dead := tombstone(1, "a")
	publishAll(t, h.s, pmsg(0, "a"), dead, pmsg(2, "b"))
	closeAndWait(t, h)

	dls := pl.get()
	if len(dls) != 1 {
		t.Fatalf("%d dead letters; want the tombstone's", len(dls))
	}
	checkDeadLetter(t, dls[0], dead, "outbox.order", nil)
	if !dls[0].Message.Tombstone || dls[0].Message.Payload != nil {
		t.Errorf("parked message: tombstone %v, payload %q; want a tombstone without a payload", dls[0].Message.Tombstone, dls[0].Message.Payload)
	}
	if got := parkedCount(t, h, parkedRefused); got != 1 {
		t.Errorf("parked kafka_refused = %v; want 1", got)
	}
	if got := h.acks.get(); len(got) != 3 {
		t.Errorf("acks %v; want all three", got)
	}
}

// Entries of the headers column that would not read as CloudEvents
// attributes are left out of the record, which is published; each is
// counted by reason, and logged at most once a minute per header key.
func TestDroppedHeadersAreCountedAndLoggedWithinALimit(t *testing.T) {
	var mu sync.Mutex
	var sent []sentRecord
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		rs := sentRecords(t, req)
		mu.Lock()
		sent = append(sent, rs...)
		mu.Unlock()
		return okResponse(), nil
	}}
	core, logs := observer.New(zapcore.WarnLevel)
	h := startWith(t, testConfig(), prod, fixedPartitions(1), func(s *Sink) { s.log = zap.New(core) })
	bad := []schema.Header{
		{Key: "CE_ID", Value: "forged"},
		{Key: "ce_Bad-Name", Value: "x"},
		{Key: "ce_datacontenttype", Value: "text/plain"},
		{Key: "ce_dataschema", Value: "not a uri"},
		{Key: "ce_tenant", Value: "acme"},
		{Key: "tenant", Value: "acme"},
	}
	for i := range 5 {
		m := pmsg(i, "a")
		m.Headers = bad
		m.SpanContextDrops = []string{"traceparent"}
		publishAll(t, h.s, m)
	}
	closeAndWait(t, h)

	if len(sent) != 5 || len(h.acks.get()) != 5 {
		t.Fatalf("%d records sent, %d acked; want 5 and 5", len(sent), len(h.acks.get()))
	}
	for _, r := range sent {
		if r.headers["ce_tenant"] != "acme" || r.headers["tenant"] != "acme" || r.headers["ce_id"] == "forged" {
			t.Errorf("headers %v; want ce_tenant and tenant kept, ce_id walrelay's", r.headers)
		}
		for _, k := range []string{"ce_Bad-Name", "ce_datacontenttype", "ce_dataschema"} {
			if _, ok := r.headers[k]; ok {
				t.Errorf("header %s kept; want it dropped", k)
			}
		}
	}
	for reason, want := range map[schema.HeaderDrop]float64{
		schema.DropReserved: 5, schema.DropInvalidName: 5, schema.DropDataContentType: 5, schema.DropInvalidValue: 5,
		schema.DropSpanContext: 5,
	} {
		if got := metricValue(t, h.s.m.headersDropped.WithLabelValues(string(reason))); got != want {
			t.Errorf("walrelay_headers_dropped_total{reason=%q} = %v; want %v", reason, got, want)
		}
	}
	entries := logs.FilterMessageSnippet("header of the headers column dropped").All()
	if len(entries) != 4 {
		t.Fatalf("%d log lines; want 4: each dropped key once within the minute", len(entries))
	}
	first := entries[0].ContextMap()
	if first["message_id"] != pmsg(0, "a").ID.String() || first["aggregate_id"] != "a" || first["header"] != "CE_ID" || first["reason"] != "reserved" {
		t.Errorf("first line %v; want message %s, aggregate_id a, header CE_ID, reason reserved", first, pmsg(0, "a").ID)
	}
	trace := logs.FilterMessageSnippet("trace header of the span context column dropped").All()
	if len(trace) != 1 || trace[0].ContextMap()["header"] != "traceparent" || trace[0].ContextMap()["reason"] != "span_context" {
		t.Errorf("span context lines %v; want one, header traceparent, reason span_context", trace)
	}
}

// dropLog logs a key's first drop, then at most one a minute with the
// number left out since.
func TestDropLogOncePerKeyAMinute(t *testing.T) {
	var l dropLog
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		key        string
		at         time.Duration
		log        bool
		suppressed int
	}{
		{"ce_Bad", 0, true, 0},
		{"ce_Bad", time.Second, false, 0},
		{"ce_datacontenttype", 2 * time.Second, true, 0},
		{"ce_Bad", 59 * time.Second, false, 0},
		{"ce_Bad", 60 * time.Second, true, 2},
		{"ce_Bad", 61 * time.Second, false, 0},
		{"ce_Bad", 3 * time.Minute, true, 1},
	} {
		log, n := l.due(step.key, t0.Add(step.at))
		if log != step.log || n != step.suppressed {
			t.Errorf("due(%s, +%v) = %v, %d; want %v, %d", step.key, step.at, log, n, step.log, step.suppressed)
		}
	}
}

func TestDropLogForgetsPastItsBound(t *testing.T) {
	var l dropLog
	now := time.Now()
	for i := range maxDropKeys + 10 {
		if ok, _ := l.due(string(rune('a'+i%26))+time.Duration(i).String(), now); !ok {
			t.Fatalf("first drop of key %d not logged", i)
		}
	}
	if len(l.keys) > maxDropKeys {
		t.Errorf("%d keys remembered; want at most %d", len(l.keys), maxDropKeys)
	}
}
