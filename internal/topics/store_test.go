package topics_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/topics"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// newStore makes the test's own topics table (slot.EnsureTopicsTable, as
// `walrelay init` does), dropped in t.Cleanup.
func newStore(t *testing.T) (*topics.Store, *pgtest.DB, schema.Config) {
	t.Helper()
	pg := pgtest.New(t, "outbox_topics_")
	cfg := schema.DefaultConfig()
	cfg.Table.Name = pg.Name
	pg.DropTable(cfg.TopicsTable().Quoted())
	s, err := topics.New(pg.Pool, cfg.TopicsTable())
	if err != nil {
		t.Fatal(err)
	}
	return s, pg, cfg
}

func TestClaimRecordsTheFirstCountAndAcceptChangesIt(t *testing.T) {
	s, pg, cfg := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "does not exist: run `walrelay init`") {
		t.Errorf("Ready before the table exists = %v; want it to say walrelay init makes it", err)
	}
	for range 2 {
		if err := slot.EnsureTopicsTable(ctx, pg.Conn(), cfg); err != nil {
			t.Fatalf("EnsureTopicsTable: %v", err)
		}
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}

	// Two sinks meeting the topic at once agree on one count.
	var wg sync.WaitGroup
	got := make([]int, 2)
	for i, n := range []int{4, 5} {
		wg.Go(func() {
			var err error
			if got[i], err = s.Claim(ctx, "orders", n); err != nil {
				t.Errorf("Claim(orders, %d) = %v", n, err)
			}
		})
	}
	wg.Wait()
	if got[0] != got[1] || (got[0] != 4 && got[0] != 5) {
		t.Fatalf("concurrent claims returned %v; want one of the counts, twice", got)
	}
	first := got[0]
	if n, err := s.Claim(ctx, "orders", 8); err != nil || n != first {
		t.Errorf("Claim(orders, 8) after the first = %d, %v; want the recorded %d", n, err, first)
	}

	if err := s.Accept(ctx, "orders", 8, "walrelay topics accept: grown for more consumers"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Claim(ctx, "orders", 8); err != nil || n != 8 {
		t.Errorf("Claim after Accept = %d, %v; want 8", n, err)
	}
	if err := s.Accept(ctx, "payments", 0, "x"); err == nil {
		t.Error("Accept of 0 partitions = nil; want an error")
	}
	if err := s.Accept(ctx, "payments", 3, "walrelay topics accept"); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Topic != "orders" || all[0].Partitions != 8 || !strings.Contains(all[0].RecordedBy, "grown for more consumers") ||
		all[1].Topic != "payments" || all[1].Partitions != 3 || all[0].RecordedAt.IsZero() {
		t.Errorf("List = %+v; want orders at 8 (accepted, with its reason), then payments at 3", all)
	}
	if l, found, err := s.Get(ctx, "nothing"); err != nil || found {
		t.Errorf("Get of an unknown topic = %+v, %v, %v; want not found", l, found, err)
	}
}
