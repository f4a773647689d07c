package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// fixture is one test's own dead-letter table, dropped in t.Cleanup.
type fixture struct {
	t     *testing.T
	db    *pgxpool.Pool
	table schema.Table
	store *dlq.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := pgtest.New(t, "outbox_dlq_")
	cfg := schema.DefaultConfig()
	cfg.Table.Name = pg.Name
	f := &fixture{t: t, db: pg.Pool, table: cfg.DeadLetterTable()}
	pg.DropTable(f.table.Quoted())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := slot.EnsureDeadLetterTable(ctx, f.db, cfg); err != nil {
		t.Fatal(err)
	}
	if err := slot.EnsureDeadLetterTable(ctx, f.db, cfg); err != nil {
		t.Fatalf("EnsureTable a second time: got %v; want nil", err)
	}
	var err error
	if f.store, err = dlq.New(f.db, f.table); err != nil {
		t.Fatal(err)
	}
	return f
}

// pos is the n-th position of the test's WAL: three rows per transaction.
func pos(n int) schema.Position {
	return schema.Position{CommitLSN: pglogrepl.LSN(0x1000000 + uint64(n/3)*0x100), Seq: uint32(n % 3)}
}

// id is a message id made from n.
func id(n int) schema.MessageID {
	return schema.MessageID(fmt.Sprintf("%04x0000-0000-4000-8000-000000000011", n&0xffff))
}

// message is the n-th message, of aggregate agg ("type/id").
func message(n int, agg schema.Aggregate) *schema.Message {
	p := pos(n)
	return &schema.Message{
		ID:               id(n),
		AggregateType:    agg.Type,
		AggregateID:      agg.ID,
		AggregateVersion: int64(n),
		HasVersion:       true,
		Type:             agg.Type + ".changed.v1",
		Payload:          []byte(fmt.Sprintf(`{"n": %d}`, n)),
		ContentType:      "application/json",
		Headers:          []schema.Header{{Key: "correlation_id", Value: fmt.Sprintf("c-%d", n)}, {Key: "traceparent", Value: "00-abc-def-01"}},
		OccurredAt:       time.Date(2025, 3, 4, 5, 6, 7, 8000*n, time.UTC),
		CommitLSN:        p.CommitLSN,
		CommitTime:       time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC),
		Seq:              p.Seq,
	}
}

// parked is a dead letter for the n-th message, which Kafka refused.
func parked(n int, agg schema.Aggregate) schema.DeadLetter {
	m := message(n, agg)
	return schema.DeadLetter{
		Position:   m.Position(),
		Message:    m,
		Aggregate:  agg,
		Topic:      "outbox." + agg.Type,
		CommitTime: m.CommitTime,
		Reason:     "kafka refused the record: MESSAGE_TOO_LARGE",
	}
}

// behind is the n-th message, parked behind blocker.
func behind(n int, agg schema.Aggregate, blocker int) schema.DeadLetter {
	dl := parked(n, agg)
	bid := id(blocker)
	dl.BlockedBy = &schema.Blocker{Aggregate: agg, Position: pos(blocker), MessageID: &bid}
	dl.Reason = "blocked by " + bid.String()
	return dl
}

// undecodable is the n-th row, which could not be decoded.
func undecodable(n int, agg schema.Aggregate) schema.DeadLetter {
	payload := "{not json"
	return schema.DeadLetter{
		Position:  pos(n),
		Row:       map[string]*string{"aggregate_id": &agg.ID, "payload": &payload, "topic": nil},
		Aggregate: agg,
		Reason:    `column "payload": not valid json`,
	}
}

func (f *fixture) park(dls ...schema.DeadLetter) {
	f.t.Helper()
	for _, dl := range dls {
		ok, err := f.store.Park(context.Background(), dl)
		if err != nil || !ok {
			f.t.Fatalf("Park(%s) = %v, %v; want true, nil", dl.Position, ok, err)
		}
	}
}

// count is the number of rows of the table with the given status.
func (f *fixture) count(status string) int {
	f.t.Helper()
	var n int
	if err := f.db.QueryRow(context.Background(), "SELECT count(*) FROM "+f.table.Quoted()+" WHERE status = $1", status).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// positions lists the positions of es.
func positions(es []dlq.Entry) []schema.Position {
	out := make([]schema.Position, len(es))
	for i, e := range es {
		out[i] = e.Position
	}
	return out
}

// fakePublisher is a Publisher whose behaviour the test sets.
type fakePublisher struct {
	publish func(ctx context.Context, msgs []*schema.Message) ([]bool, error)
	got     [][]*schema.Message
}

func (p *fakePublisher) Publish(ctx context.Context, msgs []*schema.Message) ([]bool, error) {
	p.got = append(p.got, msgs)
	if p.publish != nil {
		return p.publish(ctx, msgs)
	}
	return allAcked(msgs), nil
}

func allAcked(msgs []*schema.Message) []bool {
	acked := make([]bool, len(msgs))
	for i := range acked {
		acked[i] = true
	}
	return acked
}

// Both a pool (the relay) and a connection (a CLI verb) serve as DB.
var (
	_ dlq.DB = (*pgxpool.Pool)(nil)
	_ dlq.DB = (*pgx.Conn)(nil)
)
