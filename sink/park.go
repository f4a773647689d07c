package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// The reason classes of walrelay_parked_messages_total.
const (
	parkedRefused      = "kafka_refused"     // Kafka refused the record for good
	parkedTooLarge     = "payload_too_large" // over Config.MaxPayloadBytes
	parkedTopicMissing = "topic_missing"     // the topic does not exist and was not created
	parkedTopicRefused = "topic_refused"     // an invalid topic name, or no right to it
	parkedBlocked      = "blocked"           // behind an earlier parked message of its aggregate
	parkedBadRow       = "bad_row"           // a row that is not a publishable message
)

var parkReasons = []string{parkedRefused, parkedTooLarge, parkedTopicMissing, parkedTopicRefused, parkedBlocked, parkedBadRow}

// errNoAggregateID is the verdict on a message without a Kafka key.
var errNoAggregateID = errors.New("message has no aggregate id (the Kafka key)")

// verdict says why a message cannot be published.
type verdict struct {
	class string // a parkReasons entry
	err   error  // the cause; its text is the dead letter's reason
	by    *schema.Blocker
}

func blockedVerdict(b schema.Blocker) verdict {
	return verdict{class: parkedBlocked, err: fmt.Errorf("blocked by %s", blockerName(b)), by: &b}
}

func blockerName(b schema.Blocker) string {
	if b.MessageID != nil {
		return b.MessageID.String()
	}
	return "the row at " + b.Position.String()
}

func aggregateOf(m *schema.Message) schema.Aggregate {
	return schema.Aggregate{Type: m.AggregateType, ID: m.AggregateID}
}

// blocks holds the blocker of each blocked aggregate: its first parked
// message. A message of the aggregate positioned strictly after it is
// parked behind it; an earlier or equal position is a replay and is not.
type blocks struct {
	gauge prometheus.Gauge

	mu sync.Mutex
	by map[schema.Aggregate]schema.Blocker
}

func newBlocks(initial []schema.Blocker, gauge prometheus.Gauge) *blocks {
	b := &blocks{gauge: gauge, by: make(map[schema.Aggregate]schema.Blocker, len(initial))}
	for _, x := range initial {
		b.add(x)
	}
	b.gauge.Set(float64(len(b.by)))
	return b
}

// add blocks x's aggregate behind x, unless it is blocked by an earlier
// message already. An aggregate without an id blocks nothing.
func (b *blocks) add(x schema.Blocker) {
	if !x.Aggregate.Known() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.by[x.Aggregate]; ok && !x.Position.Less(cur.Position) {
		return
	}
	b.by[x.Aggregate] = x
	b.gauge.Set(float64(len(b.by)))
}

// blocking returns the blocker m waits behind, if any.
func (b *blocks) blocking(m *schema.Message) (schema.Blocker, bool) {
	a := aggregateOf(m)
	if !a.Known() {
		return schema.Blocker{}, false
	}
	b.mu.Lock()
	x, ok := b.by[a]
	b.mu.Unlock()
	return x, ok && x.Position.Less(m.Position())
}

// lift removes x, if it still is its aggregate's blocker.
func (b *blocks) lift(x schema.Blocker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.by[x.Aggregate]; ok && cur.Position == x.Position {
		delete(b.by, x.Aggregate)
		b.gauge.Set(float64(len(b.by)))
	}
}

// Block parks every message of b's aggregate positioned after b behind it.
// The relay calls it when it parks a row the decoder could not decode,
// before it publishes anything later. A block by an earlier message of the
// aggregate stays.
func (s *Sink) Block(b schema.Blocker) { s.blocks.add(b) }

// judge returns the verdict on a queued record, if it must be parked: it
// waits behind a blocker, or Publish found it bad.
func (s *Sink) judge(r *record) (verdict, bool) {
	if r.msg == nil {
		return verdict{}, false
	}
	if b, ok := s.blocks.blocking(r.msg); ok {
		return blockedVerdict(b), true
	}
	if r.bad != nil {
		return *r.bad, true
	}
	return verdict{}, false
}

// place is where a message was headed; partition is -1 before routing.
type place struct {
	topic     string
	partition int
}

// park hands m to Config.Park for v and reports whether it is parked. With
// no Park, it fails the sink with an *Error instead. Park errors are
// retried until ctx is done or stop is closed. When Park declines a blocked
// message, the block is lifted and park returns false, nil: the caller
// judges the message again. A first failure blocks m's aggregate.
func (s *Sink) park(ctx context.Context, stop <-chan struct{}, at place, m *schema.Message, token uint64, v verdict) (bool, error) {
	if s.cfg.Park == nil {
		return false, s.fail(messageError(at.topic, at.partition, m, token, v.err))
	}
	dl := deadLetter(m, at.topic, v)
	parked, err := s.callPark(ctx, stop, at, dl)
	switch {
	case err != nil:
		return false, err
	case !parked && v.by == nil:
		return false, s.fail(messageError(at.topic, at.partition, m, token,
			fmt.Errorf("the dead-letter store declined a message that is not blocked (%s)", dl.Reason)))
	case !parked:
		s.blocks.lift(*v.by)
		s.log.Info("aggregate unblocked meanwhile, publishing the message after all",
			append(messageFields(m, at), zap.String("blocked_by", blockerName(*v.by)))...)
		return false, nil
	}
	if v.by == nil {
		s.blocks.add(schema.Blocker{Aggregate: dl.Aggregate, Position: dl.Position, MessageID: dl.MessageID})
	}
	s.m.parked.WithLabelValues(v.class).Inc()
	s.logParked(m, at, dl, v)
	return true, nil
}

// callPark calls Config.Park until it answers without an error. Before each
// call it checks the Guard: a process that lost its lease parks nothing.
func (s *Sink) callPark(ctx context.Context, stop <-chan struct{}, at place, dl schema.DeadLetter) (bool, error) {
	for attempt := 0; ; attempt++ {
		if s.cfg.Guard != nil {
			if err := s.cfg.Guard(); err != nil {
				return false, fmt.Errorf("not parking message %s: %w", dl.Message.ID, err)
			}
		}
		parked, err := s.cfg.Park(ctx, dl)
		if err == nil {
			return parked, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		s.m.parkFailures.Inc()
		d := backoff(attempt, s.cfg.RetryBackoffMin, s.cfg.RetryBackoffMax, s.rnd)
		s.log.Warn("parking a message failed, retrying", append(messageFields(dl.Message, at),
			zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))...)
		if !sleep(ctx, stop, d) {
			if err := s.stopped(); err != nil {
				return false, err
			}
			return false, ctx.Err()
		}
	}
}

// deadLetter is the dead-letter row of m, headed for topic, parked for v.
func deadLetter(m *schema.Message, topic string, v verdict) schema.DeadLetter {
	id := m.ID
	return schema.DeadLetter{
		Position:   m.Position(),
		Message:    m,
		MessageID:  &id,
		Aggregate:  aggregateOf(m),
		Topic:      topic,
		CommitTime: m.CommitTime,
		Reason:     oneLine(v.err.Error()),
		BlockedBy:  v.by,
	}
}

// oneLine folds a multi-line error text (a broker's message may have
// several) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func messageFields(m *schema.Message, at place) []zap.Field {
	return []zap.Field{
		zap.Stringer("message_id", m.ID), zap.String("aggregate_type", m.AggregateType),
		zap.String("aggregate_id", m.AggregateID), zap.Stringer("position", m.Position()),
		zap.String("topic", at.topic), zap.Int("partition", at.partition),
	}
}

// logParked logs a parked message once: a first failure as a warning, a
// message parked behind it as information.
func (s *Sink) logParked(m *schema.Message, at place, dl schema.DeadLetter, v verdict) {
	fields := append(messageFields(m, at), zap.String("reason", dl.Reason), zap.String("reason_class", v.class))
	if v.by != nil {
		s.log.Info("message parked behind its aggregate's blocker", fields...)
		return
	}
	s.log.Warn("message parked in the dead-letter table; later messages of its aggregate will wait behind it", fields...)
}

// parkNow parks m from Publish, in the caller's order: a message that has
// no partition to wait in (no aggregate id, its topic missing or refused).
// A message parked is acknowledged before parkNow returns.
func (s *Sink) parkNow(ctx context.Context, topic string, m *schema.Message, token uint64, v verdict) error {
	at := place{topic: topic, partition: -1}
	for {
		w := v
		if b, ok := s.blocks.blocking(m); ok {
			w = blockedVerdict(b)
		}
		parked, err := s.park(ctx, s.halt, at, m, token, w)
		if err != nil {
			return err
		}
		if parked {
			s.ackToken(token)
			return nil
		}
	}
}
