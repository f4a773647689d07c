package idempotency_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/idempotency"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
)

// fixture is one test's own keys table and orders table (the business
// effect), dropped in t.Cleanup.
type fixture struct {
	t      *testing.T
	db     *pgxpool.Pool
	store  *idempotency.Store
	keys   string // quoted keys table
	orders string // quoted orders table
	runs   atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pg := pgtest.New(t, "", func(c *pgxpool.Config) {
		c.MaxConns = 24 // the concurrency test's 20 callers each hold one
	})
	db := pg.Pool
	table := schema.Table{Schema: "public", Name: "idem_" + pg.Name}
	f := &fixture{t: t, db: db, keys: table.Quoted(), orders: schema.QuoteIdentifier("idem_orders_" + pg.Name)}
	pg.DropTable(f.keys, f.orders)
	var err error
	f.store, err = idempotency.New(idempotency.Config{Table: table})
	testkit.Must(t, err, "new store")
	for i := 0; i < 2; i++ {
		_, err := db.Exec(ctx, f.store.DDL())
		testkit.Must(t, err, "apply DDL (time %d)", i+1)
	}
	_, err = db.Exec(ctx, "CREATE TABLE "+f.orders+" (id text PRIMARY KEY)")
	testkit.Must(t, err, "create orders table")
	return f
}

// submit is the command: it creates order id and answers with it.
func (f *fixture) submit(id string) func(context.Context, pgx.Tx) ([]byte, error) {
	return func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
		f.runs.Add(1)
		if _, err := tx.Exec(ctx, "INSERT INTO "+f.orders+" (id) VALUES ($1)", id); err != nil {
			return nil, err
		}
		return []byte(`{"order":"` + id + `"}`), nil
	}
}

func (f *fixture) count(table string) int {
	f.t.Helper()
	var n int
	testkit.Must(f.t, f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n), "count %s", table)
	return n
}

func fingerprint(body string) []byte {
	h := sha256.Sum256([]byte(body))
	return h[:]
}

func TestFirstCallRunsAndARetryReplays(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fp := fingerprint(`{"sku":"a","qty":1}`)
	resp, replayed, err := f.store.Do(ctx, f.db, "key-1", fp, f.submit("o-1"))
	if err != nil || replayed || string(resp) != `{"order":"o-1"}` {
		t.Fatalf("first Do: got %q, replayed %v, %v; want the order, false, nil", resp, replayed, err)
	}
	// The retry would create another order if it ran.
	resp, replayed, err = f.store.Do(ctx, f.db, "key-1", fp, f.submit("o-2"))
	if err != nil || !replayed || string(resp) != `{"order":"o-1"}` {
		t.Fatalf("retry: got %q, replayed %v, %v; want the first response, true, nil", resp, replayed, err)
	}
	if got := f.runs.Load(); got != 1 {
		t.Errorf("the command ran %d times; want 1", got)
	}
	if got := f.count(f.orders); got != 1 {
		t.Errorf("%d orders; want 1", got)
	}
	// Another key is another command.
	if _, replayed, err := f.store.Do(ctx, f.db, "key-2", fp, f.submit("o-3")); err != nil || replayed {
		t.Fatalf("Do with another key: replayed %v, %v; want false, nil", replayed, err)
	}
	if got := f.count(f.orders); got != 2 {
		t.Errorf("%d orders; want 2", got)
	}
}

func TestAKeyReusedForAnotherRequestIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, _, err := f.store.Do(ctx, f.db, "key-1", fingerprint("body one"), f.submit("o-1"))
	testkit.Must(t, err, "first Do")
	resp, replayed, err := f.store.Do(ctx, f.db, "key-1", fingerprint("body two"), f.submit("o-2"))
	if !errors.Is(err, idempotency.ErrKeyReused) || resp != nil || replayed {
		t.Fatalf("Do with another fingerprint: got %q, %v, %v; want nil, false, ErrKeyReused", resp, replayed, err)
	}
	if got := f.runs.Load(); got != 1 {
		t.Errorf("the command ran %d times; want 1", got)
	}
}

func TestAFailedCommandRollsBackAndARetryRunsIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	boom := errors.New("payment declined")
	fail := func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
		if _, err := f.submit("o-1")(ctx, tx); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("charge: %w", boom)
	}
	_, replayed, err := f.store.Do(ctx, f.db, "key-1", nil, fail)
	if !errors.Is(err, boom) || replayed {
		t.Fatalf("failing Do: replayed %v, %v; want false and the command's error", replayed, err)
	}
	if keys, orders := f.count(f.keys), f.count(f.orders); keys != 0 || orders != 0 {
		t.Fatalf("after the failure: %d keys, %d orders; want 0, 0", keys, orders)
	}
	resp, replayed, err := f.store.Do(ctx, f.db, "key-1", nil, f.submit("o-1"))
	if err != nil || replayed || string(resp) != `{"order":"o-1"}` {
		t.Fatalf("retry: got %q, replayed %v, %v; want the order, false, nil", resp, replayed, err)
	}
	if keys, orders, runs := f.count(f.keys), f.count(f.orders), f.runs.Load(); keys != 1 || orders != 1 || runs != 2 {
		t.Fatalf("after the retry: %d keys, %d orders, %d runs; want 1, 1, 2", keys, orders, runs)
	}
}

// result is what one concurrent caller got.
type result struct {
	resp     string
	replayed bool
	err      error
}

// race runs n callers of Do with the same key at once.
func (f *fixture) race(n int, fn func(int) func(context.Context, pgx.Tx) ([]byte, error)) []result {
	out := make([]result, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := 0; i < n; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			resp, replayed, err := f.store.Do(context.Background(), f.db, "same-key", fingerprint("b"), fn(i))
			out[i] = result{string(resp), replayed, err}
		}()
	}
	start.Done()
	done.Wait()
	return out
}

func TestConcurrentCallsWithOneKeyRunTheCommandOnce(t *testing.T) {
	f := newFixture(t)
	results := f.race(20, func(i int) func(context.Context, pgx.Tx) ([]byte, error) {
		return func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
			time.Sleep(100 * time.Millisecond) // the others arrive meanwhile
			return f.submit(fmt.Sprintf("o-%d", i))(ctx, tx)
		}
	})
	first := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("caller %d: %v", i, r.err)
		}
		if r.resp != results[0].resp {
			t.Errorf("caller %d got %q; caller 0 got %q", i, r.resp, results[0].resp)
		}
		if !r.replayed {
			first++
		}
	}
	if first != 1 {
		t.Errorf("%d callers ran the command; want 1", first)
	}
	if runs, orders := f.runs.Load(), f.count(f.orders); runs != 1 || orders != 1 {
		t.Errorf("%d runs, %d orders; want 1, 1", runs, orders)
	}
}

// The first caller fails while the others wait on its key: one of them
// claims the key and runs the command, the rest replay its response.
func TestWhenTheFirstCallFailsAWaitingOneRuns(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int64
	boom := errors.New("boom")
	results := f.race(10, func(i int) func(context.Context, pgx.Tx) ([]byte, error) {
		return func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
			time.Sleep(100 * time.Millisecond)
			if calls.Add(1) == 1 {
				return nil, boom
			}
			return f.submit(fmt.Sprintf("o-%d", i))(ctx, tx)
		}
	})
	var failed, ran, replayed int
	var resp string
	for i, r := range results {
		switch {
		case errors.Is(r.err, boom):
			failed++
		case r.err != nil:
			t.Fatalf("caller %d: %v", i, r.err)
		case r.replayed:
			replayed++
		default:
			ran++
			resp = r.resp
		}
	}
	if failed != 1 || ran != 1 || replayed != 8 {
		t.Fatalf("%d failed, %d ran, %d replayed; want 1, 1, 8", failed, ran, replayed)
	}
	for i, r := range results {
		if r.err == nil && r.resp != resp {
			t.Errorf("caller %d got %q; want %q", i, r.resp, resp)
		}
	}
	if calls, orders := calls.Load(), f.count(f.orders); calls != 2 || orders != 1 {
		t.Errorf("%d calls of the command, %d orders; want 2, 1", calls, orders)
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, key := range []string{"", strings.Repeat("k", idempotency.MaxKeyBytes+1), "k\xff", "k\x00"} {
		_, _, err := f.store.Do(ctx, f.db, key, nil, f.submit("o-"+key))
		if !errors.Is(err, idempotency.ErrInvalidKey) {
			t.Errorf("Do with key %q: got %v; want ErrInvalidKey", key, err)
		}
	}
	if got := f.runs.Load(); got != 0 {
		t.Errorf("the command ran %d times; want 0", got)
	}
	_, _, err := f.store.Do(ctx, f.db, strings.Repeat("k", idempotency.MaxKeyBytes), nil, f.submit("o-1"))
	testkit.Must(t, err, "Do with a key of %d bytes", idempotency.MaxKeyBytes)
}

func TestNewValidatesTheTable(t *testing.T) {
	for _, tb := range []schema.Table{
		{Schema: "public", Name: "keys\x00"},
		{Schema: strings.Repeat("s", 64), Name: "keys"},
		{Schema: "public", Name: strings.Repeat("k", 60)}, // its index name would be too long
	} {
		if _, err := idempotency.New(idempotency.Config{Table: tb}); err == nil {
			t.Errorf("New with table %+v: got nil error; want one", tb)
		}
	}
	s, err := idempotency.New(idempotency.Config{})
	testkit.Must(t, err, "New with defaults")
	ddl := s.DDL()
	for _, want := range []string{`CREATE TABLE IF NOT EXISTS "public"."idempotency_keys"`,
		`CREATE INDEX IF NOT EXISTS "idempotency_keys_created_at" ON "public"."idempotency_keys" (created_at)`} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %s:\n%s", want, ddl)
		}
	}
}
