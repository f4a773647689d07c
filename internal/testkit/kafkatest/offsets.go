package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Partition names one partition of a topic.
type Partition struct {
	Topic     string
	Partition int32
}

// EndOffsets is the end offset of every partition of topics.
func EndOffsets(ctx context.Context, brokers string, topics ...string) (map[Partition]int64, error) {
	client := Client(brokers)
	out := map[Partition]int64{}
	if len(topics) == 0 {
		return out, nil
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	req := map[string][]kafka.OffsetRequest{}
	for _, tp := range md.Topics {
		if tp.Error != nil {
			return nil, fmt.Errorf("metadata of %s: %w", tp.Name, tp.Error)
		}
		for _, p := range tp.Partitions {
			req[tp.Name] = append(req[tp.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	for topic, parts := range res.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return nil, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			out[Partition{Topic: topic, Partition: int32(p.Partition)}] = p.LastOffset
		}
	}
	return out, nil
}

// Committed is group's committed offset of each of topic's partitions (-1:
// none yet). A young group's coordinator loads or moves, and the broker
// answers meanwhile with a retriable error (Not Coordinator For Group,
// Coordinator Load In Progress); those are retried for up to 30 s.
func Committed(ctx context.Context, brokers, group, topic string, partitions []int) (map[int]int64, error) {
	client := Client(brokers)
	client.Timeout = 10 * time.Second
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
		if err == nil {
			err = res.Error
		}
		out := map[int]int64{}
		if err == nil {
			for _, p := range res.Topics[topic] {
				if p.Error != nil {
					err = fmt.Errorf("partition %d: %w", p.Partition, p.Error)
					break
				}
				out[p.Partition] = p.CommittedOffset
			}
		}
		var kerr kafka.Error
		if err == nil {
			return out, nil
		}
		if !errors.As(err, &kerr) || !kerr.Temporary() || time.Now().After(deadline) {
			return nil, fmt.Errorf("fetch the offsets of group %s on %s: %w", group, topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PartitionCount is the number of partitions of topic.
func PartitionCount(ctx context.Context, brokers, topic string) (int, error) {
	md, err := Client(brokers).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, tp := range md.Topics {
		if tp.Name == topic {
			if tp.Error != nil {
				return 0, fmt.Errorf("metadata of %s: %w", topic, tp.Error)
			}
			return len(tp.Partitions), nil
		}
	}
	return 0, fmt.Errorf("metadata of %s: no such topic", topic)
}
