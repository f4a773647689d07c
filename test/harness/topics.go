package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaClient is an admin client of the fixture's brokers.
func (f *Fixture) kafkaClient() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(strings.Split(f.Brokers, ",")...), Timeout: 30 * time.Second}
}

// CreateTopicWith creates one topic of the fixture's partition count with
// topic-level configuration (max.message.bytes, say). Name it under
// f.TopicPrefix so that the cleanup removes it.
func (f *Fixture) CreateTopicWith(topic string, configs ...kafka.ConfigEntry) {
	f.t.Helper()
	res, err := f.kafkaClient().CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs},
	}})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		f.t.Fatalf("create topic %s: %v", topic, err)
	}
}

// SetTopicConfig sets one topic-level configuration value (the operator's
// fix: kafka-configs.sh --alter). Kafka's AlterConfigs replaces the topic's
// overrides with the ones given, so name all the overrides it should keep.
func (f *Fixture) SetTopicConfig(topic, name, value string) {
	f.t.Helper()
	res, err := f.kafkaClient().AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.AlterConfigRequestConfig{{Name: name, Value: value}},
	}}})
	if err == nil {
		for _, e := range res.Errors {
			if e != nil {
				err = e
			}
		}
	}
	if err != nil {
		f.t.Fatalf("set %s=%s on topic %s: %v", name, value, topic, err)
	}
}

// TopicExists asks the broker for the list of all topics (a request that
// creates nothing) and reports whether topic is among them.
func (f *Fixture) TopicExists(topic string) bool {
	f.t.Helper()
	md, err := f.kafkaClient().Metadata(context.Background(), &kafka.MetadataRequest{})
	if err != nil {
		f.t.Fatalf("list topics: %v", err)
	}
	for _, tp := range md.Topics {
		if tp.Name == topic {
			return true
		}
	}
	return false
}

// Committed is group's committed offset of each of topic's partitions (-1:
// none yet). A young group's coordinator loads or moves, and the broker
// answers meanwhile with a retriable error (Not Coordinator For Group,
// Coordinator Load In Progress); those are retried for up to 30 s.
func Committed(ctx context.Context, brokers, group, topic string, partitions []int) (map[int]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
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
