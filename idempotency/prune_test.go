package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
)

// keysAged makes n keys k<from>..k<from+n-1>, created age ago.
func (f *fixture) keysAged(from, n int, age time.Duration) {
	f.t.Helper()
	_, err := f.db.Exec(context.Background(), `INSERT INTO `+f.keys+` (key, fingerprint, response, created_at)
		SELECT 'k' || g, '', '', now() - $3::interval FROM generate_series($1::int, $2::int) g`, from, from+n-1, age)
	testkit.Must(f.t, err, "insert %d keys", n)
}

func TestPruneDeletesOnlyOldKeysInBatches(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.keysAged(0, 2300, 48*time.Hour)
	f.keysAged(5000, 200, 0)
	// A key made through Do, now, and one set back with UPDATE.
	for _, key := range []string{"fresh", "set-back"} {
		_, _, err := f.store.Do(ctx, f.db, key, nil, f.submit(key))
		testkit.Must(t, err, "Do %s", key)
	}
	_, err := f.db.Exec(ctx, "UPDATE "+f.keys+" SET created_at = now() - interval '25 hours' WHERE key = 'set-back'")
	testkit.Must(t, err, "set a key back")

	const pause = 150 * time.Millisecond
	start := time.Now()
	n, err := f.store.Prune(ctx, f.db, 24*time.Hour, 1000, pause)
	took := time.Since(start)
	testkit.Must(t, err, "prune")
	if n != 2301 {
		t.Fatalf("Prune deleted %d keys; want 2301", n)
	}
	// Batches of 1000, 1000 and 301: two pauses between them.
	if took < 2*pause {
		t.Errorf("Prune took %s; want at least two pauses (%s): batches of 1000", took, 2*pause)
	}
	var old, young int
	testkit.Must(t, f.db.QueryRow(ctx, "SELECT count(*) FILTER (WHERE created_at < now() - interval '1 day'), count(*) FROM "+f.keys).
		Scan(&old, &young), "count")
	if old != 0 || young != 201 {
		t.Errorf("after Prune: %d old keys, %d in all; want 0, 201 (200 young ones and 'fresh')", old, young)
	}
	// The pruned key no longer protects: its command runs again.
	if _, replayed, err := f.store.Do(ctx, f.db, "set-back", nil, f.submit("set-back-2")); err != nil || replayed {
		t.Errorf("Do with a pruned key: replayed %v, %v; want false, nil", replayed, err)
	}
	if _, replayed, err := f.store.Do(ctx, f.db, "fresh", nil, f.submit("fresh-2")); err != nil || !replayed {
		t.Errorf("Do with a kept key: replayed %v, %v; want true, nil", replayed, err)
	}
}

func TestPruneStopsWhenTheContextEnds(t *testing.T) {
	f := newFixture(t)
	f.keysAged(0, 250, 48*time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	n, err := f.store.Prune(ctx, f.db, time.Hour, 100, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || n != 100 {
		t.Fatalf("Prune: deleted %d, %v; want 100 (one batch), context.DeadlineExceeded", n, err)
	}
	if got := f.count(f.keys); got != 150 {
		t.Errorf("%d keys left; want 150", got)
	}
}

func TestPruneDefaultsAndRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.keysAged(0, 2500, 48*time.Hour)
	n, err := f.store.Prune(ctx, f.db, time.Hour, 0, 0) // batches of 1000
	if err != nil || n != 2500 {
		t.Fatalf("Prune: deleted %d, %v; want 2500, nil", n, err)
	}
	if _, err := f.store.Prune(ctx, f.db, 0, 10, 0); err == nil {
		t.Error("Prune of keys older than 0: got nil error; want one")
	}
}
