package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// layoutBook is a Layouts an operator can change (accept).
type layoutBook struct {
	mu     sync.Mutex
	n      map[string]int
	claims int
}

func newLayoutBook() *layoutBook { return &layoutBook{n: map[string]int{}} }

func (b *layoutBook) Claim(_ context.Context, topic string, n int) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims++
	if got, ok := b.n[topic]; ok {
		return got, nil
	}
	b.n[topic] = n
	return n, nil
}

func (b *layoutBook) accept(topic string, n int) {
	b.mu.Lock()
	b.n[topic] = n
	b.mu.Unlock()
}

// growingMetadata is a cluster whose partition count can change.
type growingMetadata struct{ n atomic.Int32 }

func (g *growingMetadata) TopicPartitions(context.Context, string, bool) (int, error) {
	return int(g.n.Load()), nil
}

// partitionLog records, by key, the partitions its records were produced to.
type partitionLog struct {
	mu    sync.Mutex
	byKey map[string][]int
}

func (l *partitionLog) producer(t *testing.T) *fakeProducer {
	l.byKey = map[string][]int{}
	return &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		keys, _ := readRecords(t, req)
		l.mu.Lock()
		for _, k := range keys {
			l.byKey[k] = append(l.byKey[k], req.Partition)
		}
		l.mu.Unlock()
		return okResponse(), nil
	}}
}

func (l *partitionLog) partitions(key string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.byKey[key]...)
}

// publishAsync publishes m in a goroutine and returns Publish's result
// channel.
func publishAsync(h *harness, i int, key string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.s.Publish(context.Background(), msg(i, key), uint64(i)) }()
	return done
}

// A topic grown from 4 to 8 partitions under a running sink: the messages
// routed before the sink saw the change keep the 4-partition layout; then
// nothing more is published to the topic (Publish waits, the gauge says
// why) until the new count is recorded, after which keys go by 8.
func TestGrownTopicIsHeldUntilAccepted(t *testing.T) {
	const keys = 200
	meta := &growingMetadata{}
	meta.n.Store(4)
	book := newLayoutBook()
	var plog partitionLog
	cfg := testConfig()
	cfg.Layouts, cfg.PartitionRecheck = book, time.Hour // the test rechecks itself
	h := start(t, cfg, plog.producer(t), meta)
	key := func(i int) string { return fmt.Sprintf("agg-%d", i) }
	publishRange(t, h.s, 0, keys, key)
	poll.Eventually(t, 5*time.Second, "the first messages acked", func() (string, bool) {
		return fmt.Sprintf("%d acks", len(h.acks.get())), len(h.acks.get()) == keys
	})
	if got := book.n["outbox.order"]; got != 4 {
		t.Fatalf("recorded count = %d; want 4, Kafka's when the sink met the topic", got)
	}

	meta.n.Store(8)
	h.s.recheckPartitions(context.Background())
	gauge := h.s.m.partitionChange.WithLabelValues("outbox.order")
	if v := metricValue(t, gauge); v != 1 {
		t.Errorf("walrelay_topic_partition_change_pending = %v while held; want 1", v)
	}
	if got, want := fmt.Sprint(h.s.m.Held()), "[{outbox.order 4 8}]"; got != want {
		t.Errorf("Held() = %s while held; want %s", got, want)
	}
	done := publishAsync(h, keys, key(0))
	h.s.recheckPartitions(context.Background()) // not accepted: still held
	select {
	case err := <-done:
		t.Fatalf("Publish to the held topic returned %v; want it to wait", err)
	case <-time.After(100 * time.Millisecond):
	}
	if got := plog.partitions(key(0)); len(got) != 1 {
		t.Fatalf("a message of the held topic was produced to %v", got)
	}

	book.accept("outbox.order", 8)
	h.s.recheckPartitions(context.Background())
	if err := <-done; err != nil {
		t.Fatalf("Publish after the accept = %v", err)
	}
	publishRange(t, h.s, keys+1, 2*keys, func(i int) string { return key(i - keys) }) // keys 1, 2, ...
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if v := metricValue(t, gauge); v != 0 {
		t.Errorf("walrelay_topic_partition_change_pending = %v after the accept; want 0", v)
	}
	if held := h.s.m.Held(); len(held) != 0 {
		t.Errorf("Held() = %v after the accept; want none", held)
	}
	if v := metricValue(t, h.s.m.partitions.WithLabelValues("outbox.order")); v != 8 {
		t.Errorf("walrelay_topic_partitions = %v; want 8", v)
	}
	for i := range keys {
		k := key(i)
		if want := []int{partitionFor(k, 4), partitionFor(k, 8)}; fmt.Sprint(plog.partitions(k)) != fmt.Sprint(want) {
			t.Errorf("key %s went to partitions %v; want %v (4 partitions, then 8 once accepted)", k, plog.partitions(k), want)
		}
	}
}

// After a restart the count recorded earlier is what counts: a topic that
// Kafka now reports with more partitions is held from its first message.
func TestRecordedCountDisagreeingAtStartHoldsTheTopic(t *testing.T) {
	meta := &growingMetadata{}
	meta.n.Store(8)
	book := newLayoutBook()
	book.accept("outbox.order", 4)
	var plog partitionLog
	cfg := testConfig()
	cfg.Layouts, cfg.PartitionRecheck = book, time.Hour
	h := start(t, cfg, plog.producer(t), meta)
	done := publishAsync(h, 0, "k")
	gauge := h.s.m.partitionChange.WithLabelValues("outbox.order")
	poll.Eventually(t, 5*time.Second, "the topic held", func() (string, bool) {
		v := metricValue(t, gauge)
		return fmt.Sprintf("gauge %v", v), v == 1
	})
	h.s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Publish held at Close = %v; want ErrClosed", err)
	}
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(h.acks.get()) != 0 || len(plog.partitions("k")) != 0 {
		t.Errorf("the held message was produced or acked: acks %v, partitions %v", h.acks.get(), plog.partitions("k"))
	}
}

// A produce error that says the layout moved reads the counts again at
// once, without waiting for the timer.
func TestLayoutErrorRechecksAtOnce(t *testing.T) {
	meta := &growingMetadata{}
	meta.n.Store(3)
	var calls atomic.Int32
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		if calls.Add(1) == 2 {
			meta.n.Store(6)
			return nil, kafka.NotLeaderForPartition
		}
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.Layouts, cfg.PartitionRecheck = newLayoutBook(), time.Hour
	h := start(t, cfg, prod, meta)
	publishRange(t, h.s, 0, 1, sameKey("k"))
	poll.Eventually(t, 5*time.Second, "the first ack", func() (string, bool) { return "", len(h.acks.get()) == 1 })
	publishRange(t, h.s, 1, 2, sameKey("k"))
	gauge := h.s.m.partitionChange.WithLabelValues("outbox.order")
	poll.Eventually(t, 5*time.Second, "the topic held after NotLeaderForPartition", func() (string, bool) {
		v := metricValue(t, gauge)
		return fmt.Sprintf("gauge %v", v), v == 1
	})
}

// A count accepted before the sink saw the change needs no hold: the
// sink goes on by it.
func TestCountAcceptedBeforeTheCheckIsFollowed(t *testing.T) {
	meta := &growingMetadata{}
	meta.n.Store(4)
	book := newLayoutBook()
	var plog partitionLog
	cfg := testConfig()
	cfg.Layouts, cfg.PartitionRecheck = book, time.Hour
	h := start(t, cfg, plog.producer(t), meta)
	publishRange(t, h.s, 0, 1, sameKey("k"))
	meta.n.Store(8)
	book.accept("outbox.order", 8)
	h.s.recheckPartitions(context.Background())
	publishRange(t, h.s, 1, 2, sameKey("k"))
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if v := metricValue(t, h.s.m.partitionChange.WithLabelValues("outbox.order")); v != 0 {
		t.Errorf("walrelay_topic_partition_change_pending = %v; want 0 (no hold)", v)
	}
	if got, want := fmt.Sprint(plog.partitions("k")), fmt.Sprint([]int{partitionFor("k", 4), partitionFor("k", 8)}); got != want {
		t.Errorf("key k went to %s; want %s (4, then 8 as accepted)", got, want)
	}
}

// A topic switched to an accepted new count publishes nothing by it until
// every message routed by the old count is acknowledged: an aggregate's
// older message is in Kafka before its newer one on another partition,
// and a partition's newest record vouches for every earlier message routed
// to it (DECISIONS 47).
func TestNewCountWaitsUntilTheOldPartitionsDrained(t *testing.T) {
	key := "k"
	for i := 0; partitionFor(key, 4) == partitionFor(key, 8); i++ {
		key = fmt.Sprintf("k%d", i) // one that moves when the topic grows
	}
	meta := &growingMetadata{}
	meta.n.Store(4)
	book := newLayoutBook()
	unblock := make(chan struct{})
	var mu sync.Mutex
	var order []string // key@partition, in produce order
	prod := &fakeProducer{produce: func(ctx context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		keys, _ := readRecords(t, req)
		if req.Partition == partitionFor(key, 4) {
			select {
			case <-unblock:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		mu.Lock()
		for _, k := range keys {
			order = append(order, fmt.Sprintf("%s@%d", k, req.Partition))
		}
		mu.Unlock()
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.Layouts, cfg.PartitionRecheck = book, time.Hour
	h := start(t, cfg, prod, meta)
	publishRange(t, h.s, 0, 1, sameKey(key)) // routed by 4, its produce held up
	meta.n.Store(8)
	book.accept("outbox.order", 8)
	h.s.recheckPartitions(context.Background())
	second := publishAsync(h, 1, key)
	time.Sleep(100 * time.Millisecond) // a few drain checks
	mu.Lock()
	early := append([]string(nil), order...)
	mu.Unlock()
	if len(early) != 0 {
		t.Fatalf("produced %v while the message routed by the old count was unacknowledged; want nothing yet", early)
	}
	close(unblock)
	if err := <-second; err != nil {
		t.Fatalf("Publish of the second message = %v", err)
	}
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []string{fmt.Sprintf("%s@%d", key, partitionFor(key, 4)), fmt.Sprintf("%s@%d", key, partitionFor(key, 8))}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("produce order %v; want %v", order, want)
	}
	if v := metricValue(t, h.s.m.partitionChange.WithLabelValues("outbox.order")); v != 0 {
		t.Errorf("walrelay_topic_partition_change_pending = %v; want 0 (the count was accepted, no alarm)", v)
	}
}
