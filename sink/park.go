package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
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
	by map[tableAggregate]schema.Blocker
}

// tableAggregate is an aggregate of one outbox table: the same aggregate
// type and id in another table is another aggregate.
type tableAggregate struct {
	table int
	agg   schema.Aggregate
}

func blockKey(x schema.Blocker) tableAggregate { return tableAggregate{x.Table, x.Aggregate} }

func newBlocks(initial []schema.Blocker, gauge prometheus.Gauge) *blocks {
	b := &blocks{gauge: gauge, by: make(map[tableAggregate]schema.Blocker, len(initial))}
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
	if cur, ok := b.by[blockKey(x)]; ok && !x.Position.Less(cur.Position) {
		return
	}
	b.by[blockKey(x)] = x
	b.gauge.Set(float64(len(b.by)))
}

// blocking returns the blocker m waits behind, if any.
func (b *blocks) blocking(m *schema.Message) (schema.Blocker, bool) {
	a := aggregateOf(m)
	if !a.Known() {
		return schema.Blocker{}, false
	}
	b.mu.Lock()
	x, ok := b.by[tableAggregate{m.Table, a}]
	b.mu.Unlock()
	return x, ok && x.Position.Less(m.Position())
}

// lift removes x, if it still is its aggregate's blocker.
func (b *blocks) lift(x schema.Blocker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.by[blockKey(x)]; ok && cur.Position == x.Position {
		delete(b.by, blockKey(x))
		b.gauge.Set(float64(len(b.by)))
	}
}

// verdictOn returns the verdict on a record, if it must be parked: it
// waits behind a blocker, or it came with a verdict (Publish found it bad,
// or it is a bad row). A bad row is parked as such even behind a blocker:
// it is the row's own fault, and the earlier blocker stays.
func (s *Sink) verdictOn(r *record) (verdict, bool) {
	if r.msg != nil {
		if b, ok := s.blocks.blocking(r.msg); ok {
			return blockedVerdict(b), true
		}
	}
	if r.bad != nil {
		return *r.bad, true
	}
	return verdict{}, false
}

// place is where a record was headed; partition is -1 before routing.
type place struct {
	topic     string
	partition int
}

// park is the one way a record leaves the sink without Kafka: it hands r's
// dead letter to Config.Park for v and, once stored, blocks r's aggregate
// (for a first failure), counts and logs it and acks r. Without Park it
// fails the sink instead. When Park declines a blocked record, the block
// is lifted and park returns false, nil: the caller judges r again.
func (s *Sink) park(ctx context.Context, at place, r *record, v verdict) (bool, error) {
	if s.cfg.Park == nil {
		return false, s.fail(s.refusal(r, at, v.err))
	}
	dl := s.deadLetter(r, at.topic, v)
	parked, err := s.store(ctx, at, dl)
	switch {
	case err != nil:
		return false, err
	case !parked && v.by == nil:
		return false, s.fail(s.refusal(r, at, fmt.Errorf("the dead-letter store declined a message that is not blocked (%s)", dl.Reason)))
	case !parked:
		s.blocks.lift(*v.by)
		s.log.Info("aggregate unblocked meanwhile, publishing the message after all",
			append(letterFields(dl, at), zap.String("blocked_by", blockerName(*v.by)))...)
		return false, nil
	}
	if v.by == nil {
		s.blocks.add(schema.Blocker{Table: dl.Table, Aggregate: dl.Aggregate, Position: dl.Position, MessageID: dl.MessageID})
	}
	s.m.parked.WithLabelValues(v.class).Inc()
	s.logParked(dl, at, v)
	s.inflight.release(1, s.report([]*record{r}))
	return true, nil
}

// store calls Config.Park until it answers without an error, with backoff.
// Before each call it checks the Guard: a process that lost its lease
// parks nothing.
func (s *Sink) store(ctx context.Context, at place, dl schema.DeadLetter) (bool, error) {
	for attempt := 0; ; attempt++ {
		if s.cfg.Guard != nil {
			if err := s.cfg.Guard(); err != nil {
				return false, fmt.Errorf("not parking the row at %s: %w", dl.Position, err)
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
		d := s.retry.Delay(attempt)
		s.log.Warn("parking a message failed, retrying", append(letterFields(dl, at),
			zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))...)
		if err := backoff.Sleep(ctx, d); err != nil {
			return false, err
		}
	}
}

// refusal is the error that fails the sink, under the halt policy, on r.
func (s *Sink) refusal(r *record, at place, err error) error {
	if r.row != nil {
		return fmt.Errorf("row at %s: %w", r.row.DeadLetter().Position, err)
	}
	return messageError(at.topic, at.partition, r.msg, r.token, err)
}

// deadLetter is the dead-letter row of r, headed for topic, parked for v.
func (s *Sink) deadLetter(r *record, topic string, v verdict) schema.DeadLetter {
	if r.row != nil {
		dl := r.row.DeadLetter()
		dl.Reason = oneLine(v.err.Error())
		return dl
	}
	m := r.msg
	id := m.ID
	return schema.DeadLetter{
		Position:   m.Position(),
		Table:      m.Table,
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

// letterFields are the log fields of a dead letter headed for at.
func letterFields(dl schema.DeadLetter, at place) []zap.Field {
	fields := make([]zap.Field, 0, 6)
	if dl.MessageID != nil {
		fields = append(fields, zap.Stringer("message_id", dl.MessageID))
	}
	return append(fields, zap.String("aggregate_type", dl.Aggregate.Type),
		zap.String("aggregate_id", dl.Aggregate.ID), zap.Stringer("position", dl.Position),
		zap.String("topic", at.topic), zap.Int("partition", at.partition))
}

// logParked logs a parked record once: a first failure as a warning, a
// message parked behind it as information.
func (s *Sink) logParked(dl schema.DeadLetter, at place, v verdict) {
	fields := append(letterFields(dl, at), zap.String("reason", dl.Reason), zap.String("reason_class", v.class))
	if v.by != nil {
		s.log.Info("message parked behind its aggregate's blocker", fields...)
		return
	}
	s.log.Warn("message parked in the dead-letter table; later messages of its aggregate will wait behind it", fields...)
}

// parkNow parks r from Publish, in the caller's order: a record that has no
// partition to wait in (a bad row, a message without an aggregate id, its
// topic missing or refused). It takes r's in-flight room first, as every
// record the sink holds does, and returns once r is parked and acked.
// Its waits end when the sink halts.
func (s *Sink) parkNow(ctx context.Context, topic string, r *record, v verdict) error {
	ctx, cancel := s.untilHalted(ctx)
	defer cancel()
	if err := s.acquire(ctx, r); err != nil {
		return s.ended(ctx, err)
	}
	r.bad = &v
	at := place{topic: topic, partition: -1}
	for {
		w, _ := s.verdictOn(r)
		parked, err := s.park(ctx, at, r, w)
		if err != nil || parked {
			if !parked {
				s.inflight.release(1, r.size)
			}
			return s.ended(ctx, err)
		}
	}
}

// untilHalted is ctx, ended too when the sink halts (Close or failure), for
// the waits of Publish: a caller in a retry loop wakes when the sink stops.
func (s *Sink) untilHalted(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.halted, cancel)
	return ctx, func() { stop(); cancel() }
}

// ended is err as Publish returns it: when err came from a wait on ctx
// that ended because the sink halted, the reason it halted.
func (s *Sink) ended(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if stop := s.stopped(); stop != nil {
			return stop
		}
	}
	return err
}
