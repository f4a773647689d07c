package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/failpoint"
	"github.com/walrelay/walrelay/internal/kafkawire"
)

// partition is the queue of one topic-partition. Publish pushes; one worker
// goroutine takes batches, sends one at a time and acks each before it takes
// the next, so a later batch never reaches Kafka before an earlier one is
// acknowledged.
type partition struct {
	topicPartition
	published prometheus.Counter // messages Kafka acknowledged
	requests  prometheus.Counter // produce requests Kafka acknowledged
	wake      chan struct{}      // capacity 1: a push, or Close

	// res skips what the partition's log already holds (resume); nil when
	// nothing is skipped. skipped counts what it skipped. Worker only.
	res     *resumer
	skipped int

	mu    sync.Mutex
	queue []*record
	wire  int  // estimated encoded bytes queued
	busy  bool // a batch was taken and is not yet acknowledged or parked
	// lane is the lane the partition is on (lane.go): it takes the
	// batches, and the worker waits. nil: the worker takes them.
	lane *lane
	// back is what the lane last handed back to the worker, for it to
	// finish before anything else; nil when nothing was.
	back *handback
}

// finished records that the batch last taken is done: acknowledged,
// parked or skipped.
func (p *partition) finished() {
	p.mu.Lock()
	p.busy = false
	p.mu.Unlock()
}

// idle reports that nothing is queued and no batch is in flight.
func (p *partition) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) == 0 && !p.busy
}

func newPartition(tp topicPartition, published, requests prometheus.Counter) *partition {
	return &partition{topicPartition: tp, published: published, requests: requests, wake: make(chan struct{}, 1)}
}

// push queues r, and wakes the worker only when that changes what it
// waits for: the queue was empty (it waits for a push, or will look when
// its batch in flight is done) or now holds a full batch (it lingers on the
// oldest record's timer). A record joining a lingering batch wakes nobody:
// at steady load, a wake-up a message cost walrelay more CPU than the
// produce request it waited for.
//
// On a lane, the lane is told instead, and only of what changes when it
// looks: a first record queued, or a full batch.
func (p *partition) push(r *record, cfg *Config) {
	p.mu.Lock()
	p.queue = append(p.queue, r)
	p.wire += r.wire
	full := p.full(cfg)
	wake := len(p.queue) == 1 || full
	l := p.lane
	var due time.Time
	if l != nil && wake {
		due, _ = p.due(r.time, cfg)
	}
	p.mu.Unlock()
	switch {
	case !wake:
	case l != nil:
		l.add(p, due)
	default:
		signal(p.wake)
	}
}

// full reports that the queue holds a full batch (p.mu held).
func (p *partition) full(cfg *Config) bool {
	return len(p.queue) >= cfg.BatchMaxMessages || batchOverhead+p.wire >= cfg.BatchMaxBytes
}

// fullNow is full, taking p.mu.
func (p *partition) fullNow(cfg *Config) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.full(cfg)
}

// takeBack returns what the lane handed back, if anything, and forgets it.
func (p *partition) takeBack() *handback {
	p.mu.Lock()
	defer p.mu.Unlock()
	hb := p.back
	p.back = nil
	return hb
}

// take removes and returns the next batch if one is due at now: the queue
// holds a full batch, the sink is closing, or the oldest record has lingered
// long enough. Otherwise it returns how long to wait (0: wait for a push).
// done is true when the queue is empty and the sink is closing.
func (p *partition) take(now time.Time, closing bool, cfg *Config) (batch []*record, wait time.Duration, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil, 0, closing
	}
	full := p.full(cfg)
	if wait = p.queue[0].time.Add(linger(p.queue[0], cfg)).Sub(now); !full && !closing && wait > 0 {
		return nil, wait, false
	}
	n := batchLen(p.queue, cfg.BatchMaxMessages, cfg.BatchMaxBytes)
	batch = make([]*record, n)
	copy(batch, p.queue)
	for i := range n {
		p.wire -= p.queue[i].wire
		p.queue[i] = nil // let the acked records go
	}
	p.queue = p.queue[n:]
	p.busy = true
	return batch, 0, false
}

// Lingering grows while a backlog drains (DECISIONS.md 38).
const (
	// lingerShare: a record lingers a tenth of how late it already was...
	lingerShare = 10
	// lingerGrowth: ...but at most ten times Config.Linger.
	lingerGrowth = 10
)

// linger is how long r may wait for its batch to fill: Config.Linger, or,
// when r was already late when Publish took it (committed that long before),
// a tenth of that lateness, up to ten times Config.Linger. A backlog then
// drains in fuller, fewer produce requests, which spares the broker and
// walrelay a request per handful of records when the topic has many
// partitions, while a relay that keeps up (records a few milliseconds late)
// lingers as configured: a message never waits more than a tenth longer
// than it already has. A record of unknown commit time (a bad row, a
// message `walrelay recover` read from the table) lingers as configured.
func linger(r *record, cfg *Config) time.Duration {
	if r.msg == nil || r.msg.CommitTime.IsZero() {
		return cfg.Linger
	}
	return max(cfg.Linger, min(r.time.Sub(r.msg.CommitTime)/lingerShare, lingerGrowth*cfg.Linger))
}

// batchLen is how many records from the front of queue make one batch: at
// most maxMsgs, and at most maxBytes of estimated encoding, but at least one
// (a record larger than maxBytes goes alone, and Kafka judges it).
func batchLen(queue []*record, maxMsgs, maxBytes int) int {
	size := batchOverhead
	for i, r := range queue {
		if i == maxMsgs || i > 0 && size+r.wire > maxBytes {
			return i
		}
		size += r.wire
	}
	return len(queue)
}

// work is the goroutine of partition p: it handles batch after batch until
// the queue is drained after Close (nil), a batch fails for good (*Error),
// or ctx is done.
//
// Between batches it puts the partition on its leader's lane (lane.go),
// when it can, and waits while the lane sends; it finishes what the lane
// hands back to it.
func (s *Sink) work(ctx context.Context, p *partition) error {
	s.resume(ctx, p)
	for {
		if hb := p.takeBack(); hb != nil {
			if hb.batch != nil {
				if err := s.finishBack(ctx, p, hb); err != nil {
					return err
				}
				p.finished()
				continue
			}
		} else if !p.fullNow(&s.cfg) && s.join(ctx, p) {
			drained, err := s.onLane(ctx, p)
			if err != nil || drained {
				return err
			}
			continue
		}
		batch, err := s.nextBatch(ctx, p)
		if err != nil || batch == nil {
			return err
		}
		if batch = s.skipCovered(p, batch); len(batch) > 0 {
			if err := s.flush(ctx, p, batch); err != nil {
				return err
			}
		}
		p.finished()
	}
}

// finishBack gets a batch a lane handed back acknowledged, retried from
// the lane's failure with the lane's stamp, or parked, as flush does a run.
func (s *Sink) finishBack(ctx context.Context, p *partition, hb *handback) error {
	err := s.sendFrom(ctx, p, hb.batch, hb.att, hb.err)
	var refused *refusedError
	switch {
	case err == nil:
		s.acked(p, hb.batch)
		return nil
	case !errors.As(err, &refused):
		return err
	}
	return s.findRefused(ctx, p, hb.batch, refused.err)
}

// flush handles the records of batch in order: each run of records that
// need no parking is produced as one request, each other record is parked.
// When Kafka refuses a run for good, its records are sent one at a time to
// find the culprit (under the halt policy too: the records before it are
// published, and the sink fails naming the culprit itself).
func (s *Sink) flush(ctx context.Context, p *partition, batch []*record) error {
	for len(batch) > 0 {
		n := s.publishable(batch)
		if n == 0 {
			if err := s.sendAlone(ctx, p, batch[0]); err != nil {
				return err
			}
			batch = batch[1:]
			continue
		}
		run := batch[:n]
		batch = batch[n:]
		err := s.send(ctx, p, run)
		var refused *refusedError
		switch {
		case err == nil:
			s.acked(p, run)
		case !errors.As(err, &refused):
			return err
		default:
			if err := s.findRefused(ctx, p, run, refused.err); err != nil {
				return err
			}
		}
	}
	return nil
}

// publishable is how many records from the front of batch need no parking.
func (s *Sink) publishable(batch []*record) int {
	for i, r := range batch {
		if _, park := s.verdictOn(r); park {
			return i
		}
	}
	return len(batch)
}

// findRefused finds what Kafka refused in run without breaking its order: a
// single record is parked; several are sent one at a time, each
// acknowledged (or parked) before the next. Kafka wrote none of a refused
// batch, so each record still reaches Kafka once, or is parked.
func (s *Sink) findRefused(ctx context.Context, p *partition, run []*record, err error) error {
	if len(run) == 1 {
		_, err := s.park(ctx, place{p.topic, p.id}, run[0], refusedVerdict(err))
		return err
	}
	s.log.Warn("kafka refused a batch for good, sending its records one at a time to find the culprit",
		zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Int("messages", len(run)),
		zap.Stringer("first_message_id", run[0].id), zap.Error(err))
	for _, r := range run {
		if err := s.sendAlone(ctx, p, r); err != nil {
			return err
		}
	}
	return nil
}

// sendAlone parks r when it must be, else produces it alone, and parks it
// when Kafka refuses it for good. When Park declines a blocked record (its
// aggregate was unblocked meanwhile), r is judged again.
func (s *Sink) sendAlone(ctx context.Context, p *partition, r *record) error {
	for {
		v, park := s.verdictOn(r)
		if !park {
			err := s.send(ctx, p, []*record{r})
			var refused *refusedError
			switch {
			case err == nil:
				s.acked(p, []*record{r})
				return nil
			case !errors.As(err, &refused):
				return err
			}
			v = refusedVerdict(refused.err)
		}
		if parked, err := s.park(ctx, place{p.topic, p.id}, r, v); parked || err != nil {
			return err
		}
	}
}

// refusedVerdict is the verdict on a record Kafka refused for good.
func refusedVerdict(err error) verdict {
	return verdict{class: parkedRefused, err: fmt.Errorf("kafka refused the record: %w", err)}
}

// nextBatch waits for the next due batch of p; nil, nil means drained.
func (s *Sink) nextBatch(ctx context.Context, p *partition) ([]*record, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		batch, wait, done := p.take(s.now(), s.closing.Load(), &s.cfg)
		if batch != nil || done {
			return batch, nil
		}
		var expired <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			expired = timer.C
		}
		select {
		case <-p.wake:
		case <-expired:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// send produces batch to p with acks=all, retrying transient failures
// until Kafka acknowledges it or ctx is done (retryDelay says how long each
// retry waits). Each retry sends the same records again, so it may
// duplicate them but never reorders or skips. A permanent failure is a
// *refusedError.
func (s *Sink) send(ctx context.Context, p *partition, batch []*record) error {
	return s.sendFrom(ctx, p, batch, &attempt{}, nil)
}

// sendFrom is send for a batch stamped att whose first produce, made
// elsewhere (a lane), failed with err; err nil: it was not made.
func (s *Sink) sendFrom(ctx context.Context, p *partition, batch []*record, att *attempt, err error) error {
	var st retryState
	for attempt := 0; ; attempt, err = attempt+1, nil {
		if err == nil {
			if s.cfg.Guard != nil {
				if err := s.cfg.Guard(); err != nil {
					return fmt.Errorf("not producing to %s/%d: %w", p.topic, p.id, err)
				}
			}
			err = s.produce(ctx, p, batch, att)
			if err == nil {
				return nil
			}
		}
		failedAt := time.Now()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		class := classify(err)
		var rerr *recordError
		if errors.As(err, &rerr) {
			class = classPermanent
		}
		s.m.errors.WithLabelValues(class.String()).Inc()
		if class == classPermanent {
			return &refusedError{err}
		}
		if layoutMoved(err) {
			signal(s.recheckWake)
		}
		d, wait := s.retryDelay(ctx, p, err, failedAt, &st)
		if st.logged() {
			s.log.Warn("produce failed, retrying the batch",
				zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Int("messages", len(batch)),
				zap.Stringer("first_message_id", batch[0].id), zap.Int("attempt", attempt+1),
				zap.Duration("backoff", d), zap.String("waiting_for", wait), zap.Stringer("class", class), zap.Error(err))
		}
		s.m.retries.Inc()
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
		if att.stamp != kafkawire.NoStamp && att.stamped {
			continue // the broker drops what it has of a batch sent again with its stamp
		}
		if n := s.writtenAlready(ctx, p, batch); n > 0 {
			s.m.resumeSkipped.WithLabelValues(p.topic).Add(float64(n))
			s.log.Info("the failed produce was written all the same: the partition's log in Kafka holds these records, the retry sends the rest",
				zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Int("written", n), zap.Int("rest", len(batch)-n),
				zap.Stringer("first_message_id", batch[0].id))
			if n == len(batch) {
				return nil
			}
			batch = batch[n:]
		}
	}
}

// retryState is what the retries of one batch have seen so far.
type retryState struct {
	outages  int // retries waited out with the outage backoff
	polls    int // looks at the layout while the partition had no new leader
	unlogged int // retries not logged since the last one logged
}

// logged reports whether this retry is logged: every retry in an outage,
// the first of a wait for a new leader and then every tenth (the looks are
// a second apart at most: the log shows the wait without a line a look).
func (st *retryState) logged() bool {
	if st.polls <= 1 {
		return true
	}
	st.unlogged++
	if st.unlogged == 10 {
		st.unlogged = 0
		return true
	}
	return false
}

// leaderPoll spaces the looks at the layout while a partition waits for a
// new leader: 100ms, growing to a second, so that a retry follows Kafka's
// election within about a second (Kafka elects one once the old leader's
// broker session times out: broker.session.timeout.ms, 9s by default).
var leaderPoll = backoff.Policy{Min: 100 * time.Millisecond, Max: time.Second}

// layoutWait bounds a retry's read of the cluster's layout.
const layoutWait = time.Second

// retryDelay is how long a produce that failed with the transient err at
// failedAt waits before it is retried, and what it waits for. When err says
// the partition's leader may have moved (movedLeader) and the producer
// routes by a layout of its own, the layout is read again: a partition led
// by another broker now is retried at once, one with no leader yet (or
// still the one that failed) looks again soon (leaderPoll). A leader that
// answers it lacks in-sync replicas (replicasAway) is asked again soon as
// well. Only when no broker answers the read, or after any other error, is
// it an outage, waited out with the exponential backoff of
// Config.RetryBackoffMin/Max: the backoff grows while Kafka is out of
// reach, not while it elects or waits for its replicas.
func (s *Sink) retryDelay(ctx context.Context, p *partition, err error, failedAt time.Time, st *retryState) (time.Duration, string) {
	var restamp *restampError
	if errors.As(err, &restamp) {
		return 0, "nothing: the batch is stamped again"
	}
	var l leaders = s.wire
	routes := s.wire != nil
	if !routes {
		l, routes = s.prod.(leaders)
	}
	if routes && movedLeader(err) {
		// A layout that takes longer than layoutWait to read counts as no
		// answer: a paused or cut-off cluster is an outage, and waiting on
		// a dial to it would only space the retries further.
		rctx, cancel := context.WithTimeout(ctx, layoutWait)
		rerr := l.Refresh(rctx, failedAt)
		cancel()
		if rerr == nil {
			now, lerr := l.Leader(ctx, p.topic, p.id)
			if lerr == nil && now != brokerOf(err) {
				st.polls = 0
				return 0, "nothing: the partition has a new leader"
			}
			st.polls++
			return leaderPoll.Delay(st.polls - 1), "a new leader of the partition"
		}
	}
	if replicasAway(err) {
		st.polls++
		return leaderPoll.Delay(st.polls - 1), "the partition's in-sync replicas"
	}
	st.outages++
	return s.retry.Delay(st.outages - 1), "kafka to answer"
}

// replicasAway reports an answer of a leader that cannot commit the batch
// now: fewer in-sync replicas than min.insync.replicas (before or after
// the append), or none acknowledged it in time. Kafka answers; it is
// waiting for replicas to catch up or come back, which it does within
// seconds of their return, so the partition looks again within a second
// (as the Java producer does, retry.backoff.max.ms 1s) rather than waiting
// out the backoff of an outage.
func replicasAway(err error) bool {
	return errors.Is(err, kafka.NotEnoughReplicas) || errors.Is(err, kafka.NotEnoughReplicasAfterAppend) ||
		errors.Is(err, kafka.RequestTimedOut)
}

// movedLeader reports an error after which the partition's leader may be
// another broker: the broker said it does not lead the partition (or
// knows none), the partition had no leader to send to, or the connection
// to the leader failed or timed out (a dead or partitioned broker).
func movedLeader(err error) bool {
	var cerr *kafkawire.ConnError
	return layoutMoved(err) || errors.Is(err, kafka.BrokerNotAvailable) || errors.Is(err, kafka.ReplicaNotAvailable) ||
		errors.Is(err, kafkawire.ErrNoLeader) || errors.As(err, &cerr) || errors.Is(err, context.DeadlineExceeded)
}

// produce sends batch once (att: what its tries share). Success means the
// broker answered without a partition error and without record errors.
func (s *Sink) produce(ctx context.Context, p *partition, batch []*record, att *attempt) error {
	var res *kafka.ProduceResponse
	var err error
	if s.wire != nil {
		res, err = s.wire.ProduceRecords(ctx, p.topic, p.id, batch, att)
	} else {
		res, err = s.prod.Produce(ctx, &kafka.ProduceRequest{
			Topic:        p.topic,
			Partition:    p.id,
			RequiredAcks: kafka.RequireAll,
			Records:      kafka.NewRecordReader(kafkaRecords(batch)...),
			Compression:  s.cfg.Compression,
		})
	}
	if err != nil {
		return err
	}
	return responseError(res)
}

// kafkaRecords makes fresh record values for one attempt: kafka-go reads the
// key and value readers to the end when it encodes them, possibly after a
// Produce that timed out has returned, so an attempt never reuses another's
// readers. They take one allocation per batch (kafka.NewBytes takes one
// per key and one per value). A nil key or value stays null.
func kafkaRecords(batch []*record) []kafka.Record {
	out := make([]kafka.Record, len(batch))
	readers := make([]recordBytes, 2*len(batch))
	for i, r := range batch {
		out[i] = kafka.Record{Time: r.time, Headers: r.headers}
		if r.key != nil {
			k := &readers[2*i]
			k.Reset(r.key)
			out[i].Key = k
		}
		if r.value != nil {
			v := &readers[2*i+1]
			v.Reset(r.value)
			out[i].Value = v
		}
	}
	return out
}

// recordBytes is a key or value as kafka-go reads it (kafka.Bytes): a
// bytes.Reader, whose WriteTo spares io.Copy a buffer.
type recordBytes struct{ bytes.Reader }

func (*recordBytes) Close() error { return nil }

// acked reports every record of a batch Kafka acknowledged, in order, and
// frees its in-flight room.
func (s *Sink) acked(p *partition, batch []*record) {
	s.done(p, batch)
	p.requests.Inc()
}

// done reports every record of a batch Kafka acknowledged, in order, and
// frees its in-flight room; the request is counted by the caller.
func (s *Sink) done(p *partition, batch []*record) {
	s.inflight.release(len(batch), s.report(batch))
	p.published.Add(float64(len(batch)))
}

// report tells onAck, in order, that every record of batch is done
// (acknowledged by Kafka, or parked), and returns their size.
func (s *Sink) report(batch []*record) (size int) {
	s.ackMu.Lock()
	for _, r := range batch {
		s.onAck(r.token)
		size += r.size
	}
	s.ackMu.Unlock()
	failpoint.Inject("after-ack")
	return size
}

// refusedError is a produce that Kafka refused for good.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// recordError is a produce response that rejected single records of the
// batch (Produce v8+): always permanent, the records are invalid.
type recordError struct {
	index int // lowest rejected batch index
	err   error
}

func newRecordError(res *kafka.ProduceResponse) *recordError {
	e := &recordError{index: -1}
	for i, err := range res.RecordErrors {
		if e.index < 0 || i < e.index {
			e.index, e.err = i, err
		}
	}
	if res.Error != nil {
		e.err = fmt.Errorf("%w: record %d: %v", res.Error, e.index, e.err)
	} else {
		e.err = fmt.Errorf("record %d: %w", e.index, e.err)
	}
	return e
}

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }
