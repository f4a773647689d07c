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

	"github.com/walrelay/walrelay/internal/backoff"
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

// topicError is a topic that cannot take messages: missing (and not
// created), an invalid name, or no right to it.
type topicError struct {
	class string // parkedTopicMissing or parkedTopicRefused
	err   error
}

func (e *topicError) Error() string { return e.err.Error() }
func (e *topicError) Unwrap() error { return e.err }

func newTopicError(err error) *topicError {
	if errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.LeaderNotAvailable) {
		return &topicError{class: parkedTopicMissing, err: err}
	}
	return &topicError{class: parkedTopicRefused, err: err}
}

// partitionCount returns the partition count topic's keys are routed by:
// Kafka's when the sink first meets the topic, recorded in Config.Layouts
// (claim), then fixed. A count that changes under a running sink would move
// keys between partitions while their earlier messages may be unread, so
// a topic whose count in Kafka no longer agrees with the recorded one is
// held (layout.go): partitionCount waits until it agrees again, ctx is
// done or the sink halts. A topic that cannot take messages is a
// *topicError; that verdict is kept, and later messages only ask the
// transport's cached metadata whether the topic appeared meanwhile, so
// that each of them does not wait for the verdict again.
func (s *Sink) partitionCount(ctx context.Context, topic string) (int, error) {
	for {
		s.mu.Lock()
		n, ok := s.topics[topic]
		h := s.held[topic]
		verdict := s.unusable[topic]
		s.mu.Unlock()
		switch {
		case ok:
			return n, nil
		case h != nil:
			if err := s.waitHeld(ctx, h); err != nil {
				return 0, err
			}
			continue
		case verdict != nil:
			if n, ok = s.recheck(ctx, topic); !ok {
				return 0, verdict
			}
		default:
			var err error
			if n, err = s.lookupPartitions(ctx, topic); err != nil {
				if ctx.Err() != nil || s.stopped() != nil {
					return 0, err
				}
				terr := newTopicError(err)
				s.mu.Lock()
				s.unusable[topic] = terr
				s.mu.Unlock()
				return 0, terr
			}
		}
		if err := s.claim(ctx, topic, n); err != nil {
			return 0, err
		}
	}
}

// recheck asks once, without waiting and without creating it, whether a
// topic judged unusable has appeared, and returns its partition count if
// it has.
func (s *Sink) recheck(ctx context.Context, topic string) (int, bool) {
	if validateTopic(topic) != nil {
		return 0, false
	}
	n, err := s.meta.TopicPartitions(ctx, topic, false)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// routed fixes the partition count of topic.
func (s *Sink) routed(topic string, n int) {
	s.mu.Lock()
	s.topics[topic] = n
	delete(s.unusable, topic)
	s.mu.Unlock()
	s.m.partitions.WithLabelValues(topic).Set(float64(n))
	s.m.setHeld(HeldTopic{Topic: topic, Recorded: n, Kafka: n})
	s.log.Info("topic routed", zap.String("topic", topic), zap.Int("partitions", n))
}

// lookupPartitions asks for topic's partition count, retrying transient
// errors until ctx is done or the sink halts. A missing topic is created if
// the broker allows it and Config.NoCreateTopics is off; if it is still
// missing after createWait, that is permanent. (Without creation the wait
// still matters: the transport answers from a cached layout that may not
// show a topic created a few seconds ago.) Every error it returns is
// permanent, except ctx's error and the sink's own stop.
func (s *Sink) lookupPartitions(ctx context.Context, topic string) (int, error) {
	if err := validateTopic(topic); err != nil {
		return 0, fmt.Errorf("%w: %v", kafka.InvalidTopic, err)
	}
	ctx, cancel := s.untilHalted(ctx)
	defer cancel()
	retry := backoff.Policy{Min: s.cfg.RetryBackoffMin, Max: min(s.cfg.RetryBackoffMax, time.Second)}
	var missingSince time.Time // zero until the topic was found missing
	for attempt := 0; ; attempt++ {
		create := !missingSince.IsZero() && !s.cfg.NoCreateTopics
		n, err := s.meta.TopicPartitions(ctx, topic, create)
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, s.ended(ctx, ctx.Err())
		}
		missing := errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.LeaderNotAvailable)
		switch {
		case missing && missingSince.IsZero():
			missingSince = s.now()
			s.logMissing(topic)
			if !s.cfg.NoCreateTopics {
				continue
			}
		case missing && s.now().Sub(missingSince) > s.createWait:
			return 0, s.missingError(topic, err)
		case !missing && classify(err) == classPermanent:
			return 0, fmt.Errorf("metadata for topic %q: %w", topic, err)
		}
		s.m.errors.WithLabelValues(classify(err).String()).Inc()
		s.m.retries.Inc()
		d := retry.Delay(attempt)
		if !missing {
			s.log.Warn("metadata request failed, retrying", zap.String("topic", topic), zap.Int("attempt", attempt+1),
				zap.Duration("backoff", d), zap.Error(err))
		}
		if err := backoff.Sleep(ctx, d); err != nil {
			return 0, s.ended(ctx, err)
		}
	}
}

func (s *Sink) logMissing(topic string) {
	if s.cfg.NoCreateTopics {
		s.log.Info("topic missing, waiting for it to appear (topic creation is off)",
			zap.String("topic", topic), zap.Duration("wait", s.createWait))
		return
	}
	s.log.Info("topic missing, asking the broker to create it", zap.String("topic", topic))
}

func (s *Sink) missingError(topic string, err error) error {
	if s.cfg.NoCreateTopics {
		return fmt.Errorf("topic %q does not exist and topic creation is off: %w", topic, err)
	}
	return fmt.Errorf("topic %q does not exist and was not created within %v (is auto.create.topics.enable off?): %w",
		topic, s.createWait, err)
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

// newTransport is the transport the sink makes when Config.Transport is
// nil, with cfg's TLS and SASL. kafka-go opens one connection per broker
// (and one for metadata) and authenticates each as it opens it, so a
// refused authentication is met again on every new connection, never
// cached as a success.
//
// Its cached layout lives no longer than Config.PartitionRecheck, when
// that is shorter than kafka-go's 6s, so that a check sees a change.
func newTransport(cfg Config) *kafka.Transport {
	return &kafka.Transport{
		Dial:        (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DialTimeout: 5 * time.Second,
		ClientID:    "walrelay",
		TLS:         cfg.TLS,
		SASL:        cfg.SASL,
		MetadataTTL: min(cfg.PartitionRecheck, 6*time.Second),
	}
}
