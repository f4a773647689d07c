package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/backoff"
)

// ReaderConfig is the kafka-go reader configuration Consume expects for
// group on topic: offsets committed only by Consume, synchronously
// (CommitInterval 0), a new group starting at the oldest record, and
// partitions added to the topic later picked up by a rebalance. Set the
// timeouts and loggers on the result as needed.
//
// A consumer usually starts before walrelay created its topic (walrelay
// creates it on its first message): call WaitForTopic before the reader
// joins the group, as a group that forms while the topic is being created
// may be left with no partition assigned.
func ReaderConfig(brokers []string, group, topic string) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers:               brokers,
		GroupID:               group,
		Topic:                 topic,
		StartOffset:           kafka.FirstOffset,
		CommitInterval:        0,
		MaxWait:               250 * time.Millisecond,
		WatchPartitionChanges: true,
	}
}

// WaitForTopic returns once topic exists and each of its partitions has a
// leader, asking the brokers every interval (its metadata requests never
// create the topic), or with ctx's error. waiting, if not nil, is called
// once when the first answer says the topic is not there yet.
func WaitForTopic(ctx context.Context, brokers []string, topic string, interval time.Duration, waiting func()) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	for first := true; ; first = false {
		ready, err := topicReady(ctx, client, topic)
		if ready {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("inbox: wait for topic %s: %w (last answer: %v)", topic, ctx.Err(), err)
		}
		if first && waiting != nil {
			waiting()
		}
		if err := backoff.Sleep(ctx, interval); err != nil {
			return fmt.Errorf("inbox: wait for topic %s: %w", topic, err)
		}
	}
}

// topicReady reports whether topic exists with a leader for every
// partition; err says why not, when the answer said.
func topicReady(ctx context.Context, client *kafka.Client, topic string) (bool, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return false, err
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return false, t.Error
		}
		if len(t.Partitions) == 0 {
			return false, errors.New("no partitions yet")
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return false, fmt.Errorf("partition %d has no leader yet", p.ID)
			}
		}
		return true, nil
	}
	return false, kafka.UnknownTopicOrPartition
}
