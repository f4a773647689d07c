//go:build bench

package latency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// writerConns is the writer's pool size: enough connections that a commit
// waiting on a WAL flush does not hold up the next slots of the schedule.
const writerConns = 16

// lateAfter is how far behind its slot a transaction may start before it
// counts as fallen behind the schedule.
const lateAfter = 5 * time.Millisecond

// aggregates is how many aggregate ids the messages are spread over.
const aggregates = 1000

// ids names the n-th message of a run: a UUID whose first group is random
// per run and whose last group is n, so that the consumer finds a record's
// index from its ce_id header without a lookup table.
type ids struct{ prefix string }

func newIDs() ids {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return ids{prefix: hex.EncodeToString(b[:]) + "-0000-4000-8000-"}
}

func (s ids) id(n int) string { return fmt.Sprintf("%s%012x", s.prefix, n) }

// index is the n of id, or false for an id of another run.
func (s ids) index(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, s.prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 16, 48)
	return int(n), err == nil
}

// writer commits total single-row transactions, transaction n scheduled
// at n/rate seconds after base, from a pool of connections: a transaction
// that cannot start on time (every connection busy) starts as soon as one
// is free and counts as late.
type writer struct {
	pool    *pgxpool.Pool
	insert  string
	payload func(n int) string
	rate    int
	total   int
	base    time.Time
	ids     ids

	// Filled by run, one entry per transaction, as durations since base.
	started   []time.Duration
	committed []time.Duration // when COMMIT returned
}

func newWriter(pool *pgxpool.Pool, table string, rate, total int, base time.Time, ids ids, payload func(n int) string) *writer {
	return &writer{
		pool: pool, payload: payload,
		// Autocommit: the INSERT is the whole transaction, so Exec returns
		// when its COMMIT does, in one round trip.
		insert: "INSERT INTO " + table + " (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload) VALUES ($1, 'bench', $2, $3, 'bench.tick.v1', $4)",
		rate:   rate, total: total, base: base, ids: ids,
		started:   make([]time.Duration, total),
		committed: make([]time.Duration, total),
	}
}

// slot is when transaction n is due, since base.
func (w *writer) slot(n int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(w.rate))
}

// run issues every transaction on schedule and returns when all committed.
func (w *writer) run(ctx context.Context) error {
	due := make(chan int, w.total) // never blocks the schedule
	g, ctx := errgroup.WithContext(ctx)
	for range writerConns {
		g.Go(func() error { return w.work(ctx, due) })
	}
	g.Go(func() error {
		defer close(due)
		return w.schedule(ctx, due)
	})
	return g.Wait()
}

// schedule hands out each transaction at its slot. It sleeps until the
// next slot and then releases every slot that is due, so an oversleep
// delays transactions but never drops or bunches the schedule's total.
func (w *writer) schedule(ctx context.Context, due chan<- int) error {
	for n := 0; n < w.total; {
		if wait := w.slot(n) - time.Since(w.base); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		now := time.Since(w.base)
		for ; n < w.total && w.slot(n) <= now; n++ {
			due <- n
		}
	}
	return nil
}

func (w *writer) work(ctx context.Context, due <-chan int) error {
	for n := range due {
		w.started[n] = time.Since(w.base)
		if _, err := w.pool.Exec(ctx, w.insert, w.ids.id(n), "agg-"+strconv.Itoa(n%aggregates), n/aggregates+1, w.payload(n)); err != nil {
			return fmt.Errorf("commit transaction %d: %w", n, err)
		}
		w.committed[n] = time.Since(w.base)
	}
	return nil
}

// payload is a JSON document of about 200 bytes.
func payload(n int) string {
	return fmt.Sprintf(`{"order_id": "ord-%09d", "customer": "cust-%06d", "status": "submitted", "currency": "EUR", "amount": %d.%02d, "lines": 3, "note": "steady-load latency benchmark payload padding", "channel": "web"}`,
		n, n%aggregates, 10+n%990, n%100)
}

// pace summarises how well the writer kept to its schedule for the
// transactions due in [from, to).
type pace struct {
	commits  int           // transactions due in the window
	achieved float64       // commits per second of the window, counted by COMMIT return
	late     int           // transactions that started more than lateAfter behind their slot
	maxLate  time.Duration // the worst start behind its slot
}

func (w *writer) pace(from, to time.Duration) pace {
	var p pace
	returned := 0
	for n := range w.total {
		if c := w.committed[n]; c >= from && c < to {
			returned++
		}
		if s := w.slot(n); s < from || s >= to {
			continue
		}
		p.commits++
		behind := w.started[n] - w.slot(n)
		if behind > lateAfter {
			p.late++
		}
		p.maxLate = max(p.maxLate, behind)
	}
	p.achieved = float64(returned) / (to - from).Seconds()
	return p
}
