package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

// TestStartedSinkMarksRecordsWithTheirWALPosition: a sink told its origin
// puts walrelay_source and walrelay_position on every record, with the
// message's commit LSN and place and the partition count it was routed by;
// a sink never started (recover, replay, dlq retry) puts neither.
func TestStartedSinkMarksRecordsWithTheirWALPosition(t *testing.T) {
	for _, started := range []bool{true, false} {
		prod, records := recordingProducer()
		h := start(t, testConfig(), prod, fixedPartitions(3))
		if started {
			h.s.Start(Origin{Source: schema.WALSource("7433256101470117656", "shop", "walrelay"), Timeline: 2})
		}
		want := map[string]schema.WALMark{}
		for i := range 4 {
			m := msg(i, []string{"a", "b"}[i%2])
			m.CommitLSN, m.Seq = pglogrepl.LSN(0x16B3748+0x100*(i/2)), uint32(i%2)
			if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
				t.Fatal(err)
			}
			want[string(m.ID)] = schema.WALMark{Timeline: 2, Pos: m.Position(), Partitions: 3}
		}
		h.s.Close()
		if err := h.wait(t); err != nil {
			t.Fatal(err)
		}
		got := map[string][]kafka.Header{} // by ce_id
		for _, hs := range records() {
			got[headerValue(hs, schema.HeaderID)] = hs
		}
		if n := len(records()); n != len(want) || len(got) != len(want) {
			t.Fatalf("started=%v: %d records produced of %d messages, want %d", started, n, len(got), len(want))
		}
		for id, w := range want {
			var source, position []string
			for _, hd := range got[id] {
				switch hd.Key {
				case schema.HeaderWALSource:
					source = append(source, string(hd.Value))
				case schema.HeaderWALPosition:
					position = append(position, string(hd.Value))
				}
			}
			if !started {
				if source != nil || position != nil {
					t.Errorf("record %s of a sink never started: source %q, position %q, want neither", id, source, position)
				}
				continue
			}
			if len(source) != 1 || source[0] != "7433256101470117656/shop/walrelay" {
				t.Errorf("record %s: walrelay_source %q", id, source)
			}
			if len(position) != 1 {
				t.Fatalf("record %s: walrelay_position %q", id, position)
			}
			mark, err := schema.ParseWALMark(position[0])
			if err != nil || mark != w {
				t.Errorf("record %s: walrelay_position %q = %+v, %v; want %+v", id, position[0], mark, err, w)
			}
		}
	}
}

// recordingProducer acknowledges every produce; records returns the
// headers of each record produced so far, in the order produced.
func recordingProducer() (prod *fakeProducer, records func() [][]kafka.Header) {
	var mu sync.Mutex
	var got [][]kafka.Header
	prod = &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		for {
			r, err := req.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				return okResponse(), nil
			}
			if err != nil {
				return nil, err
			}
			mu.Lock()
			got = append(got, r.Headers)
			mu.Unlock()
		}
	}}
	return prod, func() [][]kafka.Header {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// producedIndexes maps each record's ce_id to its message's index in ids,
// sorted: a record produced twice shows twice.
func producedIndexes(records [][]kafka.Header, ids map[string]int) []int {
	var got []int
	for _, hs := range records {
		got = append(got, ids[headerValue(hs, schema.HeaderID)])
	}
	slices.Sort(got)
	return got
}

// lsnAt is the commit LSN of the i-th message of the resuming tests.
func lsnAt(i int) pglogrepl.LSN { return pglogrepl.LSN(0x1000 + 0x10*i) }

// testOrigin is the stream of the resuming tests, on timeline tli.
func testOrigin(tli int32, ended map[int32]pglogrepl.LSN) Origin {
	return Origin{Source: schema.WALSource("7433256101470117656", "shop", "walrelay"), Timeline: tli, Ended: ended}
}

// publishResuming runs a sink that resumes from tails over partitions
// partitions, started with o, publishes n messages, the i-th keyed
// keys[i%len(keys)] at lsnAt(i), closes it, and returns it and the indexes
// of the messages it produced, sorted.
func publishResuming(t *testing.T, partitions int, tails tailReader, o Origin, keys []string, n int) (*harness, []int) {
	t.Helper()
	prod, records := recordingProducer()
	cfg := testConfig()
	cfg.ResumeFromKafka = true
	h := startWith(t, cfg, prod, fixedPartitions(partitions), func(s *Sink) { s.tails = tails })
	h.s.Start(o)
	ids := map[string]int{}
	for i := range n {
		m := msg(i, keys[i%len(keys)])
		m.CommitLSN = lsnAt(i)
		ids[string(m.ID)] = i
		if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatal(err)
	}
	return h, producedIndexes(records(), ids)
}

// fixedTails answers every partition's tail from a map; a missing one has
// no tail.
type fixedTails struct {
	mu    sync.Mutex
	tails map[int]schema.WALMark
	reads []int
}

func (f *fixedTails) readTail(_ context.Context, _ string, partition int, source string, _ tailLimits) (tail, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, partition)
	w, ok := f.tails[partition]
	if !ok || source != "7433256101470117656/shop/walrelay" {
		return tail{}, 10, nil
	}
	return tail{found: true, mark: w}, 10, nil
}

// With ResumeFromKafka, the messages at or before a partition's tail are
// acknowledged without a produce, in order with the rest; a partition
// without a tail, or a tail of another timeline, publishes everything.
func TestResumingSinkSkipsWhatThePartitionHolds(t *testing.T) {
	// Keys "a" and "b" go to different partitions of 3 (murmur2).
	pa, pb := partitionFor("a", 3), partitionFor("b", 3)
	if pa == pb {
		t.Fatal("test keys share a partition")
	}
	tails := &fixedTails{tails: map[int]schema.WALMark{
		pa: {Timeline: 1, Pos: schema.Position{CommitLSN: lsnAt(5)}, Partitions: 3},
		pb: {Timeline: 2, Pos: schema.Position{CommitLSN: lsnAt(9)}, Partitions: 3}, // another timeline
	}}
	h, got := publishResuming(t, 3, tails, testOrigin(1, nil), []string{"a", "b"}, 20)
	// a: 0, 2, 4 are at or before its tail (lsnAt(5)); b's tail is of timeline 2.
	var want []int
	for i := range 20 {
		if i%2 == 1 || i > 5 {
			want = append(want, i)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("produced %v; want %v", got, want)
	}
	if acked := h.acks.get(); len(acked) != 20 {
		t.Errorf("%d acks, want all 20: %v", len(acked), acked)
	}
	if n := metricValue(t, h.s.m.resumeSkipped.WithLabelValues("outbox.order")); n != 3 {
		t.Errorf("walrelay_resume_skipped_messages_total = %v; want 3", n)
	}
	if len(tails.reads) != 2 {
		t.Errorf("tails read for partitions %v; want each of the two once", tails.reads)
	}
}

// After a failover, a tail read on the old timeline vouches for the
// replayed messages committed before that timeline ended (the server's
// history), not for those after; a tail of a timeline the history does not
// hold vouches for nothing.
func TestResumingSinkAfterAFailoverTrustsTheOldTimelineUpToItsEnd(t *testing.T) {
	pa, pb := partitionFor("a", 3), partitionFor("b", 3)
	tails := &fixedTails{tails: map[int]schema.WALMark{
		pa: {Timeline: 1, Pos: schema.Position{CommitLSN: lsnAt(15)}, Partitions: 3}, // the old primary ran on past the switch
		pb: {Timeline: 3, Pos: schema.Position{CommitLSN: lsnAt(15)}, Partitions: 3}, // another standby's timeline
	}}
	h, got := publishResuming(t, 3, tails, testOrigin(2, map[int32]pglogrepl.LSN{1: lsnAt(7)}), []string{"a", "b"}, 20)
	// a: 0, 2, 4, 6 committed before timeline 1 ended at lsnAt(7); 8 on are
	// timeline 2's own. b: all of them.
	var want []int
	for i := range 20 {
		if i%2 == 1 || i >= 7 {
			want = append(want, i)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("produced %v; want %v", got, want)
	}
	if acked := h.acks.get(); len(acked) != 20 {
		t.Errorf("%d acks, want all 20: %v", len(acked), acked)
	}
}

// fakeLog is one partition's log of a fake broker: a produce appends its
// records' headers, and the tail reader reads them back.
type fakeLog struct {
	mu   sync.Mutex
	recs [][]kafka.Header
}

func (l *fakeLog) readTail(_ context.Context, _ string, _ int, source string, _ tailLimits) (tail, int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, err := findTail(source, l.recs)
	return t, len(l.recs), err
}

// A produce that failed in doubt (a timeout: Kafka wrote the batch, the
// answer was lost) is not sent again when the partition's log shows it
// written: each record is in the log once, all are acknowledged, in
// order. A produce that failed without writing is retried whole.
func TestRetryAfterAnInDoubtProduceSendsOnlyWhatTheLogLacks(t *testing.T) {
	log := &fakeLog{}
	var attempts atomic.Int32
	prod := &fakeProducer{produce: func(_ context.Context, req *kafka.ProduceRequest) (*kafka.ProduceResponse, error) {
		var batch [][]kafka.Header
		for {
			r, err := req.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			batch = append(batch, r.Headers)
		}
		switch attempts.Add(1) {
		case 1: // refused before writing
			return nil, kafka.NotEnoughReplicas
		case 2: // written, the answer lost
			log.mu.Lock()
			log.recs = append(log.recs, batch...)
			log.mu.Unlock()
			return nil, context.DeadlineExceeded
		}
		log.mu.Lock()
		log.recs = append(log.recs, batch...)
		log.mu.Unlock()
		return okResponse(), nil
	}}
	cfg := testConfig()
	cfg.ResumeFromKafka = true
	cfg.BatchMaxMessages = 5
	h := startWith(t, cfg, prod, fixedPartitions(1), func(s *Sink) { s.tails = log })
	h.s.Start(testOrigin(1, nil))
	ids := map[string]int{}
	for i := range 5 {
		m := msg(i, "a")
		m.CommitLSN = lsnAt(i)
		ids[string(m.ID)] = i
		if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Eventually(t, 5*time.Second, "all five acknowledged", func() (string, bool) {
		return fmt.Sprint(h.acks.get()), len(h.acks.get()) == 5
	})
	for i := 5; i < 8; i++ {
		m := msg(i, "a")
		m.CommitLSN = lsnAt(i)
		ids[string(m.ID)] = i
		if err := h.s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Close()
	if err := h.wait(t); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	got := producedIndexes(log.recs, ids)
	log.mu.Unlock()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the log holds %v; want each message once: %v", got, want)
	}
	if acked := h.acks.get(); fmt.Sprint(acked) != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("acks %v; want all eight in order", acked)
	}
	if n := metricValue(t, h.s.m.resumeSkipped.WithLabelValues("outbox.order")); n != 5 {
		t.Errorf("walrelay_resume_skipped_messages_total = %v; want the 5 the lost answer had written", n)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("%d produce requests; want 3 (refused, written in doubt, the last three)", n)
	}
}

// flakyTails fails its first calls with a retriable error, as a topic just
// created answers before it has a leader, then answers from tails.
type flakyTails struct {
	fails atomic.Int32
	tails tailReader
	err   error // what a failure says; kafka.NotLeaderForPartition when nil
}

func (f *flakyTails) readTail(ctx context.Context, topic string, partition int, source string, lim tailLimits) (tail, int, error) {
	if f.fails.Add(-1) >= 0 {
		err := f.err
		if err == nil {
			err = kafka.NotLeaderForPartition
		}
		return tail{}, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	return f.tails.readTail(ctx, topic, partition, source, lim)
}

// A partition whose end answers a retriable error at first is asked
// again, and then skips what it holds.
func TestResumingSinkAsksAgainWhileThePartitionHasNoLeader(t *testing.T) {
	tails := &flakyTails{tails: &fixedTails{tails: map[int]schema.WALMark{0: {Timeline: 1, Pos: schema.Position{CommitLSN: lsnAt(2)}, Partitions: 1}}}}
	tails.fails.Store(2)
	_, got := publishResuming(t, 1, tails, testOrigin(1, nil), []string{"a"}, 5)
	if fmt.Sprint(got) != "[3 4]" {
		t.Errorf("produced %v; want [3 4]: 0-2 are at or before the tail read on the third try", got)
	}
}

// A relay that starts while a partition's leader is dead meets refused
// connections until Kafka elects another leader: it asks again, for longer
// than check's few seconds, instead of publishing the replayed messages
// again (issue 47).
func TestResumingSinkWaitsForALeaderThatRefusesConnections(t *testing.T) {
	tails := &flakyTails{tails: &fixedTails{tails: map[int]schema.WALMark{0: {Timeline: 1, Pos: schema.Position{CommitLSN: lsnAt(2)}, Partitions: 1}}},
		err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tails.fails.Store(int32(askWithin/askRetry) + 2) // past check's bound
	_, got := publishResuming(t, 1, tails, testOrigin(1, nil), []string{"a"}, 5)
	if fmt.Sprint(got) != "[3 4]" {
		t.Errorf("produced %v; want [3 4]: 0-2 are at or before the tail read once the leader answered", got)
	}
}

func TestLeaderAwayTellsWhatANewLeaderClears(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("list offsets: %w", kafka.NotLeaderForPartition), true},
		{fmt.Errorf("list offsets: %w", kafka.LeaderNotAvailable), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("fetch: %w", syscall.ECONNRESET), true},
		{context.Canceled, false},
		{fmt.Errorf("fetch: %w", kafka.TopicAuthorizationFailed), false},
		{nil, false},
	} {
		if got := leaderAway(tc.err); got != tc.want {
			t.Errorf("leaderAway(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}
