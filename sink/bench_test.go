package sink

import (
	"fmt"
	"testing"
	"time"
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
