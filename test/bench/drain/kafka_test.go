//go:build bench

package drain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// partitions is the partition count of the Kafka run's topic: more than
// one, as the e2e fixtures use, so that the sink can pipeline across
// partitions as it would in production.
const partitions = 3

func kafkaClient(brokers string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 60 * time.Second}
}

// createTopic creates topic and deletes it in t.Cleanup (a drained backlog
// can be gigabytes).
func createTopic(ctx context.Context, t *testing.T, brokers, topic string) {
	t.Helper()
	client := kafkaClient(brokers)
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1},
	}})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}}) //nolint:errcheck // best effort
	})
}

// topicRecords is the number of records in topic: the sum of its
// partitions' end offsets (it was created empty and nothing compacts it).
func topicRecords(ctx context.Context, brokers, topic string) (int64, error) {
	reqs := make([]kafka.OffsetRequest, partitions)
	for p := range reqs {
		reqs[p] = kafka.LastOffsetOf(p)
	}
	res, err := kafkaClient(brokers).ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	var n int64
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("list offsets of %s[%d]: %w", topic, p.Partition, p.Error)
		}
		n += p.LastOffset
	}
	return n, nil
}
