package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/internal/testkit/poll"
)

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    inbox.Config
	}{
		{"no consumer id", inbox.Config{}},
		{"bad table name", inbox.Config{ConsumerID: "billing", Table: inboxTable("x\x00y")}},
		{"versions is the inbox", inbox.Config{ConsumerID: "billing", Table: inboxTable("t"), Versions: inboxTable("t")}},
		{"backoff max below min", inbox.Config{ConsumerID: "billing", RetryBackoffMin: time.Second, RetryBackoffMax: time.Millisecond}},
	} {
		if _, err := inbox.New(tc.c); err == nil {
			t.Errorf("%s: New = nil error; want an error", tc.name)
		}
	}
}

func TestDDLDefaults(t *testing.T) {
	in, err := inbox.New(inbox.Config{ConsumerID: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"public"."inbox_messages"`, `"public"."inbox_aggregate_versions"`} {
		if !strings.Contains(in.DDL(), want) {
			t.Errorf("DDL lacks the default table %s:\n%s", want, in.DDL())
		}
	}
}

// An inbox table made when message ids were uuids refuses another id with
// PostgreSQL's error and the ALTER TABLE that widens it; once widened, the
// message is handled.
func TestHandleNamesTheWideningOfAUUIDInbox(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	f.exec(`ALTER TABLE ` + f.table.Quoted() + ` ALTER COLUMN message_id TYPE uuid USING message_id::uuid`)
	m := message(1)
	m.ID = "order-42" // a text id, as a bigint or text message id column gives
	_, err := in.Handle(context.Background(), f.db, m, func(context.Context, pgx.Tx, inbox.Message) error {
		t.Error("the handler ran for a message the inbox could not record")
		return nil
	})
	want := "have its owner run ALTER TABLE " + f.table.Quoted() + " ALTER COLUMN message_id TYPE text"
	if err == nil || !strings.Contains(err.Error(), "invalid input syntax for type uuid") || !strings.Contains(err.Error(), want) {
		t.Fatalf("Handle = %v; want PostgreSQL's refusal and %q", err, want)
	}
	f.exec(`ALTER TABLE ` + f.table.Quoted() + ` ALTER COLUMN message_id TYPE text`)
	noEffect := func(context.Context, pgx.Tx, inbox.Message) error { return nil } // the effects table takes uuids
	if applied, err := in.Handle(context.Background(), f.db, m, noEffect); err != nil || !applied {
		t.Fatalf("Handle after the ALTER = %v, %v; want true, nil", applied, err)
	}
}

func TestHandleAppliesOnceAndCountsTheDuplicate(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	ctx := context.Background()
	for _, r := range []string{"applied", "duplicate", "failed"} {
		if got := f.messages("warehouse", r); got != 0 {
			t.Errorf("messages{result=%s} before any message = %v; want 0", r, got)
		}
	}
	m := message(1)
	for i, want := range []bool{true, false} {
		applied, err := in.Handle(ctx, f.db, m, f.effect("warehouse"))
		if err != nil || applied != want {
			t.Fatalf("Handle #%d = %v, %v; want %v, nil", i+1, applied, err, want)
		}
	}
	if got := f.effectRows("warehouse", m.ID); got != 1 {
		t.Errorf("effects of %s: got %d; want 1", m.ID, got)
	}
	if got := f.inboxRows("warehouse"); got != 1 {
		t.Errorf("inbox rows: got %d; want 1", got)
	}
	f.wantMessages("warehouse", 1, 1, 0)
	if got := f.handled("warehouse"); got != 2 {
		t.Errorf("handle_seconds count: got %d; want 2", got)
	}
}

func TestHandleRollsBackTheInboxRowWithAFailedHandler(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	ctx := context.Background()
	m := message(2)
	boom := errors.New("warehouse full")
	failing := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := f.effect("warehouse")(ctx, tx, m); err != nil {
			return err
		}
		return boom
	}
	applied, err := in.Handle(ctx, f.db, m, failing)
	if applied || !errors.Is(err, boom) {
		t.Fatalf("Handle with a failing handler = %v, %v; want false, an error wrapping %v", applied, err, boom)
	}
	if got, got2 := f.inboxRows("warehouse"), f.effectRows("warehouse", m.ID); got != 0 || got2 != 0 {
		t.Fatalf("after the failure: %d inbox rows, %d effects; want 0 and 0", got, got2)
	}
	applied, err = in.Handle(ctx, f.db, m, f.effect("warehouse"))
	if !applied || err != nil {
		t.Fatalf("Handle again = %v, %v; want true, nil", applied, err)
	}
	if got, got2 := f.inboxRows("warehouse"), f.effectRows("warehouse", m.ID); got != 1 || got2 != 1 {
		t.Errorf("after the retry: %d inbox rows, %d effects; want 1 and 1", got, got2)
	}
	f.wantMessages("warehouse", 1, 0, 1)
}

func TestHandleKeepsConsumersIndependent(t *testing.T) {
	f := newFixture(t)
	billing, warehouse := f.newInbox("billing"), f.newInbox("warehouse") // one registry for both
	ctx := context.Background()
	m := message(3)
	for round := range 2 {
		for _, c := range []struct {
			name string
			in   *inbox.Inbox
		}{{"billing", billing}, {"warehouse", warehouse}} {
			applied, err := c.in.Handle(ctx, f.db, m, f.effect(c.name))
			if err != nil || applied != (round == 0) {
				t.Fatalf("%s round %d: Handle = %v, %v; want %v, nil", c.name, round, applied, err, round == 0)
			}
		}
	}
	for _, c := range []string{"billing", "warehouse"} {
		if got := f.effectRows(c, m.ID); got != 1 {
			t.Errorf("%s effects: got %d; want 1", c, got)
		}
		f.wantMessages(c, 1, 1, 0)
	}
}

// TestHandleSameMessageAtOnce delivers one message to two instances of one
// consumer at the same moment: the second waits on the first's inbox row,
// and then is a duplicate when the first commits, or applies the message
// when the first rolls back.
func TestHandleSameMessageAtOnce(t *testing.T) {
	for _, firstFails := range []bool{false, true} {
		name := map[bool]string{false: "first commits", true: "first rolls back"}[firstFails]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			a, b := f.newInbox("warehouse"), f.newInbox("warehouse")
			m := message(4)
			boom := errors.New("first handler fails")
			var once sync.Once
			var handlers atomic.Int32
			h := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
				handlers.Add(1) // only one handler runs at a time: the other waits on the row
				if err := f.effect("warehouse")(ctx, tx, m); err != nil {
					return err
				}
				var err error
				once.Do(func() {
					// The first handler holds the inbox row until the other
					// instance is seen waiting for it.
					f.waitForLockWaiter(ctx)
					if firstFails {
						err = boom
					}
				})
				return err
			}
			results := make([]error, 2)
			applied := make([]bool, 2)
			var wg sync.WaitGroup
			for i, in := range []*inbox.Inbox{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					applied[i], results[i] = in.Handle(context.Background(), f.db, m, h)
				}()
			}
			wg.Wait()
			f.checkAtOnce(firstFails, boom, applied, results, int(handlers.Load()))
			if got := f.effectRows("warehouse", m.ID); got != 1 {
				t.Errorf("effects: got %d; want exactly 1", got)
			}
		})
	}
}

// checkAtOnce checks the outcome of TestHandleSameMessageAtOnce.
func (f *fixture) checkAtOnce(firstFails bool, boom error, applied []bool, results []error, handlers int) {
	f.t.Helper()
	var nApplied, nDup, nFailed int
	for i := range applied {
		switch {
		case errors.Is(results[i], boom):
			nFailed++
		case results[i] != nil:
			f.t.Errorf("Handle #%d: unexpected error %v", i, results[i])
		case applied[i]:
			nApplied++
		default:
			nDup++
		}
	}
	wantDup, wantFailed, wantHandlers := 1, 0, 1
	if firstFails {
		wantDup, wantFailed, wantHandlers = 0, 1, 2
	}
	if nApplied != 1 || nDup != wantDup || nFailed != wantFailed || handlers != wantHandlers {
		f.t.Errorf("applied %d, duplicate %d, failed %d, handler runs %d; want 1, %d, %d, %d",
			nApplied, nDup, nFailed, handlers, wantDup, wantFailed, wantHandlers)
	}
	f.wantMessages("warehouse", 1, float64(wantDup), float64(wantFailed))
}

// waitForLockWaiter waits until a session inserting into the fixture's
// inbox waits on a lock: the second instance, blocked by the first's row.
func (f *fixture) waitForLockWaiter(ctx context.Context) {
	f.t.Helper()
	if !poll.Until(10*time.Second, 5*time.Millisecond, func() bool {
		return f.count(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
			"INSERT INTO "+f.table.Quoted()+"%") == 1
	}) {
		f.t.Errorf("no second session waited on the inbox row within 10s")
	}
}

// wantMessages checks the consumer's message counters.
func (f *fixture) wantMessages(consumer string, applied, duplicate, failed float64) {
	f.t.Helper()
	a, d, x := f.messages(consumer, "applied"), f.messages(consumer, "duplicate"), f.messages(consumer, "failed")
	if a != applied || d != duplicate || x != failed {
		f.t.Errorf("%s messages_total: applied %v, duplicate %v, failed %v; want %v, %v, %v",
			consumer, a, d, x, applied, duplicate, failed)
	}
}
