package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// fakeStream forwards the events the test feeds it, then behaves like
// slot.Stream at a stop: closes out and waits for drained.
type fakeStream struct {
	feed     chan slot.Event
	finalPos chan pglogrepl.LSN
	pos      atomic.Pointer[slot.Position]
}

func (f *fakeStream) Run(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error {
	f.pos.Store(&pos)
	defer func() { f.finalPos <- pos() }()
	for {
		select {
		case ev := <-f.feed:
			select {
			case out <- ev:
			case <-ctx.Done():
			}
		case <-ctx.Done():
			close(out)
			<-drained
			return nil
		}
	}
}

// fakeSink hands every published message to the test, which acks it. A
// bad row goes to bad, for the test to ack as the sink does once it parked
// it; with bad nil the sink has no dead-letter store (policy halt) and
// refuses the row with its error, as the sink does.
type fakeSink struct {
	published chan published
	closed    chan struct{}
	closeOnce sync.Once // a halted harness's next session closes it again
	bad       chan badPublished
	originMu  sync.Mutex
	origins   []sink.Origin
}

type badPublished struct {
	row   sink.BadRow
	token uint64
}

type published struct {
	m     *schema.Message
	token uint64
}

func (s *fakeSink) Run(ctx context.Context) error {
	select {
	case <-s.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *fakeSink) Publish(ctx context.Context, m *schema.Message, token uint64) error {
	s.published <- published{m, token}
	return nil
}

func (s *fakeSink) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Start records the origin, for the tests that read it.
func (s *fakeSink) Start(o sink.Origin) {
	s.originMu.Lock()
	s.origins = append(s.origins, o)
	s.originMu.Unlock()
}

func (s *fakeSink) PublishBad(ctx context.Context, row sink.BadRow, token uint64) error {
	if s.bad == nil {
		return row
	}
	s.bad <- badPublished{row, token}
	return nil
}

// pgoutput v1 messages, just enough for the pipeline: the outbox table as
// relation 16384, transactions committed at PostgreSQL's epoch.
const outboxRelation = 16384

func beginMsg(final pglogrepl.LSN, xid uint32) []byte {
	return pgoutputtest.Begin(final, pgoutputtest.Epoch, xid)
}

func commitMsg(commit, end pglogrepl.LSN) []byte {
	return pgoutputtest.Commit(commit, end, pgoutputtest.Epoch)
}

func relationMsg() []byte {
	return pgoutputtest.Relation(outboxRelation, "public", "outbox_messages", []pgoutputtest.Column{
		{Name: "message_id", OID: 2950}, {Name: "aggregate_type", OID: 25}, {Name: "aggregate_id", OID: 25},
		{Name: "type", OID: 25}, {Name: "payload", OID: 3802}})
}

func insertMsg(id, aggregateID string) []byte {
	return pgoutputtest.Insert(outboxRelation, []pgoutputtest.Cell{pgoutputtest.Text(id), pgoutputtest.Text("order"),
		pgoutputtest.Text(aggregateID), pgoutputtest.Text("order.submitted.v1"), pgoutputtest.Text(`{"n": 1}`)})
}

type harness struct {
	t      *testing.T
	r      *Relay
	reg    *prometheus.Registry
	ack    func(uint64)
	stream *fakeStream
	sink   *fakeSink
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T) *harness {
	return newHarnessWith(t, Config{ShutdownTimeout: 5 * time.Second})
}

// mustNew builds a relay that logs to the test.
func mustNew(t *testing.T, cfg Config, factory Factory) *Relay {
	t.Helper()
	r, err := New(cfg, zaptest.NewLogger(t), factory)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustDecoder builds a decoder of cfg.
func mustDecoder(t *testing.T, cfg decoder.Config) *decoder.Decoder {
	t.Helper()
	dec, err := decoder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// newFakeSink is a fakeSink with room for n published messages.
func newFakeSink(n int) *fakeSink {
	return &fakeSink{published: make(chan published, n), closed: make(chan struct{})}
}

// run runs r until cancel; done gets what Run returned.
func run(r *Relay) (cancel context.CancelFunc, done chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return cancel, done
}

// ended is what Run sent to done; when it sends nothing within 5 s, the
// test fails with stillRunning.
func ended(t *testing.T, done <-chan error, stillRunning string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal(stillRunning)
		return nil
	}
}

// restartsAtOnce is the configuration of relays whose sessions fail and
// restart within the test.
func restartsAtOnce(reg prometheus.Registerer) Config {
	return Config{RestartBackoffMin: 10 * time.Millisecond, RestartBackoffMax: 20 * time.Millisecond, Registerer: reg}
}

func newHarnessWith(t *testing.T, cfg Config) *harness {
	dec := mustDecoder(t, decoder.Config{Table: schema.Table{Schema: "public", Name: "outbox_messages"}, Columns: schema.DefaultColumns()})
	h := &harness{
		t:      t,
		stream: &fakeStream{feed: make(chan slot.Event), finalPos: make(chan pglogrepl.LSN, 1)},
		sink:   newFakeSink(100),
		reg:    prometheus.NewRegistry(),
	}
	acks := make(chan func(uint64), 1)
	cfg.Registerer = h.reg
	h.r = mustNew(t, cfg, func(_ context.Context, ack func(uint64)) (Parts, error) {
		acks <- ack
		return Parts{Stream: h.stream, Decoder: dec, Publisher: h.sink}, nil
	})
	h.cancel, h.done = run(h.r)
	h.ack = <-acks
	return h
}

// safe is the position the stream would confirm now.
func (h *harness) safe() pglogrepl.LSN {
	h.t.Helper()
	poll.EventuallyTrue(h.t, 5*time.Second, "the stream to run", func() bool { return h.stream.pos.Load() != nil })
	return (*h.stream.pos.Load())()
}

func (h *harness) feed(kind slot.Kind, pos pglogrepl.LSN, data []byte) {
	h.stream.feed <- slot.Event{Kind: kind, Pos: pos, Data: data}
}

func (h *harness) published() published {
	select {
	case p := <-h.sink.published:
		return p
	case <-time.After(5 * time.Second):
		h.t.Fatal("no message was published")
		return published{}
	}
}

// waitSafe waits for the pump to process what was fed and checks Safe.
func (h *harness) waitSafe(want pglogrepl.LSN) {
	h.t.Helper()
	poll.Eventually(h.t, 5*time.Second, "Safe() = "+want.String(), func() (string, bool) {
		got := h.safe()
		return "Safe() = " + got.String(), got == want
	})
}

// stays checks that Safe holds still at want while the pump runs.
func (h *harness) stays(want pglogrepl.LSN) {
	h.t.Helper()
	time.Sleep(20 * time.Millisecond)
	if got := h.safe(); got != want {
		h.t.Fatalf("Safe() = %s; want it to stay at %s", got, want)
	}
}

func TestRelayConfirmsOnlyWhatKafkaAcknowledged(t *testing.T) {
	h := newHarness(t)
	h.feed(slot.KindStart, 100, nil)
	h.waitSafe(100)
	h.feed(slot.KindData, 110, relationMsg())
	h.feed(slot.KindData, 120, beginMsg(190, 7))
	h.feed(slot.KindData, 130, insertMsg("6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11", "o-1"))
	h.feed(slot.KindData, 140, insertMsg("0b7f8f0c-1f7a-4a45-8c63-5e0b9a0d8e22", "o-2"))
	a, b := h.published(), h.published()
	if a.m.AggregateID != "o-1" || b.m.AggregateID != "o-2" || a.token != b.token {
		t.Fatalf("published %q (token %d), %q (token %d); want o-1 and o-2 of one transaction", a.m.AggregateID, a.token, b.m.AggregateID, b.token)
	}
	// Acked before the Commit arrives: nothing to confirm yet.
	h.ack(b.token)
	h.feed(slot.KindData, 190, commitMsg(190, 200))
	// A keepalive while a message is unacknowledged must be ignored.
	h.feed(slot.KindKeepalive, 300, nil)
	h.stays(100)
	h.ack(a.token)
	h.waitSafe(200)
	// Now nothing is in flight: the next keepalive is taken.
	h.feed(slot.KindKeepalive, 400, nil)
	h.waitSafe(400)

	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
	if got := <-h.stream.finalPos; got != 400 {
		t.Errorf("final status position = %s; want 0/190", got)
	}
}

// metric reads one unlabelled gauge or counter from the harness's registry.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	h.t.Fatalf("metric %s not registered", name)
	return 0
}

func heartbeatMsg(lsn pglogrepl.LSN) []byte {
	return pgoutputtest.Message(false, lsn, schema.HeartbeatPrefix, "")
}

// A heartbeat is never published; like a keepalive it is confirmed only
// when nothing is in flight. The oldest-message age and the latency
// histogram follow the transaction from receipt to acknowledgement.
func TestRelayHeartbeatsAndMetrics(t *testing.T) {
	h := newHarness(t)
	h.feed(slot.KindStart, 100, nil)
	h.waitSafe(100)
	if h.metric("walrelay_streaming") != 1 {
		t.Fatalf("walrelay_streaming: got %v; want 1 after the stream started", h.metric("walrelay_streaming"))
	}
	h.feed(slot.KindData, 105, heartbeatMsg(105))
	h.waitSafe(105)
	h.feed(slot.KindData, 110, relationMsg())
	h.feed(slot.KindData, 120, beginMsg(190, 7))
	h.feed(slot.KindData, 130, insertMsg("6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11", "o-1"))
	a := h.published()
	h.feed(slot.KindData, 190, commitMsg(190, 200))
	h.feed(slot.KindData, 250, heartbeatMsg(250))
	h.stays(105)
	// The begin message's commit time is PostgreSQL's epoch (2000-01-01).
	if age := h.metric("walrelay_oldest_unpublished_message_age_seconds"); age < 26*365*24*3600 {
		t.Fatalf("oldest unpublished age with a message in flight: got %v; want the seconds since 2000", age)
	}
	if h.r.Idle() {
		t.Fatal("Idle with a message in flight: got true; want false")
	}
	h.ack(a.token)
	h.waitSafe(200)
	h.feed(slot.KindData, 260, heartbeatMsg(260))
	h.waitSafe(260)
	select {
	case p := <-h.sink.published:
		t.Fatalf("published %+v after the heartbeats; want nothing", p.m)
	default:
	}
	if age := h.metric("walrelay_oldest_unpublished_message_age_seconds"); age != 0 || !h.r.Idle() {
		t.Fatalf("after the ack: age %v, idle %v; want 0 and true", age, h.r.Idle())
	}
	if n := h.metric("walrelay_heartbeats_received_total"); n != 3 {
		t.Fatalf("heartbeats received: got %v; want 3", n)
	}
	if n := h.metric("walrelay_commit_to_ack_seconds"); n != 1 {
		t.Fatalf("commit-to-ack observations: got %v; want 1", n)
	}
	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
	if h.metric("walrelay_streaming") != 0 {
		t.Fatal("walrelay_streaming after the stop: got 1; want 0")
	}
}

// commits follows the tracker: it keeps the commit times of transactions
// not done, and forgets the rest.
func TestCommitsFollowTheTracker(t *testing.T) {
	tr := checkpoint.New(0)
	var c commits
	base := time.Unix(1000, 0)
	var ids []checkpoint.TxnID
	for i := range 3 {
		id, err := tr.Begin()
		if err != nil {
			t.Fatal(err)
		}
		c.begin(id, base.Add(time.Duration(i)*time.Second))
		if err := tr.Add(id); err != nil {
			t.Fatal(err)
		}
		if err := tr.Commit(id, pglogrepl.LSN(0x100*(i+1))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range []checkpoint.TxnID{ids[1], ids[0]} {
		if err := tr.Ack(id); err != nil {
			t.Fatal(err)
		}
		c.follow(tr)
	}
	if _, ok := c.at(ids[0]); ok {
		t.Error("commit time of a done transaction: still kept; want forgotten")
	}
	if got, ok := c.at(ids[2]); !ok || !got.Equal(base.Add(2*time.Second)) {
		t.Errorf("commit time of the pending transaction: got %v, %v; want %v", got, ok, base.Add(2*time.Second))
	}
	if err := tr.Ack(ids[2]); err != nil {
		t.Fatal(err)
	}
	c.follow(tr)
	if len(c.times) != 0 {
		t.Errorf("kept %d commit times with nothing pending; want 0", len(c.times))
	}
}

// A replayed transaction is known when the last session had it done: in
// its confirmable prefix or done ahead of it.
func TestReplayKnown(t *testing.T) {
	r := replay{safe: 0x200, ahead: map[pglogrepl.LSN]struct{}{0x400: {}}}
	for end, want := range map[pglogrepl.LSN]bool{0x100: true, 0x200: true, 0x300: false, 0x400: true, 0x500: false} {
		if got := r.known(end); got != want {
			t.Errorf("known(%s): got %v; want %v", end, got, want)
		}
	}
	if (replay{}).known(0x100) {
		t.Error("a first session knows of no replays: got known")
	}
}

func TestRelayHaltsOnABadRowWithoutConfirmingIt(t *testing.T) {
	h := newHarness(t)
	h.feed(slot.KindStart, 100, nil)
	h.feed(slot.KindData, 110, relationMsg())
	h.feed(slot.KindData, 120, beginMsg(190, 7))
	h.feed(slot.KindData, 130, insertMsg("6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11", ""))
	if got := <-h.stream.finalPos; got != 100 {
		t.Errorf("final status position = %s; want the start position 0/64", got)
	}
	poll.Eventually(t, 5*time.Second, "Halted() naming the bad row's message id", func() (string, bool) {
		got := h.r.Halted()
		return fmt.Sprintf("Halted() = %q", got), strings.Contains(got, "6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11")
	})
	// The relay waits to meet the row again, it does not exit.
	select {
	case err := <-h.done:
		t.Fatalf("Run returned %v after a halt; want it to wait and retry", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := testutil.ToFloat64(h.r.m.sessionErrors.WithLabelValues("halted")); got != 1 {
		t.Errorf("halted session errors = %v; want 1", got)
	}
	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
}

// A row the decoder cannot decode goes to the publisher's PublishBad (which
// parks it) as a message of its transaction: the transaction is confirmed
// only once the row is acked (parked) and its other messages are acked.
func TestRelayHandsABadRowToThePublisher(t *testing.T) {
	h := newHarness(t)
	h.sink.bad = make(chan badPublished, 1)
	h.feed(slot.KindStart, 100, nil)
	h.feed(slot.KindData, 110, relationMsg())
	h.feed(slot.KindData, 120, beginMsg(190, 7))
	h.feed(slot.KindData, 130, insertMsg("6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11", ""))
	h.feed(slot.KindData, 140, insertMsg("0b7f8f0c-1f7a-4a45-8c63-5e0b9a0d8e22", "o-2"))
	h.feed(slot.KindData, 190, commitMsg(190, 200))
	var bad badPublished
	select {
	case bad = <-h.sink.bad:
	case <-time.After(5 * time.Second):
		t.Fatal("no bad row reached the publisher")
	}
	dl := bad.row.DeadLetter()
	if dl.MessageID == nil || dl.MessageID.String() != "6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11" || dl.Position != (schema.Position{CommitLSN: 190, Seq: 0}) ||
		dl.Row["aggregate_id"] == nil || *dl.Row["aggregate_id"] != "" || !strings.Contains(dl.Reason, "aggregate_id") {
		t.Fatalf("bad row %+v; want the row at 0/BE#0 with its id, columns and reason", dl)
	}
	p := h.published()
	if p.m.AggregateID != "o-2" || p.m.Seq != 1 || p.token != bad.token {
		t.Fatalf("published %q at seq %d (token %d); want o-2 at seq 1 of the bad row's transaction (token %d)", p.m.AggregateID, p.m.Seq, p.token, bad.token)
	}
	h.ack(p.token)
	h.stays(100) // the bad row is not parked yet
	h.ack(bad.token)
	h.waitSafe(200)
	h.cancel()
	if err := <-h.done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
}

// streamFunc is a stream made of one function.
type streamFunc func(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error

func (f streamFunc) Run(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error {
	return f(ctx, out, pos, drained)
}

// failingAfterStart delivers Start, then fails like a lost connection.
func failingAfterStart(ctx context.Context, out chan<- slot.Event, _ slot.Position, drained <-chan struct{}) error {
	defer close(out)
	out <- slot.Event{Kind: slot.KindStart, Pos: 100}
	return errors.New("receive from slot: unexpected EOF")
}

// streamingUntilStopped delivers Start and streams until ctx is done.
func streamingUntilStopped(ctx context.Context, out chan<- slot.Event, _ slot.Position, drained <-chan struct{}) error {
	out <- slot.Event{Kind: slot.KindStart, Pos: 100}
	<-ctx.Done()
	close(out)
	<-drained
	return nil
}

// runRelay runs a relay over the streams, one per session (the last one
// repeats); calls counts the sessions built.
func runRelay(t *testing.T, streams ...streamFunc) (r *Relay, calls *atomic.Int32, cancel context.CancelFunc, done chan error) {
	t.Helper()
	dec := mustDecoder(t, decoder.Config{})
	calls = &atomic.Int32{}
	r = mustNew(t, restartsAtOnce(prometheus.NewRegistry()),
		func(_ context.Context, ack func(uint64)) (Parts, error) {
			n := int(calls.Add(1)) - 1
			st := streams[min(n, len(streams)-1)]
			return Parts{Stream: st, Decoder: dec, Publisher: newFakeSink(1)}, nil
		})
	cancel, done = run(r)
	return r, calls, cancel, done
}

func TestRelayStartsANewSessionAfterATransientFailure(t *testing.T) {
	_, calls, cancel, done := runRelay(t, failingAfterStart, streamingUntilStopped)
	poll.Eventually(t, 5*time.Second, "a second session after the first one lost its connection", func() (string, bool) {
		return fmt.Sprintf("%d sessions", calls.Load()), calls.Load() >= 2
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil after a stop", err)
	}
}

func TestRelayFailsFastWhenItNeverStreamed(t *testing.T) {
	refused := func(ctx context.Context, out chan<- slot.Event, _ slot.Position, _ <-chan struct{}) error {
		close(out)
		return errors.New("connect to postgres: connection refused")
	}
	_, calls, cancel, done := runRelay(t, refused)
	defer cancel()
	if err := ended(t, done, "Run kept retrying a relay that never streamed"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Run = %v; want the connection error", err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("sessions = %d; want 1", got)
	}
}

// A transaction Kafka acknowledged in full in a session that then failed is
// published again by the next session: its messages count as known
// replays; a transaction that was still pending does not.
func TestRelayCountsKnownReplays(t *testing.T) {
	txns := func(out chan<- slot.Event) {
		out <- slot.Event{Kind: slot.KindStart, Pos: 100}
		out <- slot.Event{Kind: slot.KindData, Pos: 110, Data: relationMsg()}
		out <- slot.Event{Kind: slot.KindData, Pos: 120, Data: beginMsg(190, 7)}
		out <- slot.Event{Kind: slot.KindData, Pos: 130, Data: insertMsg("6f1c1e4e-8d52-4b9e-9a57-0f4c2c7c2d11", "o-1")}
		out <- slot.Event{Kind: slot.KindData, Pos: 190, Data: commitMsg(190, 200)}
		out <- slot.Event{Kind: slot.KindData, Pos: 220, Data: beginMsg(290, 8)}
		out <- slot.Event{Kind: slot.KindData, Pos: 230, Data: insertMsg("0b7f8f0c-1f7a-4a45-8c63-5e0b9a0d8e22", "o-2")}
		out <- slot.Event{Kind: slot.KindData, Pos: 240, Data: insertMsg("1c2d3e4f-1f7a-4a45-8c63-5e0b9a0d8e33", "o-2")}
		out <- slot.Event{Kind: slot.KindData, Pos: 290, Data: commitMsg(290, 300)}
	}
	failNow := make(chan struct{})
	first := streamFunc(func(ctx context.Context, out chan<- slot.Event, _ slot.Position, drained <-chan struct{}) error {
		defer close(out)
		txns(out)
		<-failNow
		return errors.New("receive from slot: unexpected EOF")
	})
	second := streamFunc(func(ctx context.Context, out chan<- slot.Event, pos slot.Position, drained <-chan struct{}) error {
		txns(out)
		<-ctx.Done()
		close(out)
		<-drained
		return nil
	})
	type session struct {
		sink *fakeSink
		ack  func(uint64)
	}
	sessions := make(chan session, 2)
	var calls atomic.Int32
	reg := prometheus.NewRegistry()
	r := mustNew(t, restartsAtOnce(reg),
		func(_ context.Context, ack func(uint64)) (Parts, error) {
			st := first
			if calls.Add(1) > 1 {
				st = second
			}
			s := session{sink: newFakeSink(10), ack: ack}
			sessions <- s
			return Parts{Stream: st, Decoder: mustDecoder(t, decoder.Config{}), Publisher: s.sink}, nil
		})
	cancel, done := run(r)
	h := &harness{t: t, reg: reg}

	// First session: the second transaction is acknowledged, the first not.
	s1 := <-sessions
	p := make([]published, 3)
	for i := range p {
		p[i] = (&harness{t: t, sink: s1.sink}).published()
	}
	s1.ack(p[1].token)
	s1.ack(p[2].token)
	close(failNow)
	// Second session: everything again, all acknowledged.
	s2 := <-sessions
	for range 3 {
		s2.ack((&harness{t: t, sink: s2.sink}).published().token)
	}
	poll.Eventually(t, 5*time.Second, "all 5 acks of both sessions observed", func() (string, bool) {
		n := h.metric("walrelay_commit_to_ack_seconds")
		return fmt.Sprintf("%v commit-to-ack observations", n), n >= 5
	})
	// The second session counts the replay when it reads the commit,
	// which may come after the acks.
	poll.Eventually(t, 5*time.Second, "the replay counted", func() (string, bool) {
		n := h.metric("walrelay_replayed_messages_total")
		return fmt.Sprintf("walrelay_replayed_messages_total %v", n), n >= 2
	})
	if got := h.metric("walrelay_replayed_messages_total"); got != 2 {
		t.Errorf("walrelay_replayed_messages_total: got %v; want 2 (the acknowledged transaction's messages)", got)
	}
	if got := testutil.ToFloat64(r.m.sessionErrors.WithLabelValues("transient")); got != 1 {
		t.Errorf("transient session errors: got %v; want 1", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
}

// A session that cannot be built after the relay has streamed (the blocked
// aggregates could not be read: a lost connection) is retried like any
// transient failure, not fatal.
func TestRelayRetriesASessionThatCannotBeBuilt(t *testing.T) {
	dec := mustDecoder(t, decoder.Config{})
	var calls atomic.Int32
	r := mustNew(t, restartsAtOnce(nil),
		func(_ context.Context, ack func(uint64)) (Parts, error) {
			sink := newFakeSink(1)
			switch calls.Add(1) {
			case 1:
				return Parts{Stream: streamFunc(failingAfterStart), Decoder: dec, Publisher: sink}, nil
			case 2:
				return Parts{}, errors.New("read blockers: connection reset by peer")
			}
			return Parts{Stream: streamFunc(streamingUntilStopped), Decoder: dec, Publisher: sink}, nil
		})
	cancel, done := run(r)
	poll.Eventually(t, 5*time.Second, "3 sessions", func() (string, bool) {
		select {
		case err := <-done:
			t.Fatalf("Run = %v after %d sessions; want a third session after the one that could not be built", err, calls.Load())
		default:
		}
		return fmt.Sprintf("%d sessions", calls.Load()), calls.Load() >= 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after a stop = %v; want nil", err)
	}
}
