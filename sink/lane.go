package sink

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/walrelay/walrelay/internal/kafkawire"
)

// A lane is how the partitions one broker leads reach it while nothing goes
// wrong (issue 48, DECISIONS 50): one goroutine that, once the oldest
// record queued on any of them has lingered (or a batch is full, or the
// sink closes), takes a batch from every one of them with records queued
// and sends them all in one produce request, one request at a time. What
// queues while a request is in flight goes in the next one. A partition
// keeps one batch in flight, so its records reach Kafka in order.
//
// Everything else stays with the partition's worker (partition.go): the
// look at the partition's end on resume, parking, and every failure. The
// lane hands a batch it could not get acknowledged back to the worker, with
// its stamp and its error, and the worker retries it as it retries its own
// (Sink.sendFrom); the partition joins a lane again, its leader's, once
// its worker has nothing in hand.
//
// The lane exists for the cost of a message at steady load: a request per
// partition and linger, and the wake-ups of a worker per batch, were most
// of walrelay's CPU and of the broker's. On a lane, a record's Publish
// wakes nobody unless the lane was idle, and a request costs the lane's
// timer and the connection's answer.
type lane struct {
	s      *Sink
	broker int32
	wake   chan struct{} // capacity 1: a partition became due sooner, left, or the sink closes

	mu      sync.Mutex
	members map[*partition]struct{} // partitions on the lane (p.lane == l)
	ready   map[*partition]struct{} // members with records queued
	armed   time.Time               // when the lane's timer fires; zero: it waits for a push
	sending bool                    // a request is being made or answered
	done    bool                    // run returned: nothing joins the lane any more
}

// handback is what a lane returns to a partition's worker: a batch it did
// not get acknowledged, stamped att, and why (err nil: it was not sent);
// or, with batch nil, the queue itself (its front record is to be parked,
// or it holds a full batch).
type handback struct {
	batch []*record
	att   *attempt
	err   error
}

// maxRequestBytes bounds the batches one request carries (the broker's own
// bound, socket.request.max.bytes, is 100 MiB): the rest wait for the next.
const maxRequestBytes = 16 << 20

func newLane(s *Sink, broker int32) *lane {
	return &lane{s: s, broker: broker, wake: make(chan struct{}, 1),
		members: make(map[*partition]struct{}), ready: make(map[*partition]struct{})}
}

// join puts p on its leader's lane, when the sink has lanes (its own
// producer) and p needs its worker for nothing: no look at its end in
// Kafka still deciding what to skip, no batch in hand, not closing. It
// reports whether p is on a lane.
func (s *Sink) join(ctx context.Context, p *partition) bool {
	if s.wire == nil || s.closing.Load() || p.res != nil && !p.res.done {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	id, err := s.wire.Leader(lctx, p.topic, p.id)
	cancel()
	if err != nil {
		return false // the worker sends, and its retries wait for a leader
	}
	l := s.laneOf(id)
	if l == nil {
		return false
	}
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return false
	}
	l.members[p] = struct{}{}
	l.mu.Unlock()
	p.mu.Lock()
	p.lane = l
	due, queued := p.due(s.now(), &s.cfg)
	p.mu.Unlock()
	if queued {
		l.add(p, due)
	}
	return true
}

// laneOf is broker id's lane, started on first use; nil once the sink's
// Run is over (or not yet begun).
func (s *Sink) laneOf(id int32) *lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lanes[id]; l != nil {
		return l
	}
	if s.group == nil {
		return nil
	}
	l := newLane(s, id)
	s.lanes[id] = l
	ctx := s.groupCtx
	s.group.Go(func() error { return l.run(ctx) })
	return l
}

// onLane waits while p is on a lane: until the lane hands it back (false),
// or the sink closes and p is drained (true).
func (s *Sink) onLane(ctx context.Context, p *partition) (bool, error) {
	for {
		p.mu.Lock()
		l := p.lane
		drained := s.closing.Load() && len(p.queue) == 0 && !p.busy
		if drained {
			p.lane = nil
		}
		p.mu.Unlock()
		if l == nil {
			return drained, nil
		}
		if drained {
			l.leave(p)
			return true, nil
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// add tells l that member p has records queued, the oldest due at due
// (zero: now), and wakes the lane if that is sooner than it would look.
func (l *lane) add(p *partition, due time.Time) {
	l.mu.Lock()
	l.ready[p] = struct{}{}
	kick := !l.sending && (l.armed.IsZero() || due.Before(l.armed))
	l.mu.Unlock()
	if kick {
		signal(l.wake)
	}
}

// leave takes p off l.
func (l *lane) leave(p *partition) {
	l.mu.Lock()
	delete(l.members, p)
	delete(l.ready, p)
	l.mu.Unlock()
	signal(l.wake) // a closing lane may be done now
}

// handBack returns p, and hb, to its worker.
func (l *lane) handBack(p *partition, hb *handback) {
	l.mu.Lock()
	delete(l.members, p)
	delete(l.ready, p)
	l.mu.Unlock()
	p.mu.Lock()
	p.lane, p.back = nil, hb
	p.mu.Unlock()
	signal(p.wake)
}

// run sends the lane's requests until the sink closes and no partition is
// on it, or ctx is done.
func (l *lane) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		wait, quit := l.next(l.s.now())
		switch {
		case quit:
			return nil
		case wait == 0:
			l.send(ctx)
			continue
		}
		var expired <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			expired = timer.C
		}
		select {
		case <-l.wake:
			timer.Stop() // Go 1.23's timers: nothing stale comes after Stop
		case <-expired:
		case <-ctx.Done():
			return nil // the group's error says why
		}
	}
}

// next is how long the lane waits before its next request: 0 to send now,
// negative to wait for a push; quit once the sink closed and the lane has
// no partition left.
func (l *lane) next(now time.Time) (wait time.Duration, quit bool) {
	closing := l.s.closing.Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = time.Time{}
	if closing && len(l.members) == 0 {
		l.done = true
		return 0, true
	}
	var due time.Time
	any := false
	for p := range l.ready {
		p.mu.Lock()
		d, queued := p.due(now, &l.s.cfg)
		on := p.lane == l
		p.mu.Unlock()
		if !on || !queued {
			delete(l.ready, p)
			continue
		}
		if !any || d.Before(due) {
			due, any = d, true
		}
	}
	switch {
	case !any:
		return -1, false
	case closing || !due.After(now):
		return 0, false
	}
	l.armed = due
	return due.Sub(now), false
}

// due is when p's queue must go (p.mu held): when its oldest record has
// lingered, or now when a batch is full. queued is false for an empty
// queue.
func (p *partition) due(now time.Time, cfg *Config) (due time.Time, queued bool) {
	if len(p.queue) == 0 {
		return time.Time{}, false
	}
	if p.full(cfg) {
		return now, true
	}
	return p.queue[0].time.Add(linger(p.queue[0], cfg)), true
}

// laneBatch is one partition's batch in a lane's request.
type laneBatch struct {
	p     *partition
	batch []*record
	att   *attempt
	set   []byte // the encoded record batch
}

// send takes a batch from every ready partition, sends them in one request
// and hands each partition's answer to it: acknowledged, or back to its
// worker.
func (l *lane) send(ctx context.Context) {
	l.mu.Lock()
	l.sending = true
	items := l.take()
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.sending = false
		l.mu.Unlock()
	}()
	if len(items) == 0 {
		return
	}
	s, w := l.s, l.s.wire
	if s.cfg.Guard != nil && s.cfg.Guard() != nil {
		l.handBackAll(items, nil) // the worker's send says why it does not produce
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.writeTimeout)
	defer cancel()
	conn, err := w.Conn(ctx, l.broker)
	if err != nil {
		l.handBackAll(items, &sentTo{broker: l.broker, err: err})
		return
	}
	items = l.encode(ctx, conn, items)
	if len(items) == 0 {
		return
	}
	msg, err := conn.Do(ctx, produceRequest(items, w.writeTimeout))
	if err != nil {
		for _, it := range items {
			w.judge(it.tp(), it.att, len(it.batch), err)
		}
		l.handBackAll(items, &sentTo{broker: l.broker, err: err})
		return
	}
	res := msg.(*produceAPI.Response)
	acked := make(map[string]bool)
	for _, it := range items {
		r, err := produceResponse(res, &kafka.ProduceRequest{Topic: it.p.topic, Partition: it.p.id})
		if err == nil {
			r, err = w.answered(it.tp(), it.att, len(it.batch), l.broker, r)
		}
		if err == nil {
			err = responseError(r)
		}
		if err != nil {
			l.handBack(it.p, &handback{batch: it.batch, att: it.att, err: err})
			continue
		}
		s.done(it.p, it.batch)
		if !acked[it.p.topic] {
			acked[it.p.topic] = true
			it.p.requests.Inc()
		}
		it.p.finished()
		if s.closing.Load() {
			signal(it.p.wake) // its worker waits for it to drain
		}
	}
}

// take removes a batch from every ready partition (l.mu held), up to
// maxRequestBytes in all. A partition whose front record is to be parked
// goes back to its worker.
func (l *lane) take() []laneBatch {
	cfg := &l.s.cfg
	var items []laneBatch
	size := 0
	for p := range l.ready {
		if size >= maxRequestBytes {
			break
		}
		p.mu.Lock()
		if p.lane != l || p.busy || len(p.queue) == 0 {
			if p.lane != l || len(p.queue) == 0 {
				delete(l.ready, p)
			}
			p.mu.Unlock()
			continue
		}
		n := batchLen(p.queue, cfg.BatchMaxMessages, cfg.BatchMaxBytes)
		k := 0
		for k < n {
			if _, park := l.s.verdictOn(p.queue[k]); park {
				break
			}
			k++
		}
		if k == 0 || p.full(cfg) {
			// The worker parks the front record (flush), or sends a full
			// batch: a backlog drains through the workers, a request a
			// partition, whose batches are full already and are encoded
			// in parallel. The partition is the worker's until then.
			p.lane, p.back = nil, &handback{}
			delete(l.members, p)
			delete(l.ready, p)
			p.mu.Unlock()
			signal(p.wake)
			continue
		}
		batch := make([]*record, k)
		copy(batch, p.queue)
		for i := range k {
			p.wire -= p.queue[i].wire
			size += p.queue[i].wire
			p.queue[i] = nil
		}
		p.queue = p.queue[k:]
		p.busy = true
		if len(p.queue) == 0 {
			delete(l.ready, p)
		}
		p.mu.Unlock()
		items = append(items, laneBatch{p: p, batch: batch, att: &attempt{}})
	}
	return items
}

// encode stamps and encodes each batch; one that cannot be goes back to
// its worker, and encode returns the rest.
func (l *lane) encode(ctx context.Context, conn *kafkawire.Conn, items []laneBatch) []laneBatch {
	w := l.s.wire
	kept := items[:0]
	for _, it := range items {
		err := w.stamp(ctx, conn, it.tp(), len(it.batch), it.att)
		if err != nil {
			err = &sentTo{broker: l.broker, err: err}
		} else {
			it.set, err = kafkawire.AppendRecordSet(nil, &kafkawire.Batch{ProducerID: it.att.stamp.ProducerID, ProducerEpoch: it.att.stamp.Epoch,
				BaseSequence: it.att.stamp.Sequence, Compression: w.compression, Records: wireRecords(it.batch)})
		}
		if err != nil {
			l.handBack(it.p, &handback{batch: it.batch, att: it.att, err: err})
			continue
		}
		kept = append(kept, it)
	}
	return kept
}

func (l *lane) handBackAll(items []laneBatch, err error) {
	for _, it := range items {
		l.handBack(it.p, &handback{batch: it.batch, att: it.att, err: err})
	}
}

func (it *laneBatch) tp() kafkawire.TopicPartition {
	return kafkawire.TopicPartition{Topic: it.p.topic, Partition: int32(it.p.id)}
}

// produceRequest is one acks=all request carrying every item's batch, its
// partitions grouped by topic.
func produceRequest(items []laneBatch, writeTimeout time.Duration) *rawproduce.Request {
	req := &rawproduce.Request{Acks: int16(kafka.RequireAll), Timeout: int32((writeTimeout / 2).Milliseconds())}
	at := make(map[string]int, 1)
	for _, it := range items {
		i, ok := at[it.p.topic]
		if !ok {
			i = len(req.Topics)
			at[it.p.topic] = i
			req.Topics = append(req.Topics, rawproduce.RequestTopic{Topic: it.p.topic})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rawproduce.RequestPartition{
			Partition: int32(it.p.id), RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(it.set)}})
	}
	return req
}

// responseError is what a partition's answer means for its batch: nil when
// Kafka acknowledged it, the records' or the partition's error otherwise.
func responseError(res *kafka.ProduceResponse) error {
	switch {
	case res == nil:
		return errors.New("no produce response")
	case len(res.RecordErrors) > 0:
		return newRecordError(res)
	default:
		return res.Error
	}
}
