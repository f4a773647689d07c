package kafkawire

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/metadata"
)

// fakeCluster is two fake brokers, ids 1 and 2, that answer metadata with
// the layout of the moment: set it with lead.
type fakeCluster struct {
	a, b    *fakeBroker
	leaders atomic.Pointer[[]int32]
	delay   time.Duration // before each metadata answer
}

const topic = "orders"

func startFakeCluster(t *testing.T, delay time.Duration, leaders ...int32) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{delay: delay}
	fc.lead(leaders...)
	answer := func(req protocol.Message) protocol.Message {
		time.Sleep(fc.delay)
		return layout(map[int32]string{1: fc.a.addr(), 2: fc.b.addr()}, topic, *fc.leaders.Load()...)
	}
	fc.a, fc.b = startFake(t, answer), startFake(t, answer)
	return fc
}

func (fc *fakeCluster) lead(leaders ...int32) { fc.leaders.Store(&leaders) }

func (fc *fakeCluster) asked() int {
	return fc.a.count(protocol.Metadata) + fc.b.count(protocol.Metadata)
}

func newCluster(t *testing.T, bootstrap ...string) *Cluster {
	t.Helper()
	c, err := New(Config{Brokers: bootstrap, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func leaderOf(t *testing.T, c *Cluster, partition int) int32 {
	t.Helper()
	id, err := c.Leader(context.Background(), topic, partition)
	if err != nil {
		t.Fatalf("Leader(%s, %d): %v", topic, partition, err)
	}
	return id
}

func TestClusterRoutesByTheLayoutUntilRefreshed(t *testing.T) {
	fc := startFakeCluster(t, 0, 1, 2)
	c := newCluster(t, fc.a.addr())
	if got := leaderOf(t, c, 0); got != 1 {
		t.Fatalf("leader of partition 0: got %d; want 1", got)
	}
	fc.lead(2, 2) // Kafka elected broker 2 for partition 0
	if got := leaderOf(t, c, 0); got != 1 {
		t.Fatalf("leader of partition 0 before Refresh: got %d; want 1 (the layout is read only when asked)", got)
	}
	if err := c.Refresh(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := leaderOf(t, c, 0); got != 2 {
		t.Fatalf("leader of partition 0 after Refresh: got %d; want 2", got)
	}
	conn, err := c.Conn(context.Background(), 2)
	if err != nil || conn.Addr() != fc.b.addr() {
		t.Fatalf("Conn(2): got %v, %v; want a connection to %s", conn, err, fc.b.addr())
	}
}

func TestConcurrentRefreshesShareOneRead(t *testing.T) {
	fc := startFakeCluster(t, 100*time.Millisecond, 1)
	c := newCluster(t, fc.a.addr())
	leaderOf(t, c, 0)
	before := fc.asked()
	since := time.Now()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := c.Refresh(context.Background(), since); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := fc.asked() - before; got != 1 {
		t.Fatalf("50 refreshes since one moment asked for metadata %d times; want 1", got)
	}
	// A refresh since a moment the last read began after is already done.
	if err := c.Refresh(context.Background(), since); err != nil || fc.asked()-before != 1 {
		t.Fatalf("a refresh already served: err %v, reads %d; want nil and still 1", err, fc.asked()-before)
	}
}

func TestRefreshAsksAnotherBrokerWhenOneIsGone(t *testing.T) {
	fc := startFakeCluster(t, 0, 1)
	c := newCluster(t, fc.a.addr())
	leaderOf(t, c, 0) // knows brokers 1 and 2, connected to 1
	fc.lead(2)
	fc.a.close() // broker 1 dies: its connection drops, its port refuses
	if err := c.Refresh(context.Background(), time.Now()); err != nil {
		t.Fatalf("Refresh with broker 1 gone: %v; want the layout from broker 2", err)
	}
	if got := leaderOf(t, c, 0); got != 2 {
		t.Fatalf("leader after broker 1 went: got %d; want 2", got)
	}
}

func TestRefreshFailsWhenNoBrokerAnswers(t *testing.T) {
	fc := startFakeCluster(t, 0, 1)
	c := newCluster(t, fc.a.addr(), fc.b.addr())
	leaderOf(t, c, 0)
	fc.a.close()
	fc.b.close()
	err := c.Refresh(context.Background(), time.Now())
	var cerr *ConnError
	if !errors.Is(err, errNoConn) || !errors.As(err, &cerr) {
		t.Fatalf("Refresh with every broker gone: got %v; want errNoConn with the connections' errors", err)
	}
}

func TestLeaderSaysWhyAPartitionHasNone(t *testing.T) {
	fc := startFakeCluster(t, 0, -1, 3) // 3: a broker the layout does not list
	c := newCluster(t, fc.a.addr())
	for _, p := range []int{0, 1} {
		if _, err := c.Leader(context.Background(), topic, p); !errors.Is(err, ErrNoLeader) {
			t.Errorf("Leader of partition %d: got %v; want ErrNoLeader", p, err)
		}
	}
	if _, err := c.Leader(context.Background(), topic, 2); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Errorf("Leader of partition 2 of 2: got %v; want kafka.UnknownTopicOrPartition", err)
	}
	if _, err := c.Leader(context.Background(), "other", 0); !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Errorf("Leader of a topic the layout lacks: got %v; want kafka.UnknownTopicOrPartition", err)
	}
}

// A metadata request names every topic asked about, so one read serves
// them all.
func TestRefreshAsksForEveryTopicSeen(t *testing.T) {
	var mu sync.Mutex
	var last []string
	b := startFake(t, func(req protocol.Message) protocol.Message {
		mu.Lock()
		last = req.(*metadata.Request).TopicNames
		mu.Unlock()
		return &metadata.Response{}
	})
	c := newCluster(t, b.addr())
	c.Leader(context.Background(), "a", 0) //nolint:errcheck // the topic is missing: only the request counts
	c.Leader(context.Background(), "b", 0) //nolint:errcheck // as above
	mu.Lock()
	defer mu.Unlock()
	if len(last) != 2 {
		t.Fatalf("the last metadata request named %v; want both topics a and b", last)
	}
}
