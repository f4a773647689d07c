package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
)

// Layouts keeps, across restarts, the partition count each topic's keys
// are routed by (in walrelay, the topics table beside the outbox table).
// It must be safe for concurrent use.
type Layouts interface {
	// Claim returns the partition count recorded for topic, recording n
	// first when none is.
	Claim(ctx context.Context, topic string, n int) (int, error)
}

// memLayouts is the Layouts of a sink without Config.Layouts: recorded for
// the sink's life only.
type memLayouts struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *memLayouts) Claim(_ context.Context, topic string, n int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if got, ok := m.n[topic]; ok {
		return got, nil
	}
	m.n[topic] = n
	return n, nil
}

// heldTopic is a topic whose partition count in Kafka differs from the one
// recorded for it: the sink publishes nothing more to it until the counts
// agree again (an operator records Kafka's, `walrelay topics accept`).
// Messages routed before the change was seen were routed by the recorded
// count, like every earlier message of their aggregates, and still go.
type heldTopic struct {
	recorded, kafka int
	released        chan struct{} // closed when the counts agree again
}

// claim routes topic by n, Kafka's count, when the count recorded for it
// agrees (or none was recorded: n is recorded), and holds it otherwise.
// It retries failures to read or write the record until ctx is done or
// the sink halts.
func (s *Sink) claim(ctx context.Context, topic string, n int) error {
	ctx, cancel := s.untilHalted(ctx)
	defer cancel()
	retry := backoff.Policy{Min: s.cfg.RetryBackoffMin, Max: s.cfg.RetryBackoffMax}
	for attempt := 0; ; attempt++ {
		recorded, err := s.layouts.Claim(ctx, topic, n)
		if err == nil {
			if recorded == n {
				s.routed(topic, n)
			} else {
				s.hold(topic, recorded, n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return s.ended(ctx, ctx.Err())
		}
		d := retry.Delay(attempt)
		s.log.Warn("cannot read the partition count recorded for a topic, retrying", zap.String("topic", topic),
			zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))
		if err := backoff.Sleep(ctx, d); err != nil {
			return s.ended(ctx, err)
		}
	}
}

// hold stops publishing to topic: its recorded partition count is
// recorded, Kafka's is kafka. Publish waits on the topic's next message
// (waitHeld) until the counts agree again.
func (s *Sink) hold(topic string, recorded, kafka int) {
	s.mu.Lock()
	h := s.held[topic]
	if h != nil && h.kafka == kafka {
		s.mu.Unlock()
		return
	}
	if h == nil {
		h = &heldTopic{released: make(chan struct{})}
		s.held[topic] = h
	}
	h.recorded, h.kafka = recorded, kafka
	delete(s.topics, topic)
	s.mu.Unlock()
	s.m.setHeld(HeldTopic{Topic: topic, Recorded: recorded, Kafka: kafka})
	s.log.Error("topic's partition count changed: walrelay publishes nothing more to it until the change is accepted, so that no aggregate moves to another partition unnoticed",
		zap.String("topic", topic), zap.Int("recorded_partitions", recorded), zap.Int("kafka_partitions", kafka),
		zap.String("fix", fmt.Sprintf("If the change was meant, let the topic's consumers catch up on what walrelay published before it, then record the new count: walrelay topics accept --topic %s (docs/RUNBOOK.md, WalrelayTopicPartitionsChanged).", topic)))
}

// switchCount routes topic by n from now on, once every message routed by
// its old count is acknowledged or parked: until then the topic is held
// (without the alarm of a hold: the new count was accepted already), so
// that no message routed by n reaches Kafka before an earlier one routed
// by the old count. An aggregate's older message on its old partition then
// is in Kafka before its newer one on the new, and a partition's newest
// record vouches for every earlier message routed to it (DECISIONS 47).
func (s *Sink) switchCount(topic string, n int) {
	s.mu.Lock()
	if s.held[topic] == nil {
		s.held[topic] = &heldTopic{recorded: n, kafka: n, released: make(chan struct{})}
	}
	delete(s.topics, topic)
	s.mu.Unlock()
	if s.topicIdle(topic) {
		s.release(topic, n)
		return
	}
	s.recheckSoon()
}

// topicIdle reports that no partition of topic has a message queued or in
// flight.
func (s *Sink) topicIdle(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, p := range s.parts {
		if tp.topic == topic && !p.idle() {
			return false
		}
	}
	return true
}

// recheckSoon reads the partition counts again shortly, for a held topic
// whose old partitions are still draining.
func (s *Sink) recheckSoon() {
	time.AfterFunc(drainCheck, func() { signal(s.recheckWake) })
}

// drainCheck is how often a topic whose count is about to change is
// checked for being drained.
const drainCheck = 20 * time.Millisecond

// release routes a held topic by n, once its recorded count and Kafka's
// agree again and what was routed by the old count is done (topicIdle).
func (s *Sink) release(topic string, n int) {
	s.mu.Lock()
	h := s.held[topic]
	delete(s.held, topic)
	s.mu.Unlock()
	if h == nil {
		return
	}
	s.routed(topic, n) // and the gauge back to 0
	close(h.released)
}

// waitHeld waits until h is released, ctx is done or the sink halts.
func (s *Sink) waitHeld(ctx context.Context, h *heldTopic) error {
	select {
	case <-h.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.halted.Done():
		if err := s.stopped(); err != nil {
			return err
		}
		return errStopped
	}
}

// watchPartitions reads the partition counts of the topics in use again
// every Config.PartitionRecheck, and at once after a produce error that
// says the cluster's layout moved, until the sink halts.
func (s *Sink) watchPartitions(ctx context.Context) error {
	t := time.NewTicker(s.cfg.PartitionRecheck)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.recheckWake:
		case <-s.halted.Done():
			return nil
		case <-ctx.Done():
			return nil
		}
		s.recheckPartitions(ctx)
	}
}

// recheckPartitions holds each routed topic whose count in Kafka changed,
// and releases each held topic whose recorded count now agrees with
// Kafka's. A count it cannot read now is read at the next round.
func (s *Sink) recheckPartitions(ctx context.Context) {
	s.mu.Lock()
	routed := make(map[string]int, len(s.topics))
	for t, n := range s.topics {
		routed[t] = n
	}
	held := make([]string, 0, len(s.held))
	for t := range s.held {
		held = append(held, t)
	}
	s.mu.Unlock()
	for topic, n := range routed {
		now, err := s.meta.TopicPartitions(ctx, topic, false)
		if err != nil || now <= 0 || now == n {
			continue
		}
		// An operator may have accepted the new count before the sink saw
		// the change: then it goes on by it, without a hold.
		if recorded, err := s.layouts.Claim(ctx, topic, now); err == nil && recorded == now {
			s.log.Info("topic's partition count changed and was accepted already", zap.String("topic", topic),
				zap.Int("was", n), zap.Int("partitions", now))
			s.switchCount(topic, now)
			continue
		}
		s.hold(topic, n, now)
	}
	for _, topic := range held {
		now, err := s.meta.TopicPartitions(ctx, topic, false)
		if err != nil || now <= 0 {
			continue
		}
		recorded, err := s.layouts.Claim(ctx, topic, now)
		switch {
		case err != nil:
			s.log.Warn("cannot read the partition count recorded for a held topic", zap.String("topic", topic), zap.Error(err))
		case recorded == now && !s.topicIdle(topic):
			s.recheckSoon() // what was routed by the old count is still on its way
		case recorded == now:
			s.log.Info("topic's partition count change accepted: publishing to it again", zap.String("topic", topic), zap.Int("partitions", now))
			s.release(topic, now)
		default:
			s.hold(topic, recorded, now)
		}
	}
}

// layoutMoved reports a produce error after which the partition counts are
// worth reading again at once.
func layoutMoved(err error) bool {
	return errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.NotLeaderForPartition) ||
		errors.Is(err, kafka.LeaderNotAvailable)
}
