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
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
)

// topic is one test's Kafka topic and consumer group, both deleted in
// t.Cleanup.
type topic struct {
	t          *testing.T
	brokers    []string
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
	brokers := rig.KafkaBrokers(t)
	name := rig.Unique("inbox-test-")
	tp := &topic{t: t, brokers: strings.Split(brokers, ","), partitions: partitions, name: name, group: name}
	kafkatest.DeleteGroupsAtCleanup(t, brokers, tp.group)
	// A topic the test did not create (one a wait made by mistake) goes too.
	t.Cleanup(func() { kafkatest.DeleteTopics(brokers, tp.name) }) //nolint:errcheck // best effort
	return tp
}

// create creates the topic with the test's partition count; it is deleted
// in t.Cleanup.
func (tp *topic) create() {
	tp.t.Helper()
	kafkatest.CreateTopic(tp.t, strings.Join(tp.brokers, ","), tp.name, tp.partitions)
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
	offsets, err := kafkatest.Committed(context.Background(), strings.Join(tp.brokers, ","), tp.group, tp.name, parts)
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
	ends, err := kafkatest.EndOffsets(context.Background(), strings.Join(tp.brokers, ","), tp.name)
	if err != nil {
		tp.t.Fatalf("list the offsets of %s: %v", tp.name, err)
	}
	out := make([]int64, tp.partitions)
	for p, end := range ends {
		out[p.Partition] = end
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

// caughtUp reports whether the group has committed the end offset of every
// partition that holds records, and both offsets of each partition.
func (tp *topic) caughtUp() (string, bool) {
	tp.t.Helper()
	committed, ends := tp.committed(), tp.ends()
	for p := range ends {
		if ends[p] > 0 && committed[p] != ends[p] {
			return fmt.Sprintf("committed %v of ends %v", committed, ends), false
		}
	}
	return "", true
}
