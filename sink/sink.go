package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/schema"
)

// AckFunc is told the token of each published message once Kafka has
// acknowledged it with acks=all, or once Config.Park has parked it. It is
// called exactly once per such message, in publish order within a
// partition, never concurrently with itself, from the sink's partition
// goroutines (or, for a message parked before it was queued, from Publish
// before it returns): it must be quick and must not call Publish or Close.
// Messages of a failed batch are never acked.
type AckFunc func(token uint64)

// producer is the produce call of kafka.Client, for one topic-partition.
type producer interface {
	Produce(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error)
}

// Sink publishes messages to Kafka and reports each acknowledgement. Publish
// is called by the owner (normally one goroutine), Run by a supervisor.
type Sink struct {
	cfg      Config
	log      *zap.Logger
	onAck    AckFunc
	prod     producer
	meta     metadataClient
	m        *Metrics
	inflight *inflight
	blocks   *blocks
	now      func() time.Time
	rnd      func(int64) int64
	// createWait is topicCreateWait, shortened by tests.
	createWait time.Duration
	// closeTransport releases the transport's connections and goroutines
	// when the sink made the transport itself; otherwise a no-op.
	closeTransport func()

	topicsMu sync.Mutex
	topics   map[string]int // partition count by topic, fixed for the sink's life
	unusable map[string]*topicError

	mu        sync.Mutex
	parts     map[topicPartition]*partition
	unstarted []*partition // created by Publish, not yet started by Run
	running   bool
	closing   atomic.Bool   // set under mu
	runWake   chan struct{} // capacity 1: new partitions, or Close

	ackMu sync.Mutex // serialises onAck

	haltOnce sync.Once
	halt     chan struct{} // closed by Close or on failure: wakes blocked Publish calls
	failOnce sync.Once
	failed   chan struct{} // closed after err is set
	err      error
}

type topicPartition struct {
	topic string
	id    int
}

// New checks cfg and returns a Sink. It starts nothing: Run does.
func New(cfg Config, log *zap.Logger, onAck AckFunc) (*Sink, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sink config: %w", err)
	}
	closeTransport := func() {}
	if cfg.Transport == nil {
		t := newTransport(cfg)
		cfg.Transport, closeTransport = t, t.CloseIdleConnections
	}
	addr := kafka.TCP(cfg.Brokers...)
	client := &kafka.Client{Addr: addr, Timeout: cfg.WriteTimeout, Transport: cfg.Transport}
	meta := &kafkaMetadata{transport: cfg.Transport, addr: addr, timeout: cfg.WriteTimeout}
	s, err := newSink(cfg, log, onAck, client, meta)
	if err != nil {
		closeTransport()
		return nil, err
	}
	s.closeTransport = closeTransport
	return s, nil
}

// newSink builds a Sink over any producer and metadata source; cfg has its
// defaults applied and is valid.
func newSink(cfg Config, log *zap.Logger, onAck AckFunc, prod producer, meta metadataClient) (*Sink, error) {
	if onAck == nil {
		return nil, errors.New("sink: nil AckFunc")
	}
	if log == nil {
		log = zap.NewNop()
	}
	m := cfg.Metrics
	if m == nil {
		m = privateMetrics()
	}
	return &Sink{
		cfg:            cfg,
		log:            log,
		onAck:          onAck,
		prod:           prod,
		meta:           meta,
		m:              m,
		inflight:       newInflight(cfg.MaxInFlightMessages, cfg.MaxInFlightBytes, m),
		blocks:         newBlocks(cfg.Blocked, m.blocked),
		now:            time.Now,
		rnd:            jitter,
		createWait:     topicCreateWait,
		closeTransport: func() {},
		topics:         make(map[string]int),
		unusable:       make(map[string]*topicError),
		parts:          make(map[topicPartition]*partition),
		runWake:        make(chan struct{}, 1),
		halt:           make(chan struct{}),
		failed:         make(chan struct{}),
	}, nil
}

// Publish routes m to its topic and partition and queues it. It blocks while
// the in-flight bounds are reached, and on the first message of a topic
// while the topic's partition count is looked up. It returns an error after
// the sink failed (the permanent *Error), after Close (ErrClosed), or when
// ctx is done; the message is then not queued and will not be acked.
//
// A message that cannot be published (no aggregate id, its topic missing or
// refused, a payload over MaxPayloadBytes) fails the sink with an *Error,
// or with Config.Park is parked: at once, in the caller's order, when it
// has no partition to wait in, else when its partition reaches it.
//
// The sink keeps m and its Payload until the message is acked; the caller
// must not change them.
func (s *Sink) Publish(ctx context.Context, m *schema.Message, token uint64) error {
	if err := s.stopped(); err != nil {
		return err
	}
	topic := topicFor(s.cfg.TopicTemplate, m)
	if m.AggregateID == "" {
		return s.parkNow(ctx, topic, m, token, verdict{class: parkedBadRow, err: errNoAggregateID})
	}
	n, err := s.partitionCount(ctx, topic)
	if err != nil {
		var terr *topicError
		if errors.As(err, &terr) {
			return s.parkNow(ctx, topic, m, token, verdict{class: terr.class, err: terr.err})
		}
		return err
	}
	tp := topicPartition{topic, partitionFor(m.AggregateID, n)}
	r := newRecord(m, token, s.cfg.Source, s.now())
	if len(m.Payload) > s.cfg.MaxPayloadBytes {
		r.bad = &verdict{class: parkedTooLarge, err: fmt.Errorf("payload of %d bytes is over the limit of %d bytes (--max-payload-bytes)",
			len(m.Payload), s.cfg.MaxPayloadBytes)}
		if s.cfg.Park == nil {
			return s.fail(messageError(topic, tp.id, m, token, r.bad.err))
		}
	}
	if err := s.inflight.acquire(ctx, s.halt, r.size); err != nil {
		if errors.Is(err, errStopped) {
			return s.stopped()
		}
		return err
	}
	return s.enqueue(tp, r)
}

// errStopped is what a wait returns when the sink halts under it.
var errStopped = errors.New("sink stopped")

// enqueue appends r to its partition's queue, creating the partition (for
// Run to start) on first use. The in-flight room of r is already taken.
func (s *Sink) enqueue(tp topicPartition, r *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopped(); err != nil {
		s.inflight.release(1, r.size)
		return err
	}
	p := s.parts[tp]
	if p == nil {
		p = newPartition(tp, s.m.published.WithLabelValues(tp.topic))
		s.parts[tp] = p
		s.unstarted = append(s.unstarted, p)
		signal(s.runWake)
	}
	p.push(r)
	return nil
}

// Close stops Publish and tells Run to send everything queued at once,
// without lingering, and to return nil once all of it is acknowledged.
func (s *Sink) Close() {
	s.mu.Lock()
	if s.closing.Swap(true) {
		s.mu.Unlock()
		return
	}
	parts := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		parts = append(parts, p)
	}
	s.mu.Unlock()
	s.haltOnce.Do(func() { close(s.halt) })
	for _, p := range parts {
		signal(p.wake)
	}
	signal(s.runWake)
}

// stopped is the error Publish returns now: the failure, ErrClosed, or nil.
func (s *Sink) stopped() error {
	select {
	case <-s.failed:
		return s.err
	default:
	}
	if s.closing.Load() {
		return ErrClosed
	}
	return nil
}

// fail records the sink's first failure and returns it (or the earlier one).
func (s *Sink) fail(err error) error {
	s.failOnce.Do(func() {
		s.err = err
		close(s.failed)
		s.haltOnce.Do(func() { close(s.halt) })
	})
	<-s.failed
	return s.err
}

// Run starts a goroutine per topic-partition as messages for it arrive and
// waits for them. It returns nil after Close once everything queued is
// acknowledged, the first permanent *Error, or ctx's error. No goroutine
// outlives it. Run may be called once.
func (s *Sink) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("sink: Run called twice")
	}
	s.running = true
	s.mu.Unlock()
	defer s.closeTransport()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.supervise(gctx, g) })
	err := g.Wait()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		s.fail(fmt.Errorf("sink stopped: %w", err))
	}
	return err
}

// supervise starts the workers of new partitions until Close or failure.
func (s *Sink) supervise(ctx context.Context, g *errgroup.Group) error {
	for {
		s.mu.Lock()
		parts, closing := s.unstarted, s.closing.Load()
		s.unstarted = nil
		s.mu.Unlock()
		for _, p := range parts {
			g.Go(func() error { return s.work(ctx, p) })
		}
		if closing {
			return nil // no partition can appear after Close
		}
		select {
		case <-s.runWake:
		case <-s.failed:
			return s.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal wakes the reader of a capacity-1 channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
