package sink

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
)

func testMessage() *schema.Message {
	return &schema.Message{
		ID:               "f47ac10b-58cc-4372-a567-0e02b3c479d0",
		AggregateType:    "order",
		AggregateID:      "order-42",
		AggregateVersion: 7,
		HasVersion:       true,
		Type:             "order.submitted.v1",
		Payload:          []byte(`{"total":12}`),
		ContentType:      "application/json",
		Headers:          []schema.Header{{Key: "traceparent", Value: "00-abc-def-01"}},
		OccurredAt:       time.Date(2024, 5, 6, 9, 8, 7, 123456789, time.FixedZone("CEST", 2*3600)),
	}
}

func headerMap(t *testing.T, hs []kafka.Header) map[string]string {
	t.Helper()
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		if _, dup := m[h.Key]; dup {
			t.Errorf("header %q appears twice", h.Key)
		}
		m[h.Key] = string(h.Value)
	}
	return m
}

func TestBuildHeaders(t *testing.T) {
	hs, dropped := buildHeaders(testMessage(), recordHeaders{source: "walrelay-test"})
	got := headerMap(t, hs)
	if dropped != nil {
		t.Errorf("dropped %v; want none", dropped)
	}
	want := map[string]string{
		"ce_specversion":    "1.0",
		"ce_id":             "f47ac10b-58cc-4372-a567-0e02b3c479d0",
		"ce_type":           "order.submitted.v1",
		"ce_source":         "walrelay-test",
		"ce_subject":        "order-42",
		"ce_time":           "2024-05-06T07:08:07.123456789Z",
		"content-type":      "application/json",
		"aggregate_type":    "order",
		"aggregate_version": "7",
		"traceparent":       "00-abc-def-01",
	}
	if len(got) != len(want) {
		t.Errorf("got %d headers %v; want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %q = %q; want %q", k, got[k], v)
		}
	}
}

func TestBuildHeadersOmitsEmptyOptionals(t *testing.T) {
	m := testMessage()
	m.OccurredAt, m.HasVersion, m.ContentType, m.AggregateType, m.Headers = time.Time{}, false, "", "", nil
	hs, _ := buildHeaders(m, recordHeaders{source: "s"})
	got := headerMap(t, hs)
	for _, k := range []string{"ce_time", "aggregate_version", "content-type", "aggregate_type"} {
		if v, ok := got[k]; ok {
			t.Errorf("header %q = %q; want it omitted", k, v)
		}
	}
	for _, k := range []string{"ce_specversion", "ce_id", "ce_type", "ce_source", "ce_subject"} {
		if _, ok := got[k]; !ok {
			t.Errorf("header %q missing", k)
		}
	}
}

func TestBuildHeadersColumnCannotOverride(t *testing.T) {
	m := testMessage()
	m.Headers = []schema.Header{
		{Key: "ce_id", Value: "forged"},
		{Key: "CE_Source", Value: "forged"},
		{Key: "content-type", Value: "text/plain"},
		{Key: "aggregate_version", Value: "999"},
		{Key: "correlation_id", Value: "c-1"},
		{Key: "ce_traceparent", Value: "kept: not one the sink sets"},
	}
	hs, dropped := buildHeaders(m, recordHeaders{source: "walrelay"})
	got := headerMap(t, hs)
	wantDropped := []droppedHeader{{"ce_id", schema.DropReserved}, {"CE_Source", schema.DropReserved},
		{"content-type", schema.DropReserved}, {"aggregate_version", schema.DropReserved}}
	if fmt.Sprint(dropped) != fmt.Sprint(wantDropped) {
		t.Errorf("dropped %v; want %v", dropped, wantDropped)
	}
	if got["ce_id"] != m.ID.String() || got["ce_source"] != "walrelay" || got["content-type"] != "application/json" || got["aggregate_version"] != "7" {
		t.Errorf("headers column overrode the sink's own: %v", got)
	}
	if _, ok := got["CE_Source"]; ok {
		t.Errorf("header CE_Source kept; want it skipped (case-insensitive match of ce_source)")
	}
	if got["correlation_id"] != "c-1" || got["ce_traceparent"] == "" {
		t.Errorf("ordinary headers lost: %v", got)
	}
}

func TestTopicFor(t *testing.T) {
	tests := []struct {
		template, topic, aggType, typ string
		want                          string
	}{
		{"outbox.{aggregate_type}", "", "order", "order.submitted.v1", "outbox.order"},
		{"events.{aggregate_type}.{type}", "", "order", "submitted", "events.order.submitted"},
		{"outbox.{aggregate_type}", "explicit", "order", "x", "explicit"},
		{"single-topic", "", "order", "x", "single-topic"},
		{"{type}-{type}", "", "a", "b", "b-b"},
	}
	for _, tt := range tests {
		m := &schema.Message{Topic: tt.topic, AggregateType: tt.aggType, Type: tt.typ}
		if got := topicFor(tt.template, m); got != tt.want {
			t.Errorf("topicFor(%q, topic=%q type=%q agg=%q) = %q; want %q", tt.template, tt.topic, tt.typ, tt.aggType, got, tt.want)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, ok := range []string{"outbox.order", "a", "A-b_c.9", strings.Repeat("x", 249)} {
		if err := validateTopic(ok); err != nil {
			t.Errorf("validateTopic(%q) = %v; want nil", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "has space", "outbox.{aggregate_type}", "ümlaut", strings.Repeat("x", 250)} {
		if err := validateTopic(bad); err == nil {
			t.Errorf("validateTopic(%q) = nil; want an error", bad)
		}
	}
}

func TestNewRecord(t *testing.T) {
	m := testMessage()
	now := time.Unix(1700000000, 0)
	r, _ := newRecord(m, 99, recordHeaders{source: "walrelay"}, now)
	if r.token != 99 || r.id != m.ID || string(r.key) != m.AggregateID || string(r.value) != string(m.Payload) || !r.time.Equal(now) {
		t.Errorf("newRecord = %+v; want token 99, key %q, value %q, time %v", r, m.AggregateID, m.Payload, now)
	}
	if r.size != m.Size() {
		t.Errorf("size = %d; want Message.Size() %d", r.size, m.Size())
	}
	if min := len(m.AggregateID) + len(m.Payload); r.wire <= min {
		t.Errorf("wire = %d; want more than key+value %d", r.wire, min)
	}
}

// With a message id header, the id goes into it beside ce_id, and an entry
// of the headers column of that name, in any case, is dropped as reserved.
func TestBuildHeadersMessageIDHeader(t *testing.T) {
	m := testMessage()
	m.Headers = []schema.Header{{Key: "ID", Value: "forged"}, {Key: "tenant", Value: "acme"}}
	hs, dropped := buildHeaders(m, recordHeaders{source: "walrelay", idHeader: "id"})
	got := headerMap(t, hs)
	if got["id"] != m.ID.String() || got["ce_id"] != m.ID.String() || got["tenant"] != "acme" {
		t.Errorf("headers %v; want id and ce_id %s, tenant kept", got, m.ID)
	}
	if want := []droppedHeader{{"ID", schema.DropReserved}}; fmt.Sprint(dropped) != fmt.Sprint(want) {
		t.Errorf("dropped %v; want %v", dropped, want)
	}
	if _, ok := got["ID"]; ok {
		t.Error("the headers column's ID kept; want it dropped")
	}
	hs, dropped = buildHeaders(m, recordHeaders{source: "walrelay"})
	if got := headerMap(t, hs); got["ID"] != "forged" || len(dropped) != 0 {
		t.Errorf("without a message id header: headers %v, dropped %v; want the column's ID kept", got, dropped)
	}
}

// The trace headers the decoder could not read from the span context
// column are reported as dropped, and the record has none of them.
func TestBuildHeadersSpanContextDrops(t *testing.T) {
	m := testMessage()
	m.Headers = nil
	m.SpanContextDrops = []string{"traceparent"}
	hs, dropped := buildHeaders(m, recordHeaders{source: "walrelay"})
	if _, ok := headerMap(t, hs)["traceparent"]; ok {
		t.Error("traceparent on the record; want none")
	}
	if want := []droppedHeader{{"traceparent", schema.DropSpanContext}}; fmt.Sprint(dropped) != fmt.Sprint(want) {
		t.Errorf("dropped %v; want %v", dropped, want)
	}
}

func TestValidateMessageIDHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true}, {"id", true}, {"eventId", true}, {"ce_eventid", true},
		{"ce_id", false}, {"CE_ID", false}, {"content-type", false}, {"aggregate_type", false},
		{"ce_Event-Id", false}, {"traceparent", false}, {"TraceState", false},
		{"has space", false}, {"tab\t", false}, {"é", false},
	} {
		if err := validateMessageIDHeader(tc.name); (err == nil) != tc.ok {
			t.Errorf("validateMessageIDHeader(%q) = %v; want ok %v", tc.name, err, tc.ok)
		}
	}
}

// A record takes two allocations (itself, with its headers inline, and
// the header values, which the key shares), whatever the machine's speed:
// issue 20's "fewer allocations per record".
func TestNewRecordAllocations(t *testing.T) {
	m := testMessage()
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { newRecord(m, 1, recordHeaders{source: "walrelay"}, now) }); n > 2 {
		t.Errorf("newRecord allocates %v times per record; want at most 2", n)
	}
	r, _ := newRecord(m, 1, recordHeaders{source: "walrelay"}, now)
	if string(r.key) != m.AggregateID {
		t.Errorf("key = %q; want the aggregate id %q", r.key, m.AggregateID)
	}
}
