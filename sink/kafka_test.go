package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/schema"
)

// testBrokers returns the real brokers of the integration tests. CI must not
// skip them silently: without the variable they fail, except with -short.
func testBrokers(t *testing.T) []string {
	t.Helper()
	v := os.Getenv("WALRELAY_TEST_KAFKA_BROKERS")
	if v == "" {
		if testing.Short() {
			t.Skip("WALRELAY_TEST_KAFKA_BROKERS is not set")
		}
		t.Fatal("WALRELAY_TEST_KAFKA_BROKERS is not set: run `make test`, which starts Kafka and sets it (or use -short to skip)")
	}
	return strings.Split(v, ",")
}

// createTopic makes a fresh topic and deletes it when the test ends.
func createTopic(t *testing.T, brokers []string, partitions int) string {
	t.Helper()
	topic := fmt.Sprintf("walrelay-sink-%s-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano())
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := res.Errors[topic]; err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
		if err == nil {
			err = res.Errors[topic]
		}
		if err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
		}
	})
	return topic
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

	var mu sync.Mutex
	var acked []uint64
	cfg := Config{Brokers: brokers, TopicTemplate: topic, Source: "walrelay-test", BatchMaxMessages: 64, MaxInFlightMessages: 256}
	s, wait := runSink(t, cfg, func(token uint64) {
		mu.Lock()
		acked = append(acked, token)
		mu.Unlock()
	})

	sent := make([]*schema.Message, messages)
	want := make([][]int, partitions) // message indexes per partition, in publish order
	for i := range messages {
		m := kafkaTestMessage(i, keys)
		sent[i] = m
		p := partitionFor(m.AggregateID, partitions)
		want[p] = append(want[p], i)
		if err := s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
	}
	s.Close()
	if err := wait(); err != nil {
		t.Fatalf("Run = %v; want nil after Close", err)
	}

	checkAcks(t, acked, sent, partitions, want)
	for p := range partitions {
		got := readPartition(t, brokers, topic, p, len(want[p]))
		for j, r := range got {
			if j >= len(want[p]) {
				break
			}
			checkRecord(t, p, j, r, sent[want[p][j]], partitions)
		}
	}
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
	m.ID[0], m.ID[1], m.ID[2], m.ID[6], m.ID[8] = byte(i>>16), byte(i>>8), byte(i), 0x40, 0x80
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

// readPartition reads one partition from the beginning until it has n
// distinct messages (by ce_id), dropping repeats as consumers do: a retried
// batch may legitimately have been written twice.
func readPartition(t *testing.T, brokers []string, topic string, partition, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: partition, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([]kafka.Message, 0, n)
	seen := make(map[string]bool, n)
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("partition %d: read record %d of %d: %v", partition, len(out), n, err)
		}
		id := ""
		for _, h := range m.Headers {
			if h.Key == headerID {
				id = string(h.Value)
			}
		}
		if seen[id] {
			t.Logf("partition %d offset %d: repeat of %s (a retried batch)", partition, m.Offset, id)
			continue
		}
		seen[id] = true
		out = append(out, m)
	}
	return out
}

func checkRecord(t *testing.T, p, j int, r kafka.Message, m *schema.Message, partitions int) {
	t.Helper()
	if string(r.Key) != m.AggregateID || string(r.Value) != string(m.Payload) {
		t.Errorf("partition %d record %d: key %q value %s; want %q %s", p, j, r.Key, r.Value, m.AggregateID, m.Payload)
		return
	}
	if want := partitionFor(string(r.Key), partitions); want != p {
		t.Errorf("key %q in partition %d; murmur2 says %d", r.Key, p, want)
	}
	if r.Time.IsZero() || time.Since(r.Time) > time.Hour {
		t.Errorf("partition %d record %d: timestamp %v; want the publish time", p, j, r.Time)
	}
	got := headerMap(t, r.Headers)
	want := headerMap(t, buildHeaders(m, "walrelay-test"))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partition %d record %d: headers %v; want %v", p, j, got, want)
	}
}

// TestKafkaOversizedMessageIsPermanent sends a record over the broker's
// message.max.bytes (and under the sink's raised payload limit): Kafka
// refuses it, nothing is acked, Run names it.
func TestKafkaOversizedMessageIsPermanent(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1)
	var acked []uint64
	var mu sync.Mutex
	s, wait := runSink(t, Config{Brokers: brokers, TopicTemplate: topic, MaxInFlightBytes: 1 << 20, MaxPayloadBytes: 4 << 20}, func(token uint64) {
		mu.Lock()
		acked = append(acked, token)
		mu.Unlock()
	})
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
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != 0 {
		t.Errorf("acks = %v; want none", acked)
	}
}
