package topics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/check"
)

func TestAcceptLine(t *testing.T) {
	since := time.Date(2026, 12, 1, 8, 0, 0, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		before Layout
		found  bool
		want   string
	}{
		{Layout{}, false, "topic orders: recorded 6 partitions (none was recorded: walrelay had not published to it)\n"},
		{Layout{Partitions: 6}, true, "topic orders: 6 partitions, as recorded already (nothing changed)\n"},
		{Layout{Partitions: 3, RecordedAt: since}, true, "topic orders: recorded 6 partitions, was 3 (since 2026-12-01T07:00:00Z); " +
			"a running walrelay publishes to it again, by 6, at its next partition check (--partition-check-interval, 15s by default)\n"},
	} {
		if got := acceptLine("orders", 6, tc.before, tc.found); got != tc.want {
			t.Errorf("acceptLine(%+v, %v):\n got %q\nwant %q", tc.before, tc.found, got, tc.want)
		}
	}
}

func testRows() []row {
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	return []row{
		{Topic: "billing", Partitions: 3, KafkaError: "unknown topic", RecordedAt: at, RecordedBy: "walrelay"},
		{Topic: "orders", Partitions: 3, KafkaPartitions: 6, Held: true, RecordedAt: at, RecordedBy: "walrelay"},
		{Topic: "users", Partitions: 1, KafkaPartitions: 1, RecordedAt: at, RecordedBy: "walrelay topics accept: grown"},
	}
}

func TestRender(t *testing.T) {
	var b bytes.Buffer
	if err := render(&b, testRows(), `public."t"`, false); err != nil {
		t.Fatal(err)
	}
	want := "TOPIC    PARTITIONS  KAFKA  STATE                                            RECORDED              BY\n" +
		"billing  3           ?      kafka: unknown topic                             2026-12-01T07:00:00Z  walrelay\n" +
		"orders   3           6      held: run walrelay topics accept --topic orders  2026-12-01T07:00:00Z  walrelay\n" +
		"users    1           1      ok                                               2026-12-01T07:00:00Z  walrelay topics accept: grown\n"
	if b.String() != want {
		t.Errorf("table:\n got %q\nwant %q", b.String(), want)
	}
	b.Reset()
	if err := render(&b, nil, `public."t"`, false); err != nil || b.String() != "no topic recorded in public.\"t\": walrelay records a topic when it first publishes to it\n" {
		t.Errorf("no rows: got %q, %v", b.String(), err)
	}
	b.Reset()
	if err := render(&b, testRows()[:1], "", true); err != nil {
		t.Fatal(err)
	}
	want = `[
  {
    "topic": "billing",
    "partitions": 3,
    "kafka_partitions": 0,
    "kafka_error": "unknown topic",
    "held": false,
    "recorded_at": "2026-12-01T07:00:00Z",
    "recorded_by": "walrelay"
  }
]
`
	if b.String() != want {
		t.Errorf("JSON:\n got %s\nwant %s", b.String(), want)
	}
}

// check fails on a held topic, naming it with both counts, and passes
// when Kafka has every recorded count (a topic Kafka cannot say about is
// not held).
func TestPartitionsResult(t *testing.T) {
	got := partitionsResult(testRows())
	if got.Status != check.Fail || !strings.Contains(got.Found, "walrelay publishes nothing to orders (recorded 3, Kafka 6): the partition count changed") {
		t.Errorf("held: got %+v; want a failure naming orders", got)
	}
	rs := testRows()
	rs = append(rs[:1], rs[2])
	if got := partitionsResult(rs); got.Status != check.OK || got.Found != "2 recorded, each as Kafka has it" || got.Name != PartitionsCheck {
		t.Errorf("none held: got %+v; want a pass counting 2", got)
	}
}
