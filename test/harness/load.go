package harness

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// load describes what the writers commit.
type Load struct {
	Writers             int           // concurrent writers, each with its own aggregates
	Rows                int           // rows in all
	MaxTxRows           int           // each transaction holds 1 to MaxTxRows rows
	AggregatesPerWriter int           // aggregates each writer cycles through
	Types               []string      // aggregate types (topics)
	Pause               time.Duration // each writer waits this long between transactions
}

// outboxRow is one row a writer inserts.
type outboxRow struct {
	id, aggregateType, aggregateID, typ string
	version                             int64
	payload                             string
	headers                             *string
	topic                               *string
}

var outboxColumns = []string{"message_id", "aggregate_type", "aggregate_id", "aggregate_version", "type", "payload", "headers", "topic"}

func NewUUID() string {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// writer is one concurrent application session: it owns its aggregates,
// so the versions it assigns are in commit order.
type writer struct {
	f        *Fixture
	n        int
	l        Load
	rng      *rand.Rand
	versions map[string]int64
	serial   int
	round    int // the fixture's write call: aggregates are new in each
}

// write commits l.Rows rows and returns how many were committed.
func (f *Fixture) Write(ctx context.Context, l Load) (int, error) {
	f.rounds++
	per := l.Rows / l.Writers
	var mu sync.Mutex
	total := 0
	g, ctx := errgroup.WithContext(ctx)
	for w := 0; w < l.Writers; w++ {
		rows := per
		if w == 0 {
			rows += l.Rows - per*l.Writers
		}
		wr := &writer{f: f, n: w, l: l, rng: rand.New(rand.NewPCG(uint64(w), uint64(f.rounds))), versions: map[string]int64{}, round: f.rounds}
		g.Go(func() error {
			n, err := wr.run(ctx, rows)
			mu.Lock()
			total += n
			mu.Unlock()
			return err
		})
	}
	err := g.Wait()
	return total, err
}

// LoadUntil writes rounds of l until ctx ends, in the background; a round
// that fails (the server went away, say) is cut, not retried, and the next
// starts 100 ms later. wait returns the rounds written and how many of them
// failed.
func (f *Fixture) LoadUntil(ctx context.Context, l Load) (wait func() (rounds, failed int)) {
	var wg sync.WaitGroup
	var rounds, failed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rounds++
			if _, err := f.Write(ctx, l); err != nil {
				failed++
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return func() (int, int) { wg.Wait(); return rounds, failed }
}

func (w *writer) run(ctx context.Context, rows int) (int, error) {
	done := 0
	for tx := 0; done < rows; tx++ {
		size := min(1+w.rng.IntN(w.l.MaxTxRows), rows-done)
		batch := make([]outboxRow, size)
		for i := range batch {
			batch[i] = w.next()
		}
		if err := w.commit(ctx, tx%3, batch); err != nil {
			return done, err
		}
		done += size
		if w.l.Pause > 0 {
			time.Sleep(w.l.Pause)
		}
	}
	return done, nil
}

func (w *writer) next() outboxRow {
	w.serial++
	k := w.rng.IntN(w.l.AggregatesPerWriter)
	agg := fmt.Sprintf("r%d-w%d-a%d", w.round, w.n, k)
	w.versions[agg]++
	r := outboxRow{
		id:            NewUUID(),
		aggregateType: w.l.Types[k%len(w.l.Types)],
		aggregateID:   agg,
		typ:           "order.submitted.v1",
		version:       w.versions[agg],
		payload:       fmt.Sprintf(`{"writer": %d, "serial": %d, "note": "ünïcödé ✓ \"quoted\"", "amount": 12.50}`, w.n, w.serial),
	}
	if w.serial%2 == 0 {
		h := fmt.Sprintf(`{"traceparent": "00-%032x-%016x-01", "attempt": 1}`, w.serial, w.n+1)
		r.headers = &h
	}
	if w.serial%97 == 0 {
		// An explicit topic; the aggregate's other rows go to the template's
		// topic, so only version order within each topic can be checked:
		// keep this aggregate out of the ordering check by giving it its own id.
		t := w.f.TopicPrefix + ".special"
		r.topic = &t
		w.versions[agg]--
		r.aggregateID = fmt.Sprintf("r%d-w%d-special-%d", w.round, w.n, w.serial)
		r.version = 1
	}
	return r
}

// commit writes one transaction in one of three ways: row by row, one
// multi-row INSERT, or COPY.
func (w *writer) commit(ctx context.Context, mode int, rows []outboxRow) error {
	return pgx.BeginFunc(ctx, w.f.DB, func(tx pgx.Tx) error {
		switch mode {
		case 0:
			for _, r := range rows {
				_, err := tx.Exec(ctx, "INSERT INTO "+w.f.Table+" ("+strings.Join(outboxColumns, ", ")+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
					r.id, r.aggregateType, r.aggregateID, r.version, r.typ, r.payload, r.headers, r.topic)
				if err != nil {
					return err
				}
			}
			return nil
		case 1:
			var sb strings.Builder
			args := make([]any, 0, len(rows)*len(outboxColumns))
			sb.WriteString("INSERT INTO " + w.f.Table + " (" + strings.Join(outboxColumns, ", ") + ") VALUES ")
			for i, r := range rows {
				if i > 0 {
					sb.WriteString(", ")
				}
				b := i * len(outboxColumns)
				fmt.Fprintf(&sb, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", b+1, b+2, b+3, b+4, b+5, b+6, b+7, b+8)
				args = append(args, r.id, r.aggregateType, r.aggregateID, r.version, r.typ, r.payload, r.headers, r.topic)
			}
			_, err := tx.Exec(ctx, sb.String(), args...)
			return err
		default:
			src := make([][]any, len(rows))
			for i, r := range rows {
				var headers any
				if r.headers != nil {
					headers = json.RawMessage(*r.headers)
				}
				src[i] = []any{r.id, r.aggregateType, r.aggregateID, r.version, r.typ, json.RawMessage(r.payload), headers, r.topic}
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{w.f.Table}, outboxColumns, pgx.CopyFromRows(src))
			return err
		}
	})
}

// assertClean fails the test on any loss, mismatch or ordering problem and
// on more duplicates than maxDuplicates.
func AssertClean(t *testing.T, rep Report, maxDuplicates int) {
	t.Helper()
	t.Logf("verifier: %s", rep)
	show := func(what string, items []string) {
		if len(items) > 0 {
			t.Errorf("%s: %d, first: %s", what, len(items), strings.Join(items[:min(5, len(items))], " | "))
		}
	}
	show("lost (committed, not in Kafka)", rep.Lost)
	show("records walrelay should not have published", rep.Unexpected)
	show("records that differ from their row", rep.Mismatches)
	show("aggregates out of commit order", rep.OutOfOrder)
	show("aggregates split across partitions", rep.SplitAggregates)
	if rep.Duplicates > maxDuplicates {
		t.Errorf("duplicates = %d; want at most %d", rep.Duplicates, maxDuplicates)
	}
	if rep.Expected == 0 {
		t.Errorf("verifier expected no rows: the test wrote nothing")
	}
}
