package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// metadataClient tells how many partitions a topic has. With create, it
// asks the broker to create a missing topic (auto.create.topics.enable).
// A missing topic is kafka.UnknownTopicOrPartition; one still being set up,
// kafka.LeaderNotAvailable.
type metadataClient interface {
	TopicPartitions(ctx context.Context, topic string, create bool) (int, error)
}

// topicCreateWait bounds how long a missing topic may take to appear after
// the sink asked for its creation.
const topicCreateWait = 10 * time.Second

// partitionCount returns the partition count of topic, looked up once and
// then fixed for the life of the sink: a count that changed under a running
// sink would move keys between partitions while their earlier messages are
// still in flight. m and token name the message in errors.
func (s *Sink) partitionCount(ctx context.Context, topic string, m *schema.Message, token uint64) (int, error) {
	s.topicsMu.Lock()
	n, ok := s.topics[topic]
	s.topicsMu.Unlock()
	if ok {
		return n, nil
	}
	n, err := s.lookupPartitions(ctx, topic)
	if err != nil {
		if ctx.Err() != nil || s.stopped() != nil {
			return 0, err
		}
		return 0, s.fail(&Error{Topic: topic, Partition: -1, MessageID: m.ID, Token: token, Err: err})
	}
	s.topicsMu.Lock()
	s.topics[topic] = n
	s.topicsMu.Unlock()
	s.log.Info("topic routed", zap.String("topic", topic), zap.Int("partitions", n))
	return n, nil
}

// lookupPartitions asks for topic's partition count, retrying transient
// errors until ctx is done or the sink halts. A missing topic is created if
// the broker allows it; if it is still missing after topicCreateWait, that
// is permanent. Every error it returns is permanent, except ctx's error and
// the sink's own stop.
func (s *Sink) lookupPartitions(ctx context.Context, topic string) (int, error) {
	if err := validateTopic(topic); err != nil {
		return 0, fmt.Errorf("%w: %v", kafka.InvalidTopic, err)
	}
	var createBy time.Time // zero until creation was asked for
	for attempt := 0; ; attempt++ {
		n, err := s.meta.TopicPartitions(ctx, topic, !createBy.IsZero())
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		missing := errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.LeaderNotAvailable)
		switch {
		case missing && createBy.IsZero():
			createBy = s.now().Add(s.createWait)
			s.log.Info("topic missing, asking the broker to create it", zap.String("topic", topic))
			continue
		case missing && s.now().After(createBy):
			return 0, fmt.Errorf("topic %q does not exist and was not created within %v (is auto.create.topics.enable off?): %w",
				topic, s.createWait, err)
		case !missing && classify(err) == classPermanent:
			return 0, fmt.Errorf("metadata for topic %q: %w", topic, err)
		}
		s.m.errors.WithLabelValues(classify(err).String()).Inc()
		s.m.retries.Inc()
		d := backoff(attempt, s.cfg.RetryBackoffMin, min(s.cfg.RetryBackoffMax, time.Second), s.rnd)
		if !missing {
			s.log.Warn("metadata request failed, retrying", zap.String("topic", topic), zap.Int("attempt", attempt+1),
				zap.Duration("backoff", d), zap.Error(err))
		}
		if !sleep(ctx, s.halt, d) {
			if err := s.stopped(); err != nil {
				return 0, err
			}
			return 0, ctx.Err()
		}
	}
}

// kafkaMetadata is the metadataClient of a kafka-go transport. It goes to
// the transport directly because kafka.Client.Metadata cannot ask for topic
// creation. Without create, the transport answers from its cached cluster
// layout (refreshed every few seconds); with create and a topic missing from
// that cache, it asks the broker.
type kafkaMetadata struct {
	transport kafka.RoundTripper
	addr      net.Addr
	timeout   time.Duration
}

func (k *kafkaMetadata) TopicPartitions(ctx context.Context, topic string, create bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	res, err := k.transport.RoundTrip(ctx, k.addr, &metadataAPI.Request{
		TopicNames:             []string{topic},
		AllowAutoTopicCreation: create,
	})
	if err != nil {
		return 0, fmt.Errorf("metadata for topic %q: %w", topic, err)
	}
	for _, t := range res.(*metadataAPI.Response).Topics {
		switch {
		case t.Name != topic:
		case t.ErrorCode != 0:
			return 0, kafka.Error(t.ErrorCode)
		case len(t.Partitions) == 0:
			return 0, kafka.LeaderNotAvailable
		default:
			return len(t.Partitions), nil
		}
	}
	return 0, kafka.UnknownTopicOrPartition
}

// newTransport is the transport the sink makes when Config.Transport is nil.
func newTransport() *kafka.Transport {
	return &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DialTimeout: 5 * time.Second,
		ClientID:    "walrelay",
	}
}
