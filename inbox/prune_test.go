package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/inbox"
)

// countingBeginner counts the transactions Prune opens.
type countingBeginner struct {
	db    inbox.Beginner
	begun int
}

func (c *countingBeginner) Begin(ctx context.Context) (pgx.Tx, error) {
	c.begun++
	return c.db.Begin(ctx)
}

func TestPruneDeletesOnlyOldRowsOfItsConsumer(t *testing.T) {
	f := newFixture(t)
	warehouse, billing := f.newInbox("warehouse"), f.newInbox("billing")
	ctx := context.Background()
	for n := range 10 {
		for _, in := range []*inbox.Inbox{warehouse, billing} {
			if _, err := in.Handle(ctx, f.db, message(n), f.effect("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 7 of warehouse's rows and all of billing's are two hours old.
	f.exec(`UPDATE `+f.table.Quoted()+` SET processed_at = now() - interval '2 hours'
		WHERE consumer_id = 'billing' OR (consumer_id = 'warehouse' AND message_id <> ALL ($1::text[]))`,
		[]string{id(0).String(), id(1).String(), id(2).String()})
	db := &countingBeginner{db: f.db}
	const pause = 50 * time.Millisecond
	start := time.Now()
	n, err := warehouse.Prune(ctx, db, time.Hour, 3, pause)
	elapsed := time.Since(start)
	if err != nil || n != 7 {
		t.Fatalf("Prune = %d, %v; want 7, nil", n, err)
	}
	// The clock, then batches of 3, 3 and 1: two pauses between them.
	if db.begun != 4 || elapsed < 2*pause {
		t.Errorf("Prune opened %d transactions in %s; want 4 (the clock and 3 batches), and 2 pauses of %s", db.begun, elapsed, pause)
	}
	if got := f.inboxRows("warehouse"); got != 3 {
		t.Errorf("warehouse rows left: %d; want 3 (the recent ones)", got)
	}
	for i := range 3 {
		if got := f.count(`SELECT count(*) FROM `+f.table.Quoted()+` WHERE consumer_id = 'warehouse' AND message_id = $1`, id(i).String()); got != 1 {
			t.Errorf("recent row %s: %d; want 1", id(i), got)
		}
	}
	if got := f.inboxRows("billing"); got != 10 {
		t.Errorf("billing rows left: %d; want 10 (another consumer's)", got)
	}
	// Nothing old is left: one batch (the default size), nothing deleted.
	if n, err := warehouse.Prune(ctx, f.db, time.Hour, 0, time.Hour); err != nil || n != 0 {
		t.Errorf("second Prune = %d, %v; want 0, nil", n, err)
	}
	if _, err := warehouse.Prune(ctx, f.db, 0, 10, 0); err == nil {
		t.Error("Prune older than 0 = nil error; want an error")
	}
}

// A batch exactly as large as what is left is followed by one that finds
// nothing.
func TestPruneStopsAfterAShortBatch(t *testing.T) {
	f := newFixture(t)
	in := f.newInbox("billing")
	ctx := context.Background()
	for n := range 6 {
		if _, err := in.Handle(ctx, f.db, message(n), f.effect("billing")); err != nil {
			t.Fatal(err)
		}
	}
	f.exec(`UPDATE ` + f.table.Quoted() + ` SET processed_at = now() - interval '2 days'`)
	db := &countingBeginner{db: f.db}
	if n, err := in.Prune(ctx, db, 24*time.Hour, 3, time.Millisecond); err != nil || n != 6 {
		t.Fatalf("Prune = %d, %v; want 6, nil", n, err)
	}
	if db.begun != 4 {
		t.Errorf("Prune opened %d transactions; want 4 (the clock, 3, 3, 0)", db.begun)
	}
}
