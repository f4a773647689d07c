package sink

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/kafkawire"
)

// routingProducer is a producer with a layout of its own (like
// wireProducer): Produce fails with fail while the partition's leader is
// dead, and Refresh moves to the next layout of layouts.
type routingProducer struct {
	mu        sync.Mutex
	layouts   []int32 // the leader after each refresh; the last one stays
	leader    int32
	dead      map[int32]bool
	refreshes int
	refreshOK bool
	sentTo    []int32
}

func (r *routingProducer) Produce(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader < 0 {
		return nil, &sentTo{broker: -1, err: kafkawire.ErrNoLeader}
	}
	r.sentTo = append(r.sentTo, r.leader)
	if r.dead[r.leader] {
		return nil, &sentTo{broker: r.leader, err: &kafkawire.ConnError{Addr: "broker", Err: errors.New("connection refused")}}
	}
	return okResponse(), nil
}

func (r *routingProducer) Refresh(context.Context, time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshes++
	if !r.refreshOK {
		return errors.New("no broker answers")
	}
	if len(r.layouts) > 0 {
		r.leader, r.layouts = r.layouts[0], r.layouts[1:]
	}
	return nil
}

func (r *routingProducer) Leader(context.Context, string, int) (int32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader < 0 {
		return -1, kafkawire.ErrNoLeader
	}
	return r.leader, nil
}

func retrySink(t *testing.T, prod producer) *Sink {
	t.Helper()
	cfg := testConfig()
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Second, 10*time.Second
	s, err := newSink(cfg, nil, func(uint64) {}, prod, fixedPartitions(1))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func moved(broker int32) error {
	return &sentTo{broker: broker, err: &kafkawire.ConnError{Addr: "broker", Err: errors.New("connection refused")}}
}

func TestRetryDelayAfterALeaderMoved(t *testing.T) {
	p := &partition{topicPartition: topicPartition{"t", 0}}
	for _, tc := range []struct {
		name      string
		prod      *routingProducer
		err       error
		wantZero  bool          // retried at once
		wantUpTo  time.Duration // else the delay's ceiling
		wantPolls int
		wantOut   int
		refreshes int
	}{
		{name: "a new leader is retried at once",
			prod: &routingProducer{leader: 1, layouts: []int32{2}, refreshOK: true}, err: moved(1),
			wantZero: true, refreshes: 1},
		{name: "no leader yet: looked at again soon",
			prod: &routingProducer{leader: 1, layouts: []int32{-1}, refreshOK: true}, err: moved(1),
			wantUpTo: leaderPoll.Min, wantPolls: 1, refreshes: 1},
		{name: "the same leader still: looked at again soon",
			prod: &routingProducer{leader: 1, layouts: []int32{1}, refreshOK: true}, err: moved(1),
			wantUpTo: leaderPoll.Min, wantPolls: 1, refreshes: 1},
		{name: "not the leader (the broker's word)",
			prod: &routingProducer{leader: 1, layouts: []int32{3}, refreshOK: true}, err: &sentTo{broker: 1, err: kafka.NotLeaderForPartition},
			wantZero: true, refreshes: 1},
		{name: "no broker answers the read: an outage",
			prod: &routingProducer{leader: 1, refreshOK: false}, err: moved(1),
			wantUpTo: time.Second, wantOut: 1, refreshes: 1},
		{name: "not enough replicas: looked at again soon, the layout not read",
			prod: &routingProducer{leader: 1, refreshOK: true}, err: &sentTo{broker: 1, err: kafka.NotEnoughReplicas},
			wantUpTo: leaderPoll.Min, wantPolls: 1, refreshes: 0},
		{name: "a broken connection of a producer without a layout of its own: an outage",
			prod: nil, err: &kafkawire.ConnError{Addr: "broker", Err: errors.New("connection refused")},
			wantUpTo: time.Second, wantOut: 1, refreshes: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prod producer = tc.prod
			if tc.prod == nil {
				tc.prod, prod = &routingProducer{}, &fakeProducer{}
			}
			s := retrySink(t, prod)
			var st retryState
			d, why := s.retryDelay(context.Background(), p, tc.err, time.Now(), &st)
			switch {
			case tc.wantZero && d != 0:
				t.Errorf("delay: got %v (%s); want 0", d, why)
			case !tc.wantZero && d > tc.wantUpTo:
				t.Errorf("delay: got %v (%s); want at most %v", d, why, tc.wantUpTo)
			}
			if st.polls != tc.wantPolls || st.outages != tc.wantOut || tc.prod.refreshes != tc.refreshes {
				t.Errorf("after one retry: polls %d, outages %d, layout reads %d; want %d, %d, %d",
					st.polls, st.outages, tc.prod.refreshes, tc.wantPolls, tc.wantOut, tc.refreshes)
			}
		})
	}
}

// While Kafka elects, the looks at the layout never wait more than a
// second apart, however long the election takes; the outage backoff is
// not touched by them.
func TestLooksForANewLeaderStayASecondApart(t *testing.T) {
	prod := &routingProducer{leader: 1, refreshOK: true, layouts: []int32{}}
	s := retrySink(t, prod)
	p := &partition{topicPartition: topicPartition{"t", 0}}
	var st retryState
	for i := range 50 {
		d, _ := s.retryDelay(context.Background(), p, moved(1), time.Now(), &st)
		if d > time.Second {
			t.Fatalf("look %d waited %v; want at most 1s", i+1, d)
		}
	}
	if st.outages != 0 || st.polls != 50 {
		t.Fatalf("after 50 looks: outages %d, polls %d; want 0 and 50", st.outages, st.polls)
	}
	if c := leaderPoll.Ceiling(st.polls); c != time.Second {
		t.Fatalf("the looks' ceiling after 50: %v; want 1s", c)
	}
}

// End to end over the sink: a batch whose leader died is acknowledged
// once Kafka names another, sent there, with the outage backoff (1s to
// 10s here) never waited.
func TestABatchFollowsItsPartitionToTheNewLeader(t *testing.T) {
	prod := &routingProducer{leader: 1, dead: map[int32]bool{1: true}, layouts: []int32{1, 1, -1, 2}, refreshOK: true}
	cfg := testConfig()
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = 10*time.Second, time.Minute
	h := start(t, cfg, prod, fixedPartitions(1))
	publishRange(t, h.s, 0, 3, sameKey("k"))
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := h.acks.get(); len(got) != 3 {
		t.Fatalf("acked %v; want all 3", got)
	}
	prod.mu.Lock()
	defer prod.mu.Unlock()
	if last := prod.sentTo[len(prod.sentTo)-1]; last != 2 || prod.refreshes != 4 {
		t.Fatalf("sent to %v after %d layout reads; want the last to broker 2 after 4 (1, 1, none, 2)", prod.sentTo, prod.refreshes)
	}
}
