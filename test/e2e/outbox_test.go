package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// A rolled-back business transaction leaves neither order nor outbox row
// nor message: an application writes its order and the order's message with
// package outbox in one transaction and rolls back; a marker order committed
// after it reaches Kafka, alone and once, with the headers Write took from
// the context.
func TestRolledBackBusinessTransactionLeavesNoOrderRowOrMessage(t *testing.T) {
	f := harness.New(t, "order")
	r := f.Start()
	ctx := context.Background()
	orders := "orders_" + f.ID
	_, err := f.DB.Exec(ctx, "CREATE TABLE "+orders+" (id text PRIMARY KEY, cents bigint NOT NULL)")
	testkit.Must(t, err, "create the orders table")
	t.Cleanup(func() { f.DB.Exec(context.Background(), "DROP TABLE IF EXISTS "+orders) }) //nolint:errcheck // best effort
	w, err := outbox.New(outbox.Config{Table: schema.Table{Schema: "public", Name: f.Table}})
	testkit.Must(t, err, "new outbox writer")

	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	submit := func(id string, commit bool) *outbox.Message {
		t.Helper()
		ctx := outbox.WithCorrelationID(outbox.WithTraceparent(ctx, traceparent), "req-"+id)
		msg := &outbox.Message{AggregateType: "order", AggregateID: id, AggregateVersion: 1, HasVersion: true,
			Type: "order.submitted.v1", Payload: map[string]any{"order_id": id, "cents": 4250}}
		tx, err := f.DB.Begin(ctx)
		testkit.Must(t, err, "begin")
		defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
		_, err = tx.Exec(ctx, "INSERT INTO "+orders+" (id, cents) VALUES ($1, 4250)", id)
		testkit.Must(t, err, "insert order %s", id)
		testkit.Must(t, w.Write(ctx, tx, msg), "write the message of order %s", id)
		if commit {
			testkit.Must(t, tx.Commit(ctx), "commit order %s", id)
		} else {
			testkit.Must(t, tx.Rollback(ctx), "roll back order %s", id)
		}
		return msg
	}
	rolledBack := submit("o-rolled-back", false)
	marker := submit("o-marker", true)

	// Once the slot has confirmed the marker's commit, Kafka has it.
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	recs := f.ReadTopic(f.Topic("order"))
	var markers int
	for _, rec := range recs {
		switch rec.Headers[schema.HeaderID] {
		case rolledBack.ID.String():
			t.Errorf("the rolled-back message %s was published at %s/%d@%d", rolledBack.ID, rec.Topic, rec.Partition, rec.Offset)
		case marker.ID.String():
			markers++
			checkMarker(t, rec, traceparent)
		}
	}
	if markers != 1 || len(recs) != 1 {
		t.Errorf("the topic holds %d records, %d of them the marker %s; want 1, 1", len(recs), markers, marker.ID)
	}
	for _, c := range []struct {
		what, sql string
		arg       any
		want      int
	}{
		{"rolled-back orders", "SELECT count(*) FROM " + orders + " WHERE id = $1", "o-rolled-back", 0},
		{"rolled-back outbox rows", "SELECT count(*) FROM " + f.Table + " WHERE message_id = $1", rolledBack.ID.String(), 0},
		{"marker orders", "SELECT count(*) FROM " + orders + " WHERE id = $1", "o-marker", 1},
		{"marker outbox rows", "SELECT count(*) FROM " + f.Table + " WHERE message_id = $1", marker.ID.String(), 1},
	} {
		if got := countWhere(t, f.DB, c.sql, c.arg); got != c.want {
			t.Errorf("%s: %d; want %d", c.what, got, c.want)
		}
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}
}

// checkMarker checks the key and the headers of the marker's record.
func checkMarker(t *testing.T, rec kafkatest.Record, traceparent string) {
	t.Helper()
	if rec.Key == nil || *rec.Key != "o-marker" {
		t.Errorf("marker key %v; want o-marker", rec.Key)
	}
	for k, want := range map[string]string{
		schema.HeaderTraceparent:      traceparent,
		schema.HeaderCorrelationID:    "req-o-marker",
		schema.HeaderType:             "order.submitted.v1",
		schema.HeaderAggregateVersion: "1",
	} {
		if got := rec.Headers[k]; got != want {
			t.Errorf("marker header %s = %q; want %q", k, got, want)
		}
	}
}

func countWhere(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, arg any) int {
	t.Helper()
	var n int
	testkit.Must(t, db.QueryRow(context.Background(), sql, arg).Scan(&n), "count: %s", sql)
	return n
}
