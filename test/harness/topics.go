package harness

import (
	"context"
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
