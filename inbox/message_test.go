package inbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/schema"
)

// record is a walrelay record as the sink writes it, with headers
// replaced or added by extra (a nil value removes the header).
func record(extra map[string]*string) kafka.Message {
	hs := []kafka.Header{
		{Key: schema.HeaderSpecVersion, Value: []byte("1.0")},
		{Key: schema.HeaderID, Value: []byte("0195b2a4-7c3e-7a1b-8f00-1234567890ab")},
		{Key: schema.HeaderType, Value: []byte("order.submitted.v1")},
		{Key: schema.HeaderSource, Value: []byte("walrelay/orders")},
		{Key: schema.HeaderSubject, Value: []byte("order-7")},
		{Key: schema.HeaderTime, Value: []byte("2025-03-04T05:06:07.123456Z")},
		{Key: schema.HeaderContentType, Value: []byte("application/json")},
		{Key: schema.HeaderAggregateType, Value: []byte("order")},
		{Key: schema.HeaderAggregateVersion, Value: []byte("12")},
		{Key: schema.HeaderTraceparent, Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		{Key: schema.HeaderCorrelationID, Value: []byte("req-1")},
	}
	var out []kafka.Header
	for _, h := range hs {
		v, ok := extra[h.Key]
		switch {
		case !ok:
			out = append(out, h)
		case v != nil:
			out = append(out, kafka.Header{Key: h.Key, Value: []byte(*v)})
		}
	}
	return kafka.Message{
		Topic: "outbox.order", Partition: 2, Offset: 41,
		Key: []byte("order-7"), Value: []byte(`{"total":3}`), Headers: out,
	}
}

func ptr(s string) *string { return &s }

func TestParseGoodRecord(t *testing.T) {
	m, err := inbox.Parse(record(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := schema.ParseMessageID("0195b2a4-7c3e-7a1b-8f00-1234567890ab")
	wantTime := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	if m.ID != wantID || m.Type != "order.submitted.v1" || m.AggregateType != "order" || m.AggregateID != "order-7" ||
		!m.HasVersion || m.AggregateVersion != 12 || !m.OccurredAt.Equal(wantTime) || string(m.Payload) != `{"total":3}` ||
		m.Topic != "outbox.order" || m.Partition != 2 || m.Offset != 41 {
		t.Errorf("Parse = %+v; want id %s, order.submitted.v1, order/order-7 version 12 at %s, outbox.order[2]@41", m, wantID, wantTime)
	}
	want := map[string]string{
		schema.HeaderSpecVersion: "1.0", schema.HeaderSource: "walrelay/orders", schema.HeaderContentType: "application/json",
		schema.HeaderTraceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", schema.HeaderCorrelationID: "req-1",
	}
	if len(m.Headers) != len(want) {
		t.Errorf("Headers = %v; want %v", m.Headers, want)
	}
	for k, v := range want {
		if m.Headers[k] != v {
			t.Errorf("Headers[%q] = %q; want %q", k, m.Headers[k], v)
		}
	}
}

func TestParseOptionalHeaders(t *testing.T) {
	km := record(map[string]*string{schema.HeaderTime: nil, schema.HeaderAggregateVersion: nil})
	km.Key = nil
	m, err := inbox.Parse(km)
	if err != nil {
		t.Fatal(err)
	}
	if m.HasVersion || !m.OccurredAt.IsZero() || m.AggregateID != "order-7" {
		t.Errorf("Parse = HasVersion %v, OccurredAt %v, AggregateID %q; want false, zero, order-7 (from ce_subject)",
			m.HasVersion, m.OccurredAt, m.AggregateID)
	}
}

func TestParseRefusesBadRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]*string
		want  string
	}{
		{"no ce_id", map[string]*string{schema.HeaderID: nil}, "no ce_id header"},
		{"empty ce_id", map[string]*string{schema.HeaderID: ptr("")}, "no ce_id header"},
		{"ce_id empty", map[string]*string{schema.HeaderID: ptr("")}, "no ce_id header"},
		{"ce_id too long", map[string]*string{schema.HeaderID: ptr(strings.Repeat("7", schema.MaxMessageIDBytes+1))}, "header ce_id"},
		{"version not a number", map[string]*string{schema.HeaderAggregateVersion: ptr("twelve")}, "header aggregate_version"},
		{"version out of range", map[string]*string{schema.HeaderAggregateVersion: ptr("9223372036854775808")}, "header aggregate_version"},
		{"time not RFC 3339", map[string]*string{schema.HeaderTime: ptr("04/03/2025 05:06")}, "header ce_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inbox.Parse(record(tc.extra))
			if err == nil {
				t.Fatalf("Parse = nil error; want one containing %q", tc.want)
			}
			for _, want := range []string{tc.want, "topic outbox.order partition 2 offset 41"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Parse error %q; want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestParseRefusesTwoDifferentIDs(t *testing.T) {
	km := record(nil)
	km.Headers = append(km.Headers, kafka.Header{Key: schema.HeaderID, Value: []byte("0195b2a4-7c3e-7a1b-8f00-000000000000")})
	if _, err := inbox.Parse(km); err == nil || !strings.Contains(err.Error(), "two different ce_id headers") {
		t.Errorf("Parse = %v; want an error about two different ce_id headers", err)
	}
}
