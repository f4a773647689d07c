// Package kafkatest is what tests do with a real Kafka broker besides
// walrelay: make topics that are deleted when the test ends, change and
// inspect them, and read back what landed with kcat, a client that shares
// no code with walrelay's sink.
//
// Internal: for walrelay's tests only.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Client is an admin client of brokers (a comma-separated list).
func Client(brokers string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(strings.Split(brokers, ",")...), Timeout: 30 * time.Second}
}

// CreateTopic creates topic with partitions partitions and topic-level
// configuration (max.message.bytes, say), and deletes it in t.Cleanup.
func CreateTopic(t testing.TB, brokers, topic string, partitions int, configs ...kafka.ConfigEntry) {
	t.Helper()
	create(t, brokers, []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}})
}

// CreateTopics creates topics, each with partitions partitions, and
// deletes them in t.Cleanup.
func CreateTopics(t testing.TB, brokers string, partitions int, topics ...string) {
	t.Helper()
	var cfgs []kafka.TopicConfig
	for _, topic := range topics {
		cfgs = append(cfgs, kafka.TopicConfig{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1})
	}
	create(t, brokers, cfgs)
}

func create(t testing.TB, brokers string, cfgs []kafka.TopicConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &kafka.CreateTopicsRequest{Topics: cfgs}
	res, err := Client(brokers).CreateTopics(ctx, req)
	if err != nil {
		t.Fatalf("create topics: got %v; want nil", err)
	}
	var topics []string
	for _, c := range cfgs {
		topics = append(topics, c.Topic)
	}
	t.Cleanup(func() {
		if err := DeleteTopics(brokers, topics...); err != nil {
			t.Errorf("cleanup: %v; want nil", err)
		}
	})
	for _, c := range cfgs {
		if err := res.Errors[c.Topic]; err != nil {
			t.Fatalf("create topic %s: got %v; want nil", c.Topic, err)
		}
	}
}

// DeleteTopics deletes topics; one that does not exist (any more) is no
// error.
func DeleteTopics(brokers string, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Client(brokers).DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("delete topics %v: got %w", topics, err)
	}
	for topic, err := range res.Errors {
		if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: got %w", topic, err)
		}
	}
	return nil
}

// Topics lists the broker's topics whose names start with prefix (a
// request that creates nothing).
func Topics(brokers, prefix string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := Client(brokers).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []string
	for _, tp := range md.Topics {
		if strings.HasPrefix(tp.Name, prefix) {
			out = append(out, tp.Name)
		}
	}
	return out, nil
}

// DeleteTopicsWithPrefix deletes every topic whose name starts with
// prefix: in t.Cleanup, the topics walrelay created on its own.
func DeleteTopicsWithPrefix(brokers, prefix string) error {
	topics, err := Topics(brokers, prefix)
	if err != nil {
		return err
	}
	return DeleteTopics(brokers, topics...)
}

// TopicExists reports whether topic is among the broker's topics.
func TopicExists(t testing.TB, brokers, topic string) bool {
	t.Helper()
	topics, err := Topics(brokers, topic)
	if err != nil {
		t.Fatalf("got %v; want the topic list", err)
	}
	for _, name := range topics {
		if name == topic {
			return true
		}
	}
	return false
}

// SetTopicConfig sets one topic-level configuration value (the operator's
// fix: kafka-configs.sh --alter). Kafka's AlterConfigs replaces the
// topic's overrides with the ones given, so name all the overrides it
// should keep.
func SetTopicConfig(t testing.TB, brokers, topic, name, value string) {
	t.Helper()
	res, err := Client(brokers).AlterConfigs(context.Background(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
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
		t.Fatalf("set %s=%s on topic %s: got %v; want nil", name, value, topic, err)
	}
}

// DeleteGroupsAtCleanup deletes the consumer groups in t.Cleanup (best
// effort: a group that never committed does not exist).
func DeleteGroupsAtCleanup(t testing.TB, brokers string, groups ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		Client(brokers).DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: groups}) //nolint:errcheck // best effort
	})
}

// GrowTopic raises topic's partition count to count (the operator's
// kafka-topics.sh --alter --partitions).
func GrowTopic(t testing.TB, brokers, topic string, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Client(brokers).CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: int32(count)}},
	})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		t.Fatalf("grow topic %s to %d partitions: got %v; want nil", topic, count, err)
	}
}
