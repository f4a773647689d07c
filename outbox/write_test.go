package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
)

// table is one test's own outbox table and publication, made with
// schema.DDL and dropped in t.Cleanup.
type table struct {
	db   *pgxpool.Pool
	cfg  schema.Config
	cols [schema.NumFields]string // quoted column names, by schema.Field
}

func newTable(t *testing.T, cols schema.Columns) *table {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pg := pgtest.New(t, "")
	db := pg.Pool
	cfg := schema.DefaultConfig()
	cfg.Table.Name = "outbox_w_" + pg.Name
	cfg.Publication = "pub_w_" + pg.Name
	cfg.Columns = cols
	pg.DropPublication(cfg.Publication)
	pg.DropTable(cfg.Table.Quoted(), cfg.DeadLetterTable().Quoted(), cfg.RecoveryTable().Quoted())
	ddl, err := schema.DDL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		t.Fatalf("create outbox table: %v", err)
	}
	tb := &table{db: db, cfg: cfg}
	for f, n := range cols.Names() {
		tb.cols[f] = schema.QuoteIdentifier(n)
	}
	return tb
}

func (tb *table) writer(t *testing.T) *outbox.Writer {
	t.Helper()
	w, err := outbox.New(outbox.Config{Table: tb.cfg.Table, Columns: tb.cfg.Columns})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// storedRow is an outbox row as read back, in text form.
type storedRow struct {
	ID, AggregateType, AggregateID string
	Version                        *int64
	Type, Payload                  string
	Headers                        map[string]string
	OccurredAt                     time.Time
	Topic                          *string
}

// rows reads the rows q (the pool or a transaction) sees, by message id.
func (tb *table) rows(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) map[string]storedRow {
	t.Helper()
	c := tb.cols
	rows, err := q.Query(context.Background(), fmt.Sprintf(`SELECT %s::text, %s, %s, %s, %s, %s::text, %s::text, %s, %s FROM %s`,
		c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], tb.cfg.Table.Quoted()))
	testkit.Must(t, err, "read outbox")
	defer rows.Close()
	out := map[string]storedRow{}
	for rows.Next() {
		var r storedRow
		var headers *string
		testkit.Must(t, rows.Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.Version, &r.Type, &r.Payload, &headers, &r.OccurredAt, &r.Topic), "scan")
		if headers != nil {
			testkit.Must(t, json.Unmarshal([]byte(*headers), &r.Headers), "headers %s", *headers)
		}
		out[r.ID] = r
	}
	testkit.Must(t, rows.Err(), "read outbox")
	return out
}

type order struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

func TestWriteInsertsRowsInTheCallersTransaction(t *testing.T) {
	tb := newTable(t, schema.DefaultColumns())
	w := tb.writer(t)
	ctx := outbox.WithCorrelationID(outbox.WithTraceparent(context.Background(), traceparent), "req-1")
	occurred := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	fixedID := outbox.NewID()
	msgs := []*outbox.Message{
		{AggregateType: "order", AggregateID: "o-1", Type: "order.submitted.v1", Payload: order{"o-1", 4250}},
		{ID: fixedID, AggregateType: "order", AggregateID: "o-1", AggregateVersion: 2, HasVersion: true,
			Type: "order.paid.v1", Payload: json.RawMessage(`{"paid":true}`), OccurredAt: occurred,
			Topic: "payments", Headers: map[string]string{"tenant": "t1", schema.HeaderCorrelationID: "mine"}},
		{AggregateType: "customer", AggregateID: "c-9", Type: "customer.seen.v1", Payload: []byte(`[1, "x"]`)},
	}
	tx, err := tb.db.Begin(ctx)
	testkit.Must(t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	testkit.Must(t, w.Write(ctx, tx, msgs...), "write")
	if msgs[1].ID != fixedID || msgs[0].ID == "" || msgs[2].ID == "" || msgs[0].ID == msgs[2].ID {
		t.Fatalf("ids after Write: %s, %s, %s; want two new distinct ids and %s kept", msgs[0].ID, msgs[1].ID, msgs[2].ID, fixedID)
	}
	if got := len(tb.rows(t, tx)); got != 3 {
		t.Fatalf("the transaction sees %d rows; want 3", got)
	}
	if got := len(tb.rows(t, tb.db)); got != 0 {
		t.Fatalf("another session sees %d rows before commit; want 0", got)
	}
	var txNow time.Time
	testkit.Must(t, tx.QueryRow(ctx, "SELECT now()").Scan(&txNow), "now")
	testkit.Must(t, tx.Commit(ctx), "commit")

	rows := tb.rows(t, tb.db)
	if len(rows) != 3 {
		t.Fatalf("%d rows after commit; want 3", len(rows))
	}
	r0, r1, r2 := rows[msgs[0].ID.String()], rows[fixedID.String()], rows[msgs[2].ID.String()]
	ctxHeaders := map[string]string{schema.HeaderTraceparent: traceparent, schema.HeaderCorrelationID: "req-1"}
	checkRow(t, r0, storedRow{ID: msgs[0].ID.String(), AggregateType: "order", AggregateID: "o-1", Type: "order.submitted.v1",
		Payload: `{"id": "o-1", "cents": 4250}`, Headers: ctxHeaders, OccurredAt: txNow})
	v2, topic := int64(2), "payments"
	checkRow(t, r1, storedRow{ID: fixedID.String(), AggregateType: "order", AggregateID: "o-1", Version: &v2, Type: "order.paid.v1",
		Payload: `{"paid": true}`, OccurredAt: occurred, Topic: &topic,
		Headers: map[string]string{schema.HeaderTraceparent: traceparent, schema.HeaderCorrelationID: "mine", "tenant": "t1"}})
	checkRow(t, r2, storedRow{ID: msgs[2].ID.String(), AggregateType: "customer", AggregateID: "c-9", Type: "customer.seen.v1",
		Payload: `[1, "x"]`, Headers: ctxHeaders, OccurredAt: txNow})
}

// show is r as JSON, for comparing and printing.
func show(t *testing.T, r storedRow) string {
	t.Helper()
	b, err := json.Marshal(r)
	testkit.Must(t, err, "show row")
	return string(b)
}

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func checkRow(t *testing.T, got, want storedRow) {
	t.Helper()
	if !got.OccurredAt.Equal(want.OccurredAt) {
		t.Errorf("occurred_at %s; want %s", got.OccurredAt, want.OccurredAt)
	}
	got.OccurredAt, want.OccurredAt = time.Time{}, time.Time{}
	if g, w := show(t, got), show(t, want); g != w {
		t.Errorf("row\n got %s\nwant %s", g, w)
	}
}

func TestRollbackLeavesNoRow(t *testing.T) {
	tb := newTable(t, schema.DefaultColumns())
	w := tb.writer(t)
	ctx := context.Background()
	tx, err := tb.db.Begin(ctx)
	testkit.Must(t, err, "begin")
	msg := &outbox.Message{AggregateType: "order", AggregateID: "o-1", Type: "order.submitted.v1", Payload: order{"o-1", 1}}
	testkit.Must(t, w.Write(ctx, tx, msg), "write")
	testkit.Must(t, tx.Rollback(ctx), "rollback")
	if got := len(tb.rows(t, tb.db)); got != 0 {
		t.Fatalf("%d rows after rollback; want 0", got)
	}
}

func TestABadMessageAmongGoodOnesWritesNothing(t *testing.T) {
	tb := newTable(t, schema.DefaultColumns())
	w := tb.writer(t)
	ctx := context.Background()
	tx, err := tb.db.Begin(ctx)
	testkit.Must(t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	msgs := []*outbox.Message{
		{AggregateType: "order", AggregateID: "o-1", Type: "order.submitted.v1", Payload: order{"o-1", 1}},
		{AggregateType: "order", AggregateID: "", Type: "order.submitted.v1", Payload: order{"o-2", 1}},
		{AggregateType: "order", AggregateID: "o-3", Type: "order.submitted.v1", Payload: order{"o-3", 1}},
	}
	err = w.Write(ctx, tx, msgs...)
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != outbox.FieldAggregateID {
		t.Fatalf("Write: got %v; want a ValidationError for message 1's AggregateID", err)
	}
	// Nothing was sent: the transaction is still usable and holds no row.
	if got := len(tb.rows(t, tx)); got != 0 {
		t.Fatalf("the transaction holds %d rows after a refused Write; want 0", got)
	}
	testkit.Must(t, tx.Commit(ctx), "commit")
	if got := len(tb.rows(t, tb.db)); got != 0 {
		t.Fatalf("%d rows committed after a refused Write; want 0", got)
	}
}

func TestCustomColumnNames(t *testing.T) {
	testColumnNames(t, schema.Columns{MessageID: "id", AggregateType: "kind", AggregateID: "Key", AggregateVersion: "ver",
		Type: "event_type", Payload: "body", Headers: "meta", OccurredAt: "at", Topic: "dest"})
}

// Column names that would end an identifier, a literal, a dollar-quoted
// body or a comment, were they pasted bare: the DDL makes them, Write
// writes through them, and the table of the same name as the injection's
// target is still there.
func TestHostileColumnNames(t *testing.T) {
	ctx := context.Background()
	canary := pgtest.New(t, "canary_")
	canary.DropTable(canary.Name)
	_, err := canary.Pool.Exec(ctx, "CREATE TABLE "+canary.Name+" (id int)")
	testkit.Must(t, err, "create the canary table")
	drop := `; DROP TABLE ` + canary.Name + `; --`
	testColumnNames(t, schema.Columns{MessageID: `id"` + drop, AggregateType: "Aggregate Type", AggregateID: `key')` + drop,
		AggregateVersion: "ver$walrelay$" + drop, Type: "event\ntype" + drop, Payload: `bo\dy'` + drop, Headers: "meta;x",
		OccurredAt: "Occurred At", Topic: `"`})
	var exists bool
	testkit.Must(t, canary.Pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", canary.Name).Scan(&exists), "look up the canary")
	if !exists {
		t.Errorf("the canary table %s is gone: a column name reached the server as SQL", canary.Name)
	}
}

// testColumnNames writes one message into a table with columns cols and
// reads it back.
func testColumnNames(t *testing.T, cols schema.Columns) {
	t.Helper()
	tb := newTable(t, cols)
	w := tb.writer(t)
	ctx := context.Background()
	tx, err := tb.db.Begin(ctx)
	testkit.Must(t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	msg := &outbox.Message{AggregateType: "order", AggregateID: "o-7", AggregateVersion: 7, HasVersion: true,
		Type: "order.shipped.v1", Payload: map[string]string{"carrier": "ups"}, Topic: "shipping",
		Headers: map[string]string{"tenant": "t2"}}
	testkit.Must(t, w.Write(ctx, tx, msg), "write")
	var txNow time.Time
	testkit.Must(t, tx.QueryRow(ctx, "SELECT now()").Scan(&txNow), "now")
	testkit.Must(t, tx.Commit(ctx), "commit")
	rows := tb.rows(t, tb.db)
	v, topic := int64(7), "shipping"
	checkRow(t, rows[msg.ID.String()], storedRow{ID: msg.ID.String(), AggregateType: "order", AggregateID: "o-7", Version: &v,
		Type: "order.shipped.v1", Payload: `{"carrier": "ups"}`, Headers: map[string]string{"tenant": "t2"},
		OccurredAt: txNow, Topic: &topic})
}

// The limit counts what the relay will read: the jsonb column's text form,
// or the payload's own bytes when they are longer (raw JSON with
// whitespace: a json, text or bytea column would keep it).
func TestPayloadLimitCountsWhatPostgreSQLStores(t *testing.T) {
	tb := newTable(t, schema.DefaultColumns())
	ctx := context.Background()
	pretty := "{\n  \"a\" : [ 1 , 2 ],\n  \"b\": {}\n}"
	payloads := []struct {
		p      any
		ownLen int // counted when longer than the stored text
	}{
		{map[string]any{"items": []int{1, 2, 3}, "note": "a, b: c", "nested": map[string]bool{"x": true}}, 0},
		{strings.Repeat("é", 100), 0},
		{json.RawMessage(`[{"k":"v"},{"k":["<&>"]}]`), 0},
		{json.RawMessage(pretty), len(pretty)},
	}
	for i, c := range payloads {
		msg := &outbox.Message{AggregateType: "t", AggregateID: "a", Type: "t.v1", Payload: c.p}
		tx, err := tb.db.Begin(ctx)
		testkit.Must(t, err, "begin")
		testkit.Must(t, tb.writer(t).Write(ctx, tx, msg), "write payload %d", i)
		var stored int
		testkit.Must(t, tx.QueryRow(ctx, "SELECT octet_length(payload::text) FROM "+tb.cfg.Table.Quoted()+" WHERE message_id = $1",
			msg.ID.String()).Scan(&stored), "size")
		testkit.Must(t, tx.Rollback(ctx), "rollback")
		counted := max(stored, c.ownLen)
		for _, l := range []struct {
			limit int
			ok    bool
		}{{counted, true}, {counted - 1, false}} {
			w, err := outbox.New(outbox.Config{Table: tb.cfg.Table, MaxPayloadBytes: l.limit})
			testkit.Must(t, err, "new")
			tx, err := tb.db.Begin(ctx)
			testkit.Must(t, err, "begin")
			err = w.Write(ctx, tx, &outbox.Message{AggregateType: "t", AggregateID: "a", Type: "t.v1", Payload: c.p})
			testkit.Must(t, tx.Rollback(ctx), "rollback")
			if (err == nil) != l.ok {
				t.Errorf("payload %d (%d bytes stored, %d counted) under a limit of %d: got %v; want ok %v", i, stored, counted, l.limit, err, l.ok)
			}
		}
	}
}

// More messages than fit the parameters of one statement, from writers
// sharing one Writer.
func TestManyMessagesAndConcurrentWriters(t *testing.T) {
	tb := newTable(t, schema.DefaultColumns())
	w := tb.writer(t)
	ctx := context.Background()
	const writers, each = 3, 3000 // 9,000 rows; one statement takes at most 7,281
	errs := make(chan error, writers)
	for g := 0; g < writers; g++ {
		go func() {
			msgs := make([]*outbox.Message, each)
			for i := range msgs {
				msgs[i] = &outbox.Message{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d-%d", g, i), Type: "t.v1", Payload: i}
			}
			errs <- pgx.BeginFunc(ctx, tb.db, func(tx pgx.Tx) error { return w.Write(ctx, tx, msgs...) })
		}()
	}
	for g := 0; g < writers; g++ {
		testkit.Must(t, <-errs, "writer")
	}
	big := make([]*outbox.Message, 7300)
	for i := range big {
		big[i] = &outbox.Message{AggregateType: "order", AggregateID: "big", Type: "t.v1", Payload: i}
	}
	testkit.Must(t, pgx.BeginFunc(ctx, tb.db, func(tx pgx.Tx) error { return w.Write(ctx, tx, big...) }), "write 7,300")
	var n int
	testkit.Must(t, tb.db.QueryRow(ctx, "SELECT count(*) FROM "+tb.cfg.Table.Quoted()).Scan(&n), "count")
	if want := writers*each + len(big); n != want {
		t.Fatalf("%d rows; want %d", n, want)
	}
}
