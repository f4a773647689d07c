package inbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

// observed makes the inbox log to an observer as well as to the test.
func observed(logs *observer.ObservedLogs, core zapcore.Core) func(*inbox.Config) {
	return func(c *inbox.Config) {
		c.Logger = zap.New(zapcore.NewTee(c.Logger.Core(), core))
	}
}

// flaky records every attempt at a message and fails the first `fails`
// attempts at the message `bad`.
type flaky struct {
	mu       sync.Mutex
	attempts map[schema.MessageID]int
	bad      schema.MessageID
	fails    int
	next     inbox.Handler
}

func (f *flaky) handle(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	f.mu.Lock()
	f.attempts[m.ID]++
	n := f.attempts[m.ID]
	f.mu.Unlock()
	if m.ID == f.bad && n <= f.fails {
		return errors.New("the warehouse database is busy")
	}
	return f.next(ctx, tx, m)
}

func (f *flaky) attemptsAt(id schema.MessageID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[id]
}

func TestConsumeAppliesEachMessageOnceAndCommitsTheOffsets(t *testing.T) {
	f, tp := newFixture(t), newTopic(t, 3)
	core, logs := observer.New(zap.InfoLevel)
	in := f.newInbox("warehouse", observed(logs, core))
	const n, dups = 30, 5
	var records []kafka.Message
	for i := range n {
		records = append(records, walrelayRecord(i))
	}
	for i := range dups { // a replay: the same messages again, behind the originals
		records = append(records, walrelayRecord(i))
	}
	tp.produce(records...)
	h := &flaky{attempts: map[schema.MessageID]int{}, bad: id(7), fails: 2, next: f.effect("warehouse")}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- in.Consume(ctx, tp.reader(), f.db, h.handle) }()
	poll.EventuallyEvery(t, 60*time.Second, 50*time.Millisecond, "every offset committed", tp.caughtUp)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Consume after cancel = %v; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return within 10s of the cancel")
	}

	if got := f.count(`SELECT count(*) FROM ` + f.effects); got != n {
		t.Errorf("effects: got %d; want %d", got, n)
	}
	if got := f.count(`SELECT count(DISTINCT message_id) FROM ` + f.effects); got != n {
		t.Errorf("messages with an effect: got %d; want %d", got, n)
	}
	if got := h.attemptsAt(id(7)); got != 3 {
		t.Errorf("attempts at the failing message: got %d; want 3 (2 failures, then applied)", got)
	}
	if got := h.attemptsAt(id(0)); got != 1 {
		t.Errorf("handler runs for a redelivered message: got %d; want 1", got)
	}
	f.wantMessages("warehouse", n, dups, 2)
	checkLogs(t, logs, dups, id(7))
}

// A consumer usually starts before walrelay created its topic (on the
// first message). WaitForTopic holds it back until the topic is there,
// without creating it (the rig's broker would auto-create a topic it is
// asked about), and the group then gets the partitions.
func TestWaitForTopicThenConsume(t *testing.T) {
	f, tp := newFixture(t), newTopicLater(t, 2)
	in := f.newInbox("warehouse")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		if err := inbox.WaitForTopic(ctx, tp.brokers, tp.name, 100*time.Millisecond, func() { close(waited) }); err != nil {
			done <- err
			return
		}
		done <- in.Consume(ctx, tp.reader(), f.db, f.effect("warehouse"))
	}()
	select {
	case <-waited:
	case err := <-done:
		t.Fatalf("WaitForTopic before the topic exists returned (%v); want it waiting", err)
	case <-time.After(30 * time.Second):
		t.Fatal("WaitForTopic did not report waiting within 30s")
	}
	time.Sleep(time.Second)
	tp.create() // fails if waiting created the topic
	const n = 10
	var records []kafka.Message
	for i := range n {
		records = append(records, walrelayRecord(i))
	}
	tp.produce(records...)
	poll.EventuallyEvery(t, 60*time.Second, 50*time.Millisecond, "every offset committed", tp.caughtUp)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume after cancel = %v; want nil", err)
	}
	if got := f.count(`SELECT count(*) FROM ` + f.effects); got != n {
		t.Errorf("effects: got %d; want %d", got, n)
	}
}

func TestWaitForTopicEndsWithTheContext(t *testing.T) {
	tp := newTopicLater(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := inbox.WaitForTopic(ctx, tp.brokers, tp.name, 100*time.Millisecond, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tp.name) {
		t.Errorf("WaitForTopic on a missing topic = %v; want the deadline, naming %s", err, tp.name)
	}
}

// checkLogs checks the duplicates logged at Info and the failures of bad
// logged at Warn.
func checkLogs(t *testing.T, logs *observer.ObservedLogs, dups int, bad schema.MessageID) {
	t.Helper()
	if got := logs.FilterMessage("duplicate message skipped").Len(); got != dups {
		t.Errorf(`"duplicate message skipped" lines: got %d; want %d`, got, dups)
	}
	failures := logs.FilterLevelExact(zap.WarnLevel).FilterMessage("message handling failed; retrying")
	if got := failures.FilterField(zap.Stringer("message_id", bad)).Len(); got != 2 || failures.Len() != 2 {
		t.Errorf("handler failures logged at Warn: %d, %d of them for %s; want 2, 2", failures.Len(), got, bad)
	}
}

func TestConsumeStopsAtARecordThatIsNotWalrelays(t *testing.T) {
	f, tp := newFixture(t), newTopic(t, 1)
	in := f.newInbox("warehouse")
	bad := walrelayRecord(3)
	bad.Headers = slices.DeleteFunc(slices.Clone(bad.Headers), func(h kafka.Header) bool { return h.Key == schema.HeaderID })
	tp.produce(walrelayRecord(0), walrelayRecord(1), walrelayRecord(2), bad, walrelayRecord(4))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := tp.reader()
	err := in.Consume(ctx, r, f.db, f.effect("warehouse"))
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Consume = %v (context: %v); want an error about the record at offset 3", err, ctx.Err())
	}
	for _, want := range []string{"topic " + tp.name, "partition 0 offset 3", "no ce_id header"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Consume error %q; want it to contain %q", err, want)
		}
	}
	if got := f.count(`SELECT count(*) FROM ` + f.effects); got != 3 {
		t.Errorf("effects: got %d; want 3 (the records before the bad one)", got)
	}
	if got := tp.committed(); got[0] != 3 {
		t.Errorf("committed offset: got %d; want 3 (the bad record's, not past it)", got[0])
	}
	r.Close()
	// The group comes back to the bad record: it was not skipped.
	km, err := tp.reader().FetchMessage(ctx)
	if err != nil || km.Offset != 3 {
		t.Errorf("a new reader of the group: got offset %d, %v; want offset 3", km.Offset, err)
	}
}

func TestConsumeRefusesAReaderWithoutGroup(t *testing.T) {
	in, err := inbox.New(inbox.Config{ConsumerID: "warehouse"})
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "outbox.order"})
	defer r.Close()
	if err := in.Consume(context.Background(), r, nil, nil); err == nil || !strings.Contains(err.Error(), "GroupID") {
		t.Errorf("Consume with a reader without a group = %v; want an error naming GroupID", err)
	}
}
