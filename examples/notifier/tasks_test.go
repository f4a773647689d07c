package main

import (
	"context"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
)

// testTasks opens the rig's database and makes a tasks table of the test's
// own, dropped at its end.
func testTasks(t *testing.T) (*pgxpool.Pool, *taskStore) {
	t.Helper()
	pgURL, _ := testkit.Services(t)
	ctx := context.Background()
	pg := pgtest.Connect(t, pgURL, "email_tasks_")
	pool := pg.Pool
	table := schema.Table{Schema: "public", Name: pg.Name}
	s, err := newTaskStore(table)
	testkit.Must(t, err, "task store")
	pg.DropTable(table.Quoted())
	// Twice at once: the advisory lock keeps the two from racing.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = ensureSchema(ctx, pool, s.DDL()) })
	}
	wg.Wait()
	for _, err := range errs {
		testkit.Must(t, err, "ensure schema")
	}
	return pool, s
}

func newTestTask(order string) task {
	return task{Key: taskKey(order), OrderID: order, Recipient: order + "@example.com", Subject: "s " + order, Body: "b\n"}
}

type taskRow struct {
	status    string
	attempts  int
	lastError *string
	dueIn     time.Duration // next_attempt_at - now()
	sent      bool          // sent_at is set
}

func readTask(t *testing.T, pool *pgxpool.Pool, s *taskStore, key string) taskRow {
	t.Helper()
	var r taskRow
	var dueMs float64
	err := pool.QueryRow(context.Background(), `SELECT status, attempts, last_error,
		extract(epoch FROM next_attempt_at - now()) * 1000, sent_at IS NOT NULL FROM `+s.table+` WHERE task_key = $1`, key).
		Scan(&r.status, &r.attempts, &r.lastError, &dueMs, &r.sent)
	testkit.Must(t, err, "read task %s", key)
	r.dueIn = time.Duration(dueMs * float64(time.Millisecond))
	return r
}

func TestTaskStoreLifecycle(t *testing.T) {
	pool, s := testTasks(t)
	ctx := context.Background()
	a := newTestTask("o-1")
	for i, want := range []bool{true, false} {
		got, err := s.insert(ctx, pool, a)
		testkit.Must(t, err, "insert")
		if got != want {
			t.Fatalf("insert #%d = %v; want %v", i+1, got, want)
		}
	}
	c, ok, err := s.claim(ctx, pool, time.Minute)
	testkit.Must(t, err, "claim")
	if !ok || c.Key != a.Key || c.Attempts != 1 || c.Recipient != a.Recipient || c.CreatedAt.IsZero() {
		t.Fatalf("claim = %+v, %v; want %s at attempt 1", c, ok, a.Key)
	}
	if r := readTask(t, pool, s, a.Key); r.dueIn < 50*time.Second {
		t.Errorf("due in %s after a 1m lease; want about 1m", r.dueIn)
	}
	if _, ok, _ := s.claim(ctx, pool, time.Minute); ok {
		t.Fatal("a leased task was claimed again")
	}
	// A stale fencing token (attempt 0) changes nothing.
	testkit.Must(t, s.failed(ctx, pool, a.Key, 0, 0, "stale"), "failed")
	if r := readTask(t, pool, s, a.Key); r.lastError != nil || r.dueIn < 50*time.Second {
		t.Fatalf("after a stale failure: %+v; want the lease untouched", r)
	}
	testkit.Must(t, s.failed(ctx, pool, a.Key, 1, 0, "connection refused"), "failed")
	r := readTask(t, pool, s, a.Key)
	if r.status != "pending" || r.lastError == nil || *r.lastError != "connection refused" || r.dueIn > time.Second {
		t.Fatalf("after a failure: %+v; want pending, last_error set, due now", r)
	}
	c, ok, err = s.claim(ctx, pool, time.Minute)
	testkit.Must(t, err, "claim")
	if !ok || c.Attempts != 2 {
		t.Fatalf("second claim = %+v, %v; want attempt 2", c, ok)
	}
	testkit.Must(t, s.sent(ctx, pool, a.Key), "sent")
	if r := readTask(t, pool, s, a.Key); r.status != "sent" || !r.sent || r.lastError != nil || r.attempts != 2 {
		t.Fatalf("after sent: %+v; want sent, sent_at set, no last_error, 2 attempts", r)
	}
	testkit.Must(t, s.failed(ctx, pool, a.Key, 2, 0, "late"), "failed")
	if r := readTask(t, pool, s, a.Key); r.status != "sent" || r.lastError != nil {
		t.Fatalf("a late failure touched a sent task: %+v", r)
	}
	if _, ok, _ := s.claim(ctx, pool, 0); ok {
		t.Fatal("a sent task was claimed")
	}
}

// Concurrent senders never claim one task twice within its lease.
func TestTaskClaimsAreExclusive(t *testing.T) {
	pool, s := testTasks(t)
	ctx := context.Background()
	const n = 60
	for i := range n {
		_, err := s.insert(ctx, pool, newTestTask("o-"+string(rune('A'+i%26))+hex.EncodeToString([]byte{byte(i)})))
		testkit.Must(t, err, "insert")
	}
	var mu sync.Mutex
	claims := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				c, ok, err := s.claim(ctx, pool, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claims[c.Key]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claims) != n {
		t.Errorf("tasks claimed = %d; want %d", len(claims), n)
	}
	for k, c := range claims {
		if c != 1 {
			t.Errorf("task %s claimed %d times; want 1", k, c)
		}
	}
}
