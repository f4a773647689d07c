package harness

import (
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
)

// CreateTopics creates topics of the fixture's partition count; they are
// deleted in t.Cleanup.
func (f *Fixture) CreateTopics(topics ...string) {
	f.t.Helper()
	kafkatest.CreateTopics(f.t, f.Brokers, partitions, topics...)
}

// CreateTopicWith creates one topic of the fixture's partition count with
// topic-level configuration (max.message.bytes, say); it is deleted in
// t.Cleanup.
func (f *Fixture) CreateTopicWith(topic string, configs ...kafka.ConfigEntry) {
	f.t.Helper()
	kafkatest.CreateTopic(f.t, f.Brokers, topic, partitions, configs...)
}

// SetTopicConfig sets one topic-level configuration value, as
// kafkatest.SetTopicConfig.
func (f *Fixture) SetTopicConfig(topic, name, value string) {
	f.t.Helper()
	kafkatest.SetTopicConfig(f.t, f.Brokers, topic, name, value)
}

// TopicExists reports whether topic is among the brokers' topics.
func (f *Fixture) TopicExists(topic string) bool {
	f.t.Helper()
	return kafkatest.TopicExists(f.t, f.Brokers, topic)
}
