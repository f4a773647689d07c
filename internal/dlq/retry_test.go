package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
)

func TestRetryRebuildsMessagesInOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := parked(1, orderA)
	first.Message.Topic = "special.orders"
	first.Message.HasVersion, first.Message.AggregateVersion = false, 0
	first.Message.Headers = nil
	f.park(parked(0, orderB), first, behind(2, orderA, 1), behind(4, orderA, 1))

	pub := &fakePublisher{}
	res, err := f.store.Retry(ctx, dlq.Selection{All: true}, pub)
	if err != nil {
		t.Fatal(err)
	}
	want := []*schema.Message{first.Message, message(2, orderA), message(4, orderA), message(0, orderB)}
	if len(pub.got) != 1 || len(pub.got[0]) != len(want) {
		t.Fatalf("published %d calls; want one call with %d messages", len(pub.got), len(want))
	}
	for i, m := range pub.got[0] {
		if !sameMessage(m, want[i]) {
			t.Errorf("message %d = %+v; want %+v", i, *m, *want[i])
		}
	}
	var got []schema.Position
	for _, it := range res.Published {
		got = append(got, it.Position)
	}
	if wantPos := []schema.Position{pos(1), pos(2), pos(4), pos(0)}; !reflect.DeepEqual(got, wantPos) || len(res.Left) != 0 {
		t.Errorf("Published %v, Left %v; want %v and nothing left", got, res.Left, wantPos)
	}
	if n := f.count("parked"); n != 0 {
		t.Errorf("parked rows after the retry = %d; want 0 (deleted)", n)
	}
}

// sameMessage compares messages field by field, times by instant.
func sameMessage(a, b *schema.Message) bool {
	ta, tb := *a, *b
	if !ta.OccurredAt.Equal(tb.OccurredAt) || !ta.CommitTime.Equal(tb.CommitTime) {
		return false
	}
	ta.OccurredAt, tb.OccurredAt, ta.CommitTime, tb.CommitTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(ta, tb)
}

func TestRetryOfOneMessageMustBeFirstOfItsAggregate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderA), behind(2, orderA, 1))
	pub := &fakePublisher{}
	_, err := f.store.Retry(ctx, dlq.Selection{MessageID: ptr(id(2))}, pub)
	var nf *dlq.NotFirstError
	if !errors.As(err, &nf) || nf.First.Position != pos(1) || !strings.Contains(err.Error(), id(1).String()) {
		t.Fatalf("Retry of the second message = %v; want *NotFirstError naming %s", err, id(1))
	}
	if len(pub.got) != 0 || f.count("parked") != 2 {
		t.Fatalf("after a refused retry: %d publish calls, %d parked; want 0 and 2", len(pub.got), f.count("parked"))
	}
	res, err := f.store.Retry(ctx, dlq.Selection{Position: ptr(pos(1))}, pub)
	if err != nil || len(res.Published) != 1 || res.Published[0].Position != pos(1) {
		t.Fatalf("Retry of the first message = %+v, %v; want it published", res, err)
	}
	if _, err := f.store.Retry(ctx, dlq.Selection{MessageID: ptr(id(2))}, pub); err != nil {
		t.Errorf("Retry of the second message once it is first = %v; want nil", err)
	}
	if n := f.count("parked"); n != 0 {
		t.Errorf("parked rows = %d; want 0", n)
	}
}

func TestRetryFailureKeepsRowsAndCountsTheTry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderA), behind(2, orderA, 1), behind(3, orderA, 1))
	refused := errors.New("kafka: MESSAGE_TOO_LARGE")
	pub := &fakePublisher{publish: func(_ context.Context, msgs []*schema.Message) ([]bool, error) {
		return []bool{true, false, false}, refused
	}}
	res, err := f.store.Retry(ctx, dlq.Selection{Aggregate: &orderA}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Published) != 1 || len(res.Left) != 2 || !errors.Is(res.PublishErr, refused) ||
		!strings.Contains(res.Left[0].Why, "MESSAGE_TOO_LARGE") {
		t.Fatalf("Result = %+v; want 1 published, 2 left with the error", res)
	}
	es, err := f.store.List(ctx, dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if got := positions(es); !reflect.DeepEqual(got, []schema.Position{pos(2), pos(3)}) {
		t.Fatalf("parked after the failed retry: %v; want %v", got, []schema.Position{pos(2), pos(3)})
	}
	for _, e := range es {
		if e.Retries != 1 || !strings.Contains(e.LastError, "MESSAGE_TOO_LARGE") {
			t.Errorf("row %s: retries %d, last_error %q; want 1 and the error", e.Position, e.Retries, e.LastError)
		}
	}
}

func TestRetryLeavesUndecodableRowsAndWhatWaitsBehindThem(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bad := undecodable(1, orderA)
	f.park(bad, behind(2, orderA, 1), parked(3, orderB), undecodable(4, schema.Aggregate{}))
	pub := &fakePublisher{}
	res, err := f.store.Retry(ctx, dlq.Selection{All: true}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Published) != 1 || res.Published[0].Position != pos(3) {
		t.Errorf("Published = %+v; want only %s", res.Published, pos(3))
	}
	why := map[schema.Position]string{}
	for _, it := range res.Left {
		why[it.Position] = it.Why
	}
	if !strings.Contains(why[pos(1)], "fix the data with a new outbox row, then discard this one") ||
		!strings.Contains(why[pos(4)], "fix the data with a new outbox row") ||
		!strings.Contains(why[pos(2)], "waits behind the row at "+pos(1).String()) || len(why) != 3 {
		t.Errorf("Left = %+v; want the undecodable rows told to be fixed and discarded, and the later one waiting", res.Left)
	}
	if n := f.count("parked"); n != 3 {
		t.Errorf("parked = %d; want 3", n)
	}
}

// TestRetryHoldsBackAConcurrentPark: while a Retry publishes, a Park of a
// later message of the same aggregate waits for it; then it sees whether
// the retry unblocked the aggregate.
func TestRetryHoldsBackAConcurrentPark(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ack        bool
		wantParked bool
	}{
		{"retry succeeds: the later message is not parked", true, false},
		{"retry fails: the later message is parked behind", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			t.Cleanup(cancel) // before the table is dropped: ends a retry left waiting
			f.park(parked(1, orderA), behind(2, orderA, 1))

			publishing, release := make(chan struct{}), make(chan struct{})
			pub := &fakePublisher{publish: func(_ context.Context, msgs []*schema.Message) ([]bool, error) {
				close(publishing)
				select {
				case <-release:
				case <-ctx.Done():
					return make([]bool, len(msgs)), ctx.Err()
				}
				if tc.ack {
					return allAcked(msgs), nil
				}
				return make([]bool, len(msgs)), errors.New("refused")
			}}
			retried := make(chan error, 1)
			go func() {
				_, err := f.store.Retry(ctx, dlq.Selection{Aggregate: &orderA}, pub)
				retried <- err
			}()
			<-publishing

			type parkResult struct {
				ok  bool
				err error
			}
			parkedCh := make(chan parkResult, 1)
			go func() {
				ok, err := f.store.Park(ctx, behind(5, orderA, 1))
				parkedCh <- parkResult{ok, err}
			}()
			f.waitForLockWait(15 * time.Second)
			select {
			case r := <-parkedCh:
				t.Fatalf("Park returned %v, %v while the retry held its rows; want it to wait", r.ok, r.err)
			default:
			}

			close(release)
			if err := <-retried; err != nil {
				t.Fatalf("Retry = %v", err)
			}
			r := <-parkedCh
			if r.err != nil || r.ok != tc.wantParked {
				t.Fatalf("Park after the retry = %v, %v; want %v", r.ok, r.err, tc.wantParked)
			}
			want := 0
			if tc.wantParked {
				want = 3
			}
			if n := f.count("parked"); n != want {
				t.Errorf("parked rows = %d; want %d", n, want)
			}
		})
	}
}

// waitForLockWait waits until a session waits for a row lock on the
// fixture's table with a FOR SHARE read: Park's check.
func (f *fixture) waitForLockWait(within time.Duration) {
	f.t.Helper()
	poll.Eventually(f.t, within, "a Park waiting for the retry's locks", func() (string, bool) {
		var n int
		err := f.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%FOR SHARE%' AND strpos(query, $1) > 0`,
			f.table.Quoted()).Scan(&n)
		if err != nil {
			f.t.Fatalf("read pg_stat_activity: %v", err)
		}
		return fmt.Sprintf("%d sessions waiting", n), n > 0
	})
}

// A parked tombstone keeps a NULL payload, lists as a message without a
// payload size, and comes back from Retry as a tombstone; an empty payload
// comes back empty, not as a tombstone.
func TestRetryPublishesATombstoneAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tomb, empty := parked(1, orderA), parked(2, orderA)
	tomb.Message.Payload, tomb.Message.ContentType, tomb.Message.Tombstone = nil, "", true
	empty.Message.Payload, empty.Message.ContentType = []byte{}, "text/plain; charset=utf-8"
	f.park(tomb, empty)

	entries, err := f.store.List(ctx, dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Undecodable || entries[0].PayloadBytes != nil ||
		entries[1].PayloadBytes == nil || *entries[1].PayloadBytes != 0 {
		t.Fatalf("entries %+v; want the tombstone retryable without a payload size, then an empty payload of size 0", entries)
	}
	pub := &fakePublisher{}
	res, err := f.store.Retry(ctx, dlq.Selection{All: true}, pub)
	if err != nil || len(res.Published) != 2 {
		t.Fatalf("Retry = %+v, %v; want both published", res, err)
	}
	got := pub.got[0]
	if !sameMessage(got[0], tomb.Message) || got[0].Payload != nil {
		t.Errorf("retried tombstone = %+v; want %+v, payload nil", *got[0], *tomb.Message)
	}
	if !sameMessage(got[1], empty.Message) || got[1].Payload == nil || got[1].Tombstone {
		t.Errorf("retried empty payload = %+v; want %+v, payload empty and not nil", *got[1], *empty.Message)
	}
}
