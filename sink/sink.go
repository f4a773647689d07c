package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/schema"
)

// AckFunc is told the token of each published message once Kafka has
// acknowledged it with acks=all, or once Config.Park has parked it. It is
// called exactly once per such message, in publish order within a
// partition, never concurrently with itself, from the sink's partition
// goroutines (or, for a message or row parked before it was queued, from
// Publish or PublishBad before it returns): it must be quick and must not call Publish or Close.
// Messages of a failed batch are never acked.
type AckFunc func(token uint64)

// producer is the produce call of kafka.Client, for one topic-partition.
type producer interface {
	Produce(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error)
}

// Sink publishes messages to Kafka and reports each acknowledgement. Publish
// is called by the owner (normally one goroutine), Run by a supervisor.
type Sink struct {
	cfg   Config
	log   *zap.Logger
	onAck AckFunc
	prod  producer
	// wire, when set, produces instead of prod: walrelay's own connections
	// and idempotent batches (wire.go); prod is then kafka-go's client.
	wire     *wireProducer
	meta     metadataClient
	m        *Metrics
	retry    backoff.Policy // between attempts of a produce or a park
	inflight *inflight
	blocks   *blocks
	now      func() time.Time
	// createWait is topicCreateWait, shortened by tests.
	createWait time.Duration
	layouts    Layouts
	// recheckWake asks watchPartitions to read the counts again now.
	recheckWake chan struct{}
	// closeTransport releases the transport's connections and goroutines
	// when the sink made the transport itself; otherwise a no-op.
	closeTransport func()

	// mu guards the routing state below, written by Publish and read by Run.
	mu        sync.Mutex
	topics    map[string]int        // partition count by topic, routed by
	held      map[string]*heldTopic // topics whose count changed in Kafka
	unusable  map[string]*topicError
	parts     map[topicPartition]*partition
	unstarted []*partition // created by Publish, not yet started by Run
	running   bool
	closing   atomic.Bool   // set under mu
	runWake   chan struct{} // capacity 1: new partitions, or Close
	// lanes are the brokers' lanes (lane.go), started in group (Run's,
	// with its context groupCtx) as partitions join them.
	lanes    map[int32]*lane
	group    *errgroup.Group
	groupCtx context.Context

	ackMu sync.Mutex // serialises onAck

	// routes caches the template's topic by aggregate type and type, so
	// that a message's topic takes no allocation (topicOf).
	routesMu sync.Mutex
	routes   map[routeKey]string

	drops dropLog // which dropped headers are logged

	// origin is the stream the messages come from (Start); nil for a sink
	// that publishes from elsewhere, whose records carry no WAL position.
	origin atomic.Pointer[Origin]
	// tails reads partitions' ends for Config.ResumeFromKafka; nil when
	// the sink does not resume.
	tails tailReader

	// failed ends with the sink's first failure as its cause; halted ends
	// with it or on Close, and wakes Publish calls that wait.
	failed   context.Context
	failWith context.CancelCauseFunc
	halted   context.Context
	halt     context.CancelFunc
}

// routeKey is what the topic template reads of a message, and whose
// template it is.
type routeKey struct {
	table              int
	aggregateType, typ string
}

// maxRoutes bounds the route cache: beyond it, topics are made per message.
const maxRoutes = 4096

// topicOf is topicFor with the template's results cached.
func (s *Sink) topicOf(m *schema.Message) string {
	tmpl := s.cfg.tables[m.Table].TopicTemplate
	if m.Topic != "" || !strings.Contains(tmpl, "{") {
		return topicFor(tmpl, m)
	}
	k := routeKey{m.Table, m.AggregateType, m.Type}
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	if t, ok := s.routes[k]; ok {
		return t
	}
	t := topicFor(tmpl, m)
	if len(s.routes) < maxRoutes {
		s.routes[k] = t
	}
	return t
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
	if log == nil {
		log = zap.NewNop()
	}
	w, err := newWireProducer(cfg, log)
	switch {
	case err == nil:
		closeKafkaGo := closeTransport
		closeTransport = func() { w.Close(); closeKafkaGo() }
	case errors.Is(err, errForeignTransport):
		w = nil
	default:
		closeTransport()
		return nil, fmt.Errorf("sink config: %w", err)
	}
	s, err := newSink(cfg, log, onAck, client, meta)
	if err != nil {
		closeTransport()
		return nil, err
	}
	s.wire = w
	s.closeTransport = closeTransport
	if cfg.ResumeFromKafka {
		s.tails = &kafkaTails{client: client}
	}
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
	layouts := cfg.Layouts
	if layouts == nil {
		layouts = &memLayouts{n: make(map[string]int)}
	}
	failed, fail := context.WithCancelCause(context.Background())
	halted, halt := context.WithCancel(failed)
	return &Sink{
		cfg:            cfg,
		log:            log,
		onAck:          onAck,
		prod:           prod,
		meta:           meta,
		m:              m,
		retry:          backoff.Policy{Min: cfg.RetryBackoffMin, Max: cfg.RetryBackoffMax},
		inflight:       newInflight(cfg.MaxInFlightMessages, cfg.MaxInFlightBytes, m),
		blocks:         newBlocks(cfg.Blocked, m.blocked),
		now:            time.Now,
		createWait:     topicCreateWait,
		closeTransport: func() {},
		topics:         make(map[string]int),
		held:           make(map[string]*heldTopic),
		routes:         make(map[routeKey]string),
		layouts:        layouts,
		recheckWake:    make(chan struct{}, 1),
		unusable:       make(map[string]*topicError),
		parts:          make(map[topicPartition]*partition),
		lanes:          make(map[int32]*lane),
		runWake:        make(chan struct{}, 1),
		failed:         failed,
		failWith:       fail,
		halted:         halted,
		halt:           halt,
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
	if m.Table < 0 || m.Table >= len(s.cfg.tables) {
		return fmt.Errorf("sink: a message of table %d, of a sink configured for %d", m.Table, len(s.cfg.tables))
	}
	topic := s.topicOf(m)
	if m.AggregateID == "" {
		return s.parkNow(ctx, topic, s.buildRecord(m, token, 0), verdict{class: parkedBadRow, err: errNoAggregateID})
	}
	n, err := s.partitionCount(ctx, topic)
	if err != nil {
		var terr *topicError
		if errors.As(err, &terr) {
			return s.parkNow(ctx, topic, s.buildRecord(m, token, 0), verdict{class: terr.class, err: terr.err})
		}
		return err
	}
	tp := topicPartition{topic, partitionFor(m.AggregateID, n)}
	r := s.buildRecord(m, token, n)
	if len(m.Payload) > s.cfg.MaxPayloadBytes {
		r.bad = &verdict{class: parkedTooLarge, err: fmt.Errorf("payload of %d bytes is over the limit of %d bytes (the maximum payload size)",
			len(m.Payload), s.cfg.MaxPayloadBytes)}
		if s.cfg.Park == nil {
			return s.fail(s.refusal(r, place{tp.topic, tp.id}, r.bad.err))
		}
	}
	if err := s.acquire(ctx, r); err != nil {
		return err
	}
	err = s.enqueue(tp, n, r)
	if errors.Is(err, errRerouted) {
		return s.Publish(ctx, m, token) // routed again, by the topic's new count
	}
	return err
}

// errRerouted is enqueue's answer when the topic's partition count
// changed since the record was routed.
var errRerouted = errors.New("topic rerouted")

// Origin is the stream a relay session's messages come from: Source is
// schema.WALSource of the server's system identifier, the database and the
// slot, Timeline the server's timeline. Ended is where each ancestor of
// Timeline ended (the server's timeline history): the WAL before that LSN
// is the same on both, so a record read on the ancestor vouches for the
// messages committed before it (DECISIONS 47).
type Origin struct {
	Source   string
	Timeline int32
	Ended    map[int32]pglogrepl.LSN
}

// Start tells the sink which stream the messages published from now on
// come from. Each record then carries schema.HeaderWALSource and
// schema.HeaderWALPosition (DECISIONS 47). A sink never started (recover,
// replay, dlq retry: rows read from a table, not in the stream's order)
// publishes records without them. Call it before the first Publish, from
// the goroutine that publishes.
func (s *Sink) Start(o Origin) {
	s.origin.Store(&o)
}

// BadRow is a row that could not become a message, judged by the decoder
// (*decoder.BadRowError): its Error is the precise reason, DeadLetter the
// row as the dead-letter table keeps it.
type BadRow interface {
	error
	DeadLetter() schema.DeadLetter
}

// PublishBad takes a row that cannot become a message, with token as a
// message of its transaction, and applies the policy to it as to any
// message the sink cannot publish: with Config.Park it is parked and then
// acked, before PublishBad returns, and the later messages of its aggregate
// are parked behind it; without Park it fails the sink with an error that
// wraps row.
//
// Why a method of its own rather than a Message with a verdict: a bad row
// has no Message (no payload, possibly no id or aggregate), only the
// columns a dead letter keeps, so it never reaches a partition; what it
// shares with refused messages (the policy, the Guard, the retries, the
// blocking and the ack) is the park path both enter.
func (s *Sink) PublishBad(ctx context.Context, row BadRow, token uint64) error {
	if err := s.stopped(); err != nil {
		return err
	}
	r := &record{token: token, row: row}
	return s.parkNow(ctx, "", r, verdict{class: parkedBadRow, err: row})
}

// acquire waits for the in-flight room of r: until it fits, ctx is done
// or the sink halts.
func (s *Sink) acquire(ctx context.Context, r *record) error {
	err := s.inflight.acquire(ctx, s.halted.Done(), r.size)
	if errors.Is(err, errStopped) {
		return s.stopped()
	}
	return err
}

// errStopped is what a wait returns when the sink halts under it.
var errStopped = errors.New("sink stopped")

// enqueue appends r to its partition's queue, creating the partition (for
// Run to start) on first use. The in-flight room of r is already taken.
//
// n is the count r was routed by: when the topic is no longer routed by it
// (held, or switched to another count since), r is not queued and
// errRerouted says to route it again, so that no message routed by an old
// count is queued after the topic drained for its new one (release).
func (s *Sink) enqueue(tp topicPartition, n int, r *record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopped(); err != nil {
		s.inflight.release(1, r.size)
		return err
	}
	if now, ok := s.topics[tp.topic]; !ok || now != n {
		s.inflight.release(1, r.size)
		return errRerouted
	}
	p := s.parts[tp]
	if p == nil {
		p = newPartition(tp, s.m.published.WithLabelValues(tp.topic), s.m.requests.WithLabelValues(tp.topic))
		s.parts[tp] = p
		s.unstarted = append(s.unstarted, p)
		signal(s.runWake)
	}
	p.push(r, &s.cfg)
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
	lanes := make([]*lane, 0, len(s.lanes))
	for _, l := range s.lanes {
		lanes = append(lanes, l)
	}
	s.mu.Unlock()
	s.halt()
	for _, p := range parts {
		signal(p.wake)
	}
	for _, l := range lanes {
		signal(l.wake) // it sends what it has at once
	}
	signal(s.runWake)
}

// stopped is the error Publish returns now: the failure, ErrClosed, or nil.
func (s *Sink) stopped() error {
	if s.failed.Err() != nil {
		return context.Cause(s.failed)
	}
	if s.closing.Load() {
		return ErrClosed
	}
	return nil
}

// fail records the sink's first failure and returns it (or the earlier one).
func (s *Sink) fail(err error) error {
	s.failWith(err)
	return context.Cause(s.failed)
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
	g.Go(func() error { return s.watchPartitions(gctx) })
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
	s.mu.Lock()
	s.group, s.groupCtx = g, ctx
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.group = nil // a lane started now would outlive Run
		s.mu.Unlock()
	}()
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
		case <-s.failed.Done():
			return context.Cause(s.failed)
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
