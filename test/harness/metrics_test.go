package harness

import (
	"strings"
	"testing"
)

func TestParseSums(t *testing.T) {
	text := `# HELP walrelay_published_messages_total Messages acknowledged by Kafka, by topic.
# TYPE walrelay_published_messages_total counter
walrelay_published_messages_total{topic="t.order"} 1200
walrelay_published_messages_total{topic="t.customer"} 34
walrelay_slot_lag_bytes 5.24288e+06
walrelay_commit_to_ack_seconds_bucket{le="+Inf"} 7
walrelay_odd{note="a } b"} 2 1700000000000
`
	got, err := parseSums(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parseSums: %v", err)
	}
	want := map[string]float64{
		"walrelay_published_messages_total":     1234,
		"walrelay_slot_lag_bytes":               5 << 20,
		"walrelay_commit_to_ack_seconds_bucket": 7,
		"walrelay_odd":                          2,
	}
	if len(got) != len(want) {
		t.Errorf("got %d names %v; want %d", len(got), got, len(want))
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("got %s = %v; want %v", name, got[name], v)
		}
	}
	if _, err := parseSums(strings.NewReader("walrelay_x{a=\"b\"}\n")); err == nil {
		t.Errorf("got no error for a line without a value; want one")
	}
}
