package inbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/inbox"
)

// checkVersion runs CheckVersion for version v of aggregate order-1 in a
// transaction of its own, committed unless rollback.
func (f *fixture) checkVersion(in *inbox.Inbox, v int64, rollback bool) inbox.Order {
	f.t.Helper()
	ctx := context.Background()
	m := message(1)
	m.AggregateID, m.AggregateVersion = "order-1", v
	tx, err := f.db.Begin(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	o, err := in.CheckVersion(ctx, tx, m)
	if err != nil {
		f.t.Fatalf("CheckVersion(%d): %v", v, err)
	}
	if !rollback {
		if err := tx.Commit(ctx); err != nil {
			f.t.Fatal(err)
		}
	}
	return o
}

// lastVersion is the version recorded for consumer's order-1.
func (f *fixture) lastVersion(consumer string) int64 {
	f.t.Helper()
	return f.count(`SELECT version FROM `+f.versions.Quoted()+
		` WHERE consumer_id = $1 AND aggregate_type = 'order' AND aggregate_id = 'order-1'`, consumer)
}

func TestCheckVersion(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	for _, step := range []struct {
		v        int64
		rollback bool
		want     inbox.Order
		last     int64 // recorded afterwards
	}{
		{v: 3, want: inbox.First, last: 3},
		{v: 4, want: inbox.Next, last: 4},
		{v: 4, want: inbox.Stale, last: 4}, // a repeat
		{v: 2, want: inbox.Stale, last: 4}, // older
		{v: 7, want: inbox.Gap, last: 7},   // 5 and 6 missing
		{v: 5, want: inbox.Stale, last: 7}, // late: never backwards
		{v: 8, rollback: true, want: inbox.Next, last: 7},
		{v: 8, want: inbox.Next, last: 8}, // the rolled-back check recorded nothing
	} {
		if got := f.checkVersion(in, step.v, step.rollback); got != step.want {
			t.Errorf("CheckVersion(%d) = %s; want %s", step.v, got, step.want)
		}
		if got := f.lastVersion("warehouse"); got != step.last {
			t.Errorf("after version %d: recorded %d; want %d", step.v, got, step.last)
		}
	}
	// Another consumer starts afresh on the same aggregate.
	billing := f.newInbox("billing")
	if got := f.checkVersion(billing, 5, false); got != inbox.First {
		t.Errorf("billing CheckVersion(5) = %s; want first", got)
	}
	if got := f.lastVersion("warehouse"); got != 8 {
		t.Errorf("warehouse's version after billing's: %d; want 8", got)
	}
}

func TestCheckVersionWithinHandle(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	ctx := context.Background()
	var orders []inbox.Order
	h := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		o, err := in.CheckVersion(ctx, tx, m)
		orders = append(orders, o)
		if err != nil || o == inbox.Stale {
			return err // a stale message: recorded in the inbox, no effect
		}
		return f.effect("warehouse")(ctx, tx, m)
	}
	for _, n := range []int{5, 10, 10, 15, 0} { // all of aggregate order-0; 10 twice
		if _, err := in.Handle(ctx, f.db, message(n), h); err != nil {
			t.Fatal(err)
		}
	}
	want := []inbox.Order{inbox.First, inbox.Gap, inbox.Gap, inbox.Stale}
	if len(orders) != len(want) {
		t.Fatalf("orders %v; want %v (the repeated message is a duplicate, its handler never runs)", orders, want)
	}
	for i := range want {
		if orders[i] != want[i] {
			t.Errorf("orders %v; want %v", orders, want)
			break
		}
	}
	if got := f.count(`SELECT count(*) FROM ` + f.effects); got != 3 {
		t.Errorf("effects: got %d; want 3 (versions 5, 10, 15)", got)
	}
}

func TestCheckVersionRefusesAMessageWithoutVersion(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("warehouse")
	ctx := context.Background()
	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	m := message(1)
	m.HasVersion = false
	if _, err := in.CheckVersion(ctx, tx, m); err == nil {
		t.Error("CheckVersion of a message without a version = nil error; want an error")
	}
}
