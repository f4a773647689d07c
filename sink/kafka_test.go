package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
)

// testBrokers is the rig's Kafka brokers (internal/testkit/rig): without them the test
// fails, or skips under -short.
func testBrokers(t *testing.T) []string {
	t.Helper()
	return strings.Split(rig.KafkaBrokers(t), ",")
}

// createTopic makes a fresh topic with partitions partitions and configs,
// deleted when the test ends.
func createTopic(t *testing.T, brokers []string, partitions int, configs ...kafka.ConfigEntry) string {
	t.Helper()
	topic := rig.Unique("walrelay-sink-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-")
	kafkatest.CreateTopic(t, strings.Join(brokers, ","), topic, partitions, configs...)
	return topic
}

// readPartition reads topic back with kcat (internal/testkit/kafkatest) and returns the
// records of one partition in offset order, repeats of a ce_id dropped as
// consumers drop them: a retried batch may legitimately have been written
// twice.
func readPartition(t *testing.T, brokers []string, topic string, partition int) []kafkatest.Record {
	t.Helper()
	var out []kafkatest.Record
	seen := map[string]bool{}
	for _, r := range kafkatest.Read(t, strings.Join(brokers, ","), topic) {
		if r.Partition != int32(partition) {
			continue
		}
		id := r.Headers[headerID]
		if seen[id] {
			t.Logf("partition %d offset %d: repeat of %s (a retried batch)", partition, r.Offset, id)
			continue
		}
		seen[id] = true
		out = append(out, r)
	}
	return out
}

// runSink starts a real sink; the returned function waits for Run.
func runSink(t *testing.T, cfg Config, onAck AckFunc) (*Sink, func() error) {
	t.Helper()
	cfg.Metrics = mustMetrics(t, prometheus.NewRegistry())
	s, err := New(cfg, zaptest.NewLogger(t), onAck)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(cancel)
	return s, func() error {
		defer cancel()
		return <-done
	}
}

func TestKafkaPublishAndReadBack(t *testing.T) {
	brokers := testBrokers(t)
	const partitions, messages, keys = 3, 2000, 50
	topic := createTopic(t, brokers, partitions)

	acked := &acks{}
	cfg := Config{Brokers: brokers, TopicTemplate: topic, Source: "walrelay-test", BatchMaxMessages: 64, MaxInFlightMessages: 256}
	s, wait := runSink(t, cfg, acked.ack)

	sent, want := publishTestMessages(t, s, messages, keys, partitions, nil)
	s.Close()
	if err := wait(); err != nil {
		t.Fatalf("Run = %v; want nil after Close", err)
	}

	checkAcks(t, acked.get(), sent, partitions, want)
	for p := range partitions {
		got := readPartition(t, brokers, topic, p)
		if len(got) < len(want[p]) {
			t.Fatalf("partition %d: got %d records; want %d", p, len(got), len(want[p]))
		}
		for j, r := range got {
			if j >= len(want[p]) {
				break
			}
			checkRecord(t, p, j, r, sent[want[p][j]], partitions)
		}
	}
}

// publishTestMessages publishes kafkaTestMessage 0 to n-1 (over keys
// aggregate ids, token i), calling before(i) ahead of each unless it is
// nil, and returns them and, per partition, their indexes in publish order.
func publishTestMessages(t *testing.T, s *Sink, n, keys, partitions int, before func(i int)) (sent []*schema.Message, want [][]int) {
	t.Helper()
	sent = make([]*schema.Message, n)
	want = make([][]int, partitions)
	for i := range n {
		if before != nil {
			before(i)
		}
		m := kafkaTestMessage(i, keys)
		sent[i] = m
		p := partitionFor(m.AggregateID, partitions)
		want[p] = append(want[p], i)
		if err := s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
	}
	return sent, want
}

func kafkaTestMessage(i, keys int) *schema.Message {
	m := &schema.Message{
		AggregateType:    "order",
		AggregateID:      fmt.Sprintf("order-%d", i%keys),
		AggregateVersion: int64(i / keys),
		HasVersion:       true,
		Type:             "order.updated.v1",
		Payload:          []byte(fmt.Sprintf(`{"n":%d}`, i)),
		ContentType:      "application/json",
		Headers:          []schema.Header{{Key: "traceparent", Value: fmt.Sprintf("00-%032x-%016x-01", i, i)}},
		OccurredAt:       time.Date(2025, 1, 2, 3, 4, 5, i, time.UTC),
	}
	m.ID = schema.MessageID(fmt.Sprintf("%06x00-0000-4000-8000-000000000000", i&0xffffff))
	return m
}

// checkAcks: every message acked exactly once, and in publish order within
// each partition.
func checkAcks(t *testing.T, acked []uint64, sent []*schema.Message, partitions int, want [][]int) {
	t.Helper()
	if len(acked) != len(sent) {
		t.Errorf("got %d acks; want %d", len(acked), len(sent))
	}
	seen := make(map[uint64]bool, len(acked))
	got := make([][]int, partitions)
	for _, tok := range acked {
		if seen[tok] {
			t.Fatalf("token %d acked twice", tok)
		}
		seen[tok] = true
		p := partitionFor(sent[tok].AggregateID, partitions)
		got[p] = append(got[p], int(tok))
	}
	for p := range partitions {
		if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			t.Errorf("partition %d: acks not in publish order", p)
		}
	}
}

func checkRecord(t *testing.T, p, j int, r kafkatest.Record, m *schema.Message, partitions int) {
	t.Helper()
	key, value := deref(r.Key), deref(r.Payload)
	if key != m.AggregateID || value != string(m.Payload) {
		t.Errorf("partition %d record %d: key %q value %s; want %q %s", p, j, key, value, m.AggregateID, m.Payload)
		return
	}
	if want := partitionFor(key, partitions); want != p {
		t.Errorf("key %q in partition %d; murmur2 says %d", key, p, want)
	}
	if r.Time.IsZero() || time.Since(r.Time) > time.Hour {
		t.Errorf("partition %d record %d: timestamp %v; want the publish time", p, j, r.Time)
	}
	got := r.Headers
	hs, _ := buildHeaders(m, recordHeaders{source: "walrelay-test"})
	want := headerMap(t, hs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partition %d record %d: headers %v; want %v", p, j, got, want)
	}
}

// deref is *s, or "" for a null.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestKafkaOversizedMessageIsPermanent sends a record over the broker's
// message.max.bytes (and under the sink's raised payload limit): Kafka
// refuses it, nothing is acked, Run names it.
func TestKafkaOversizedMessageIsPermanent(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1)
	acked := &acks{}
	s, wait := runSink(t, Config{Brokers: brokers, TopicTemplate: topic, MaxInFlightBytes: 1 << 20, MaxPayloadBytes: 4 << 20}, acked.ack)
	big := kafkaTestMessage(1, 1)
	big.Payload = []byte(`"` + strings.Repeat("x", 2<<20) + `"`)
	if err := s.Publish(context.Background(), big, 1); err != nil {
		t.Fatalf("Publish = %v; want the error from Run", err)
	}
	err := wait()
	var perr *Error
	if !errors.As(err, &perr) || perr.Token != 1 || perr.Topic != topic || !errors.Is(err, kafka.MessageSizeTooLarge) {
		t.Fatalf("Run = %v; want *Error for token 1 wrapping MessageSizeTooLarge", err)
	}
	if got := acked.get(); len(got) != 0 {
		t.Errorf("acks = %v; want none", got)
	}
}
