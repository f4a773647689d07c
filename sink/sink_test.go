package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

// fakeProducer answers produce requests with a function.
type fakeProducer struct {
	produce func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error)
}

func (f *fakeProducer) Produce(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
	return f.produce(ctx, req)
}

// fakeMetadata answers partition-count lookups with a function.
type fakeMetadata struct {
	partitions func(ctx context.Context, topic string, create bool) (int, error)
}

func (f *fakeMetadata) TopicPartitions(ctx context.Context, topic string, create bool) (int, error) {
	return f.partitions(ctx, topic, create)
}

func fixedPartitions(n int) *fakeMetadata {
	return &fakeMetadata{partitions: func(context.Context, string, bool) (int, error) { return n, nil }}
}

// acks records the tokens the sink acknowledged, in order.
type acks struct {
	mu     sync.Mutex
	tokens []uint64
}

func (a *acks) ack(token uint64) {
	a.mu.Lock()
	a.tokens = append(a.tokens, token)
	a.mu.Unlock()
}

func (a *acks) get() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.tokens...)
}

type harness struct {
	s    *Sink
	acks *acks
	reg  *prometheus.Registry
	run  chan error
	stop context.CancelFunc
}

func testConfig() Config {
	return Config{
		Brokers:         []string{"127.0.0.1:9"},
		Linger:          time.Millisecond,
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 5 * time.Millisecond,
	}.withDefaults()
}

// mustMetrics makes the sink's collectors, registered with reg.
func mustMetrics(t *testing.T, reg prometheus.Registerer) *Metrics {
	t.Helper()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start builds a sink over fakes and runs it until the test ends.
func start(t *testing.T, cfg Config, prod producer, meta metadataClient) *harness {
	t.Helper()
	return startWith(t, cfg, prod, meta, nil)
}

// startWith is start with the sink changed by adjust, when set, before it
// runs.
func startWith(t *testing.T, cfg Config, prod producer, meta metadataClient, adjust func(*Sink)) *harness {
	t.Helper()
	h := &harness{acks: &acks{}, reg: prometheus.NewRegistry(), run: make(chan error, 1)}
	cfg.Metrics = mustMetrics(t, h.reg)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s, err := newSink(cfg, zaptest.NewLogger(t), h.acks.ack, prod, meta)
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(s)
	}
	h.s = s
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	go func() { h.run <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.run:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// wait returns Run's result, failing the test if it takes too long.
func (h *harness) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.run:
		h.run <- err // for Cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func msg(i int, key string) *schema.Message {
	m := &schema.Message{AggregateType: "order", AggregateID: key, Type: "order.created.v1", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	m.ID = schema.MessageID(fmt.Sprintf("%04x0000-0000-0000-0000-000000000001", i&0xffff))
	return m
}

// publishRange publishes msg(i, key(i)) as token i, for i from from up to
// to.
func publishRange(t *testing.T, s *Sink, from, to int, key func(i int) string) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Publish(context.Background(), msg(i, key(i)), uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
	}
}

// sameKey is the key of publishRange's messages when they share one.
func sameKey(key string) func(int) string { return func(int) string { return key } }

// readRecords drains a produce request's records into key/value strings.
func readRecords(t *testing.T, req *kafka.ProduceRequest) (keys, values []string) {
	t.Helper()
	for {
		r, err := req.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return keys, values
		}
		if err != nil {
			t.Errorf("ReadRecord: %v", err)
			return keys, values
		}
		k, _ := io.ReadAll(r.Key)
		v, _ := io.ReadAll(r.Value)
		keys, values = append(keys, string(k)), append(values, string(v))
	}
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// okResponse acknowledges a request.
func okResponse() *kafka.ProduceResponse { return &kafka.ProduceResponse{} }

func TestSinkAcksEveryMessageInPartitionOrder(t *testing.T) {
	const n, keys, partitions = 3000, 37, 5
	var busy [partitions]atomic.Int32
	var requests atomic.Int32
	var mu sync.Mutex
	sent := map[int][]string{} // partition -> values in send order
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		if req.RequiredAcks != kafka.RequireAll {
			t.Errorf("RequiredAcks = %v; want all", req.RequiredAcks)
		}
		if busy[req.Partition].Add(1) != 1 {
			t.Errorf("two requests in flight on partition %d", req.Partition)
		}
		defer busy[req.Partition].Add(-1)
		ks, vs := readRecords(t, req)
		for _, k := range ks {
			if p := partitionFor(k, partitions); p != req.Partition {
				t.Errorf("key %q sent to partition %d; want %d", k, req.Partition, p)
			}
		}
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		sent[req.Partition] = append(sent[req.Partition], vs...)
		mu.Unlock()
		requests.Add(1)
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.BatchMaxMessages, cfg.MaxInFlightMessages = 50, 200
	h := start(t, cfg, prod, fixedPartitions(partitions))

	want := map[int][]uint64{}
	for i := range n {
		key := fmt.Sprintf("agg-%d", i%keys)
		if err := h.s.Publish(context.Background(), msg(i, key), uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
		p := partitionFor(key, partitions)
		want[p] = append(want[p], uint64(i))
	}
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v; want nil after Close", err)
	}

	got := h.acks.get()
	if len(got) != n {
		t.Fatalf("got %d acks; want %d", len(got), n)
	}
	seen := map[uint64]bool{}
	byPartition := map[int][]uint64{}
	for _, tok := range got {
		if seen[tok] {
			t.Fatalf("token %d acked twice", tok)
		}
		seen[tok] = true
		p := partitionFor(fmt.Sprintf("agg-%d", tok%keys), partitions)
		byPartition[p] = append(byPartition[p], tok)
	}
	for p := range partitions {
		if fmt.Sprint(byPartition[p]) != fmt.Sprint(want[p]) {
			t.Errorf("partition %d: acks out of publish order", p)
		}
		for i, v := range sent[p] {
			if v != fmt.Sprintf(`{"i":%d}`, want[p][i]) {
				t.Errorf("partition %d: record %d sent = %s; want i=%d", p, i, v, want[p][i])
				break
			}
		}
	}
	if v := metricValue(t, h.s.m.published.WithLabelValues("outbox.order")); v != n {
		t.Errorf("published_messages_total = %v; want %d", v, n)
	}
	if v, want := metricValue(t, h.s.m.requests.WithLabelValues("outbox.order")), float64(requests.Load()); v != want || v < n/50 {
		t.Errorf("produce_requests_total = %v; want %v, the requests acknowledged (at least %d: 50 records a batch)", v, want, n/50)
	}
	if msgs, bytes := h.s.inflight.load(); msgs != 0 || bytes != 0 {
		t.Errorf("in flight after drain = %d, %d; want 0, 0", msgs, bytes)
	}
}

func TestSinkRetriesTransientErrorWithSameBatch(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var batches []string
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		_, vs := readRecords(t, req)
		mu.Lock()
		batches = append(batches, fmt.Sprint(vs))
		mu.Unlock()
		switch calls.Add(1) {
		case 1:
			return nil, io.ErrUnexpectedEOF
		case 2:
			return &kafka.ProduceResponse{Error: fmt.Errorf("%w: isr shrank", kafka.NotEnoughReplicas)}, nil
		}
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.Linger = time.Hour // only Close sends
	h := start(t, cfg, prod, fixedPartitions(1))
	publishRange(t, h.s, 0, 3, sameKey("k"))
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if got := fmt.Sprint(h.acks.get()); got != "[0 1 2]" {
		t.Errorf("acks = %s; want [0 1 2], each once", got)
	}
	if len(batches) != 3 || batches[0] != batches[1] || batches[1] != batches[2] {
		t.Errorf("attempts sent %q; want the same batch three times", batches)
	}
	if v := metricValue(t, h.s.m.retries); v != 2 {
		t.Errorf("retries_total = %v; want 2", v)
	}
	if v := metricValue(t, h.s.m.requests.WithLabelValues("outbox.order")); v != 1 {
		t.Errorf("produce_requests_total = %v; want 1: three attempts, one acknowledged", v)
	}
}

// Under halt (no Park), a refused batch is sent again one record at a time:
// the records before the culprit are delivered in order, and the sink
// fails naming the culprit, acknowledging nothing after it.
func TestSinkPermanentErrorNamesTheCulprit(t *testing.T) {
	tests := []struct {
		name     string
		culprit  int // the message Kafka refuses; every other one passes
		res      *kafka.ProduceResponse
		wantAcks string
	}{
		{"partition error", 10, &kafka.ProduceResponse{Error: kafka.MessageSizeTooLarge}, "[]"},
		{"record error", 11, &kafka.ProduceResponse{RecordErrors: map[int]error{0: errors.New("bad")}}, "[10]"},
		{"authorization", 12, &kafka.ProduceResponse{Error: kafka.TopicAuthorizationFailed}, "[10 11]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			culpritID, culpritValue := msg(tt.culprit, "").ID, string(msg(tt.culprit, "").Payload)
			prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
				_, values := readRecords(t, req)
				for _, v := range values {
					if v == culpritValue {
						return tt.res, nil
					}
				}
				return &kafka.ProduceResponse{}, nil
			}}
			cfg := testConfig()
			cfg.Linger = time.Hour
			h := start(t, cfg, prod, fixedPartitions(3))
			publishRange(t, h.s, 10, 13, sameKey("same-key"))
			h.s.Close()
			err := h.wait(t)
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Run = %v; want *Error", err)
			}
			if perr.Topic != "outbox.order" || perr.Partition != partitionFor("same-key", 3) || perr.Token != uint64(tt.culprit) || perr.MessageID != culpritID ||
				perr.Aggregate.ID != "same-key" || !strings.Contains(err.Error(), "aggregate order/same-key") {
				t.Errorf("error = %v; want topic outbox.order, partition %d, token %d, aggregate order/same-key", err, partitionFor("same-key", 3), tt.culprit)
			}
			if got := fmt.Sprint(h.acks.get()); got != tt.wantAcks {
				t.Errorf("acks = %s; want %s (the records before the culprit)", got, tt.wantAcks)
			}
			if err := h.s.Publish(context.Background(), msg(1, "k"), 1); !errors.As(err, &perr) {
				t.Errorf("Publish after failure = %v; want the *Error", err)
			}
		})
	}
}

func TestSinkFailureStopsOtherPartitionsWithoutAck(t *testing.T) {
	bad := partitionFor("bad", 4)
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		if req.Partition == bad {
			return &kafka.ProduceResponse{Error: kafka.InvalidRecord}, nil
		}
		<-ctx.Done() // other partitions never get their ack
		return nil, ctx.Err()
	}}
	h := start(t, testConfig(), prod, fixedPartitions(4))
	for i, key := range []string{"good-1", "good-2", "bad"} {
		if partitionFor(key, 4) == bad && key != "bad" {
			t.Fatalf("test keys collide")
		}
		if err := h.s.Publish(context.Background(), msg(i, key), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	var perr *Error
	if err := h.wait(t); !errors.As(err, &perr) || perr.Partition != bad {
		t.Fatalf("Run = %v; want *Error for partition %d", err, bad)
	}
	if got := h.acks.get(); len(got) != 0 {
		t.Errorf("acks = %v; want none", got)
	}
}

func TestSinkCloseFlushesWithoutLinger(t *testing.T) {
	prod := &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.Linger = time.Hour
	cfg.BatchMaxMessages = 10
	h := start(t, cfg, prod, fixedPartitions(2))
	publishRange(t, h.s, 0, 25, func(i int) string { return fmt.Sprint(i % 3) })
	began := time.Now()
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("drain took %v; want no linger wait", d)
	}
	if got := len(h.acks.get()); got != 25 {
		t.Errorf("acks = %d; want 25", got)
	}
	if err := h.s.Publish(context.Background(), msg(0, "k"), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close = %v; want ErrClosed", err)
	}
}

func TestSinkBatchesBySize(t *testing.T) {
	w := &writes{}
	cfg := testConfig()
	cfg.Linger = time.Hour
	cfg.BatchMaxMessages = 10
	h := start(t, cfg, w.producer(t), fixedPartitions(1))
	publishRange(t, h.s, 0, 25, sameKey("k"))
	// Two full batches go without waiting for Linger or Close.
	poll.Until(2*time.Second, time.Millisecond, func() bool { return len(h.acks.get()) >= 20 })
	if got := len(h.acks.get()); got != 20 {
		t.Fatalf("acks before Close = %d; want 20 (two full batches)", got)
	}
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatal(err)
	}
	_, requests := w.get()
	var sizes []int
	for _, r := range requests {
		sizes = append(sizes, len(r))
	}
	if fmt.Sprint(sizes) != "[10 10 5]" {
		t.Errorf("batch sizes = %v; want [10 10 5]", sizes)
	}
}

func TestSinkInFlightBoundBlocksPublish(t *testing.T) {
	gate := make(chan struct{})
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		select {
		case <-gate:
			return okResponse(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	cfg := testConfig()
	cfg.BatchMaxMessages, cfg.MaxInFlightMessages = 2, 4
	h := start(t, cfg, prod, fixedPartitions(1))
	publishRange(t, h.s, 0, 4, sameKey("k"))
	done := make(chan error, 1)
	go func() { done <- h.s.Publish(context.Background(), msg(4, "k"), 4) }()
	select {
	case err := <-done:
		t.Fatalf("fifth Publish returned %v; want it blocked at MaxInFlightMessages=4", err)
	case <-time.After(50 * time.Millisecond):
	}
	if v := metricValue(t, h.s.m.inFlightMessages); v != 4 {
		t.Errorf("in_flight_messages = %v; want 4", v)
	}
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Publish still blocked after acks")
	}
}

func TestSinkCancelReturnsPromptlyWithoutAck(t *testing.T) {
	started := make(chan struct{}, 1)
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		signal(started)
		<-ctx.Done()
		return nil, fmt.Errorf("produce: %w", ctx.Err())
	}}
	h := start(t, testConfig(), prod, fixedPartitions(1))
	if err := h.s.Publish(context.Background(), msg(0, "k"), 0); err != nil {
		t.Fatal(err)
	}
	<-started
	h.stop()
	if err := h.wait(t); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v; want context.Canceled", err)
	}
	if got := h.acks.get(); len(got) != 0 {
		t.Errorf("acks = %v; want none", got)
	}
	if err := h.s.Publish(context.Background(), msg(1, "k"), 1); err == nil {
		t.Errorf("Publish after Run ended = nil; want an error")
	}
}

func TestSinkMissingTopicIsPermanent(t *testing.T) {
	var creates atomic.Int32
	meta := &fakeMetadata{partitions: func(_ context.Context, topic string, create bool) (int, error) {
		if create {
			creates.Add(1)
		}
		return 0, kafka.UnknownTopicOrPartition
	}}
	prod := &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		t.Error("produce called for a missing topic")
		return okResponse(), nil
	}}
	cfg := testConfig()
	h := start(t, cfg, prod, meta)
	h.s.createWait = 30 * time.Millisecond
	err := h.s.Publish(context.Background(), msg(0, "k"), 0)
	var perr *Error
	if !errors.As(err, &perr) || perr.Topic != "outbox.order" || !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("Publish = %v; want *Error naming outbox.order, wrapping UnknownTopicOrPartition", err)
	}
	if creates.Load() == 0 {
		t.Errorf("no metadata request asked for topic creation")
	}
	if err := h.wait(t); !errors.As(err, &perr) {
		t.Errorf("Run = %v; want the same *Error", err)
	}
}

func TestSinkTopicCreatedOnDemand(t *testing.T) {
	var created atomic.Bool
	meta := &fakeMetadata{partitions: func(_ context.Context, topic string, create bool) (int, error) {
		switch {
		case created.Load():
			return 3, nil
		case create:
			created.Store(true)
			return 0, kafka.LeaderNotAvailable
		}
		return 0, kafka.UnknownTopicOrPartition
	}}
	prod := &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		return okResponse(), nil
	}}
	h := start(t, testConfig(), prod, meta)
	if err := h.s.Publish(context.Background(), msg(0, "k"), 0); err != nil {
		t.Fatalf("Publish = %v; want nil once the topic exists", err)
	}
	h.s.Close()
	if err := h.wait(t); err != nil || len(h.acks.get()) != 1 {
		t.Errorf("Run = %v, acks %v; want nil and one ack", err, h.acks.get())
	}
}

func TestSinkRejectsBadInput(t *testing.T) {
	prod := &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		return okResponse(), nil
	}}
	tests := []struct {
		name string
		msg  *schema.Message
	}{
		{"no aggregate id", msg(0, "")},
		{"invalid topic", &schema.Message{AggregateID: "k", Topic: "no spaces allowed", Payload: []byte{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, testConfig(), prod, fixedPartitions(1))
			var perr *Error
			if err := h.s.Publish(context.Background(), tt.msg, 7); !errors.As(err, &perr) || perr.Token != 7 {
				t.Fatalf("Publish = %v; want *Error for token 7", err)
			}
			if err := h.wait(t); !errors.As(err, &perr) {
				t.Errorf("Run = %v; want *Error", err)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	ack := func(uint64) {}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no brokers", Config{}},
		{"broker without port", Config{Brokers: []string{"localhost"}}},
		{"bad fixed topic", Config{Brokers: []string{"h:1"}, TopicTemplate: "a b"}},
		{"negative linger", Config{Brokers: []string{"h:1"}, Linger: -1}},
		{"backoff max below min", Config{Brokers: []string{"h:1"}, RetryBackoffMin: time.Second, RetryBackoffMax: time.Millisecond}},
		{"negative payload limit", Config{Brokers: []string{"h:1"}, MaxPayloadBytes: -1}},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg, zaptest.NewLogger(t), ack); err == nil {
			t.Errorf("%s: New = nil error; want one", tt.name)
		}
	}
	if _, err := New(Config{Brokers: []string{"h:1"}}, nil, nil); err == nil {
		t.Errorf("New with nil AckFunc = nil error; want one")
	}
	s, err := New(Config{Brokers: []string{"h:1"}, Metrics: mustMetrics(t, prometheus.NewRegistry())}, zaptest.NewLogger(t), ack)
	if err != nil {
		t.Fatalf("New(minimal) = %v", err)
	}
	if s.cfg.Linger != 5*time.Millisecond || s.cfg.BatchMaxBytes != 512<<10 || s.cfg.TopicTemplate != "outbox.{aggregate_type}" || s.cfg.Source != "walrelay" ||
		s.cfg.MaxPayloadBytes != 921600 || s.cfg.NoCreateTopics {
		t.Errorf("defaults not applied: %+v", s.cfg)
	}
	s.closeTransport()
}

// Once the guard (the leader lease) fails, no produce request leaves the
// sink, nothing more is acknowledged, and Run returns the guard's error.
func TestSinkGuardStopsWritesBeforeTheNextBatch(t *testing.T) {
	var produced atomic.Int32
	prod := &fakeProducer{produce: func(context.Context, *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		produced.Add(1)
		return &kafka.ProduceResponse{}, nil
	}}
	var lost atomic.Bool
	errLost := errors.New("leadership lost")
	cfg := testConfig()
	cfg.Guard = func() error {
		if lost.Load() {
			return errLost
		}
		return nil
	}
	h := start(t, cfg, prod, fixedPartitions(1))
	if err := h.s.Publish(context.Background(), msg(1, "k"), 1); err != nil {
		t.Fatal(err)
	}
	poll.EventuallyTrue(t, 5*time.Second, "the first message acknowledged", func() bool { return len(h.acks.get()) == 1 })
	lost.Store(true)
	if err := h.s.Publish(context.Background(), msg(2, "k"), 2); err != nil {
		t.Fatal(err)
	}
	if err := h.wait(t); !errors.Is(err, errLost) {
		t.Fatalf("Run = %v; want the guard's error", err)
	}
	if got := produced.Load(); got != 1 {
		t.Errorf("produce requests = %d; want 1 (none after the guard failed)", got)
	}
	if got := h.acks.get(); len(got) != 1 {
		t.Errorf("acks = %v; want only the first message", got)
	}
}
