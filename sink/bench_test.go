package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
)

// Run with: go test -run '^$' -bench . -benchmem ./sink

func BenchmarkBuildHeaders(b *testing.B) {
	m := testMessage()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = buildHeaders(m, recordHeaders{source: "walrelay"})
	}
}

func BenchmarkNewRecord(b *testing.B) {
	m := testMessage()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = newRecord(m, 1, recordHeaders{source: "walrelay"}, now)
	}
}

func BenchmarkPartitionFor(b *testing.B) {
	for _, key := range []string{"order-42", "f47ac10b-58cc-4372-a567-0e02b3c479d0"} {
		b.Run(fmt.Sprintf("len=%d", len(key)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(key)))
			for b.Loop() {
				_ = partitionFor(key, 12)
			}
		})
	}
}

func BenchmarkTopicFor(b *testing.B) {
	m := testMessage()
	b.ReportAllocs()
	for b.Loop() {
		_ = topicFor(defaultTopicTemplate, m)
	}
}

// BenchmarkKafkaRecords is one attempt's records for a batch of 100: the
// key and value readers take one allocation per batch.
func BenchmarkKafkaRecords(b *testing.B) {
	m := testMessage()
	batch := make([]*record, 100)
	for i := range batch {
		batch[i], _ = newRecord(m, uint64(i), recordHeaders{source: "walrelay"}, time.Now())
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = kafkaRecords(batch)
	}
}

// BenchmarkPublish is the sink's whole path for one message, Publish to
// ack, over a producer that acknowledges at once: allocations per message
// beyond the message itself (issue 20's target is 1).
func BenchmarkPublish(b *testing.B) {
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		for {
			if _, err := req.Records.ReadRecord(); err != nil {
				return &kafka.ProduceResponse{}, nil
			}
		}
	}}
	cfg := Config{Brokers: []string{"127.0.0.1:9"}, Linger: time.Millisecond}.withDefaults()
	s, err := newSink(cfg, nil, func(uint64) {}, prod, fixedPartitions(12))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	msgs := make([]*schema.Message, 1000)
	for i := range msgs {
		msgs[i] = testMessage()
		msgs[i].AggregateID = fmt.Sprintf("order-%d", i%100)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Publish(ctx, msgs[i%len(msgs)], uint64(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	s.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
