package inbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// topic is one test's Kafka topic and consumer group, both deleted in
// t.Cleanup.
type topic struct {
	t          *testing.T
	brokers    []string
	client     *kafka.Client
	name       string
	group      string
	partitions int
}

func newTopic(t *testing.T, partitions int) *topic {
	t.Helper()
	tp := newTopicLater(t, partitions)
	tp.create()
	return tp
}

// newTopicLater is newTopic without creating the topic: the test calls
// create when it wants it to exist.
func newTopicLater(t *testing.T, partitions int) *topic {
	t.Helper()
	brokers := strings.Split(harness.Env(t, "WALRELAY_TEST_KAFKA_BROKERS"), ",")
	s := suffix(t)
	tp := &topic{
		t: t, brokers: brokers, partitions: partitions,
		client: &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second},
		name:   "inbox-test-" + s, group: "inbox-test-" + s,
	}
	ctx := context.Background()
	t.Cleanup(func() {
		tp.client.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{tp.group}}) //nolint:errcheck // best effort
		tp.client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{tp.name}})    //nolint:errcheck // best effort
	})
	return tp
}

// create creates the topic with the test's partition count.
func (tp *topic) create() {
	tp.t.Helper()
	res, err := tp.client.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: tp.name, NumPartitions: tp.partitions, ReplicationFactor: 1},
	}})
	if err == nil {
		err = res.Errors[tp.name]
	}
	if err != nil {
		tp.t.Fatalf("create topic %s: %v", tp.name, err)
	}
}

// produce writes records to the topic, acknowledged by every replica.
func (tp *topic) produce(records ...kafka.Message) {
	tp.t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(tp.brokers...),
		Topic:        tp.name,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, records...); err != nil {
		tp.t.Fatalf("produce %d records to %s: %v", len(records), tp.name, err)
	}
}

// reader is a reader of the topic in the test's group. It is closed in
// t.Cleanup; closing it sooner is fine.
func (tp *topic) reader() *kafka.Reader {
	r := kafka.NewReader(inbox.ReaderConfig(tp.brokers, tp.group, tp.name))
	tp.t.Cleanup(func() { r.Close() })
	return r
}

// committed is the group's committed offset of each partition (-1: none).
func (tp *topic) committed() []int64 {
	tp.t.Helper()
	parts := make([]int, tp.partitions)
	for i := range parts {
		parts[i] = i
	}
	offsets, err := harness.Committed(context.Background(), strings.Join(tp.brokers, ","), tp.group, tp.name, parts)
	if err != nil {
		tp.t.Fatal(err)
	}
	out := make([]int64, tp.partitions)
	for p, o := range offsets {
		out[p] = o
	}
	return out
}

// ends is the end offset (the next offset to be written) of each partition.
func (tp *topic) ends() []int64 {
	tp.t.Helper()
	var reqs []kafka.OffsetRequest
	for p := range tp.partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	res, err := tp.client.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{tp.name: reqs},
	})
	if err != nil {
		tp.t.Fatalf("list the offsets of %s: %v", tp.name, err)
	}
	out := make([]int64, tp.partitions)
	for _, p := range res.Topics[tp.name] {
		if p.Error != nil {
			tp.t.Fatalf("list the offsets of %s[%d]: %v", tp.name, p.Partition, p.Error)
		}
		out[p.Partition] = p.LastOffset
	}
	return out
}

// walrelayRecord is the n-th message (see message) as walrelay's sink
// publishes it.
func walrelayRecord(n int) kafka.Message {
	m := message(n)
	h := func(k, v string) kafka.Header { return kafka.Header{Key: k, Value: []byte(v)} }
	return kafka.Message{
		Key:   []byte(m.AggregateID),
		Value: m.Payload,
		Headers: []kafka.Header{
			h(schema.HeaderSpecVersion, "1.0"),
			h(schema.HeaderID, m.ID.String()),
			h(schema.HeaderType, m.Type),
			h(schema.HeaderSource, "walrelay/test"),
			h(schema.HeaderSubject, m.AggregateID),
			h(schema.HeaderTime, time.Now().UTC().Format(time.RFC3339Nano)),
			h(schema.HeaderContentType, "application/json"),
			h(schema.HeaderAggregateType, m.AggregateType),
			h(schema.HeaderAggregateVersion, strconv.FormatInt(m.AggregateVersion, 10)),
			h(schema.HeaderCorrelationID, fmt.Sprintf("req-%d", n)),
		},
	}
}

// eventually polls cond every 50ms until it holds, or fails the test
// after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caughtUp reports whether the group has committed the end offset of every
// partition that holds records.
func (tp *topic) caughtUp() bool {
	tp.t.Helper()
	committed, ends := tp.committed(), tp.ends()
	for p := range ends {
		if ends[p] > 0 && committed[p] != ends[p] {
			return false
		}
	}
	return true
}
