package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/internal/testkit"
)

// handle inserts one task per order, in the caller's transaction; repeats,
// other types and orders without a valid address add none.
func TestHandleInsertsOneTaskPerOrder(t *testing.T) {
	pool, s := testTasks(t)
	ctx := context.Background()
	m, err := newMetrics(nil)
	testkit.Must(t, err, "metrics")
	o := &orders{tasks: s, log: zaptest.NewLogger(t), metrics: m}
	msg := func(typ string, sub orderevents.Submitted) inbox.Message {
		payload, err := json.Marshal(sub)
		testkit.Must(t, err, "encode")
		return inbox.Message{Type: typ, AggregateType: orderevents.AggregateType, AggregateID: sub.OrderID, Payload: payload}
	}
	good := orderevents.Submitted{OrderID: "o-1", CustomerEmail: "a@example.com", Items: []orderevents.Item{{SKU: "s", Quantity: 1}}}
	for _, c := range []inbox.Message{
		msg(orderevents.TypeSubmitted, good),
		msg(orderevents.TypeSubmitted, good), // the same order again, as a new message
		msg("order.cancelled.v1", good),
		msg(orderevents.TypeSubmitted, orderevents.Submitted{OrderID: "o-2", CustomerEmail: "nope"}),
		{Type: orderevents.TypeSubmitted, Payload: []byte(`{"order_id": 7}`)},
	} {
		tx, err := pool.Begin(ctx)
		testkit.Must(t, err, "begin")
		testkit.Must(t, o.handle(ctx, tx, c), "handle %s", c.Type)
		testkit.Must(t, tx.Commit(ctx), "commit")
	}
	// A rolled-back transaction leaves no task.
	tx, err := pool.Begin(ctx)
	testkit.Must(t, err, "begin")
	testkit.Must(t, o.handle(ctx, tx, msg(orderevents.TypeSubmitted, orderevents.Submitted{OrderID: "o-3", CustomerEmail: "c@example.com"})), "handle")
	testkit.Must(t, tx.Rollback(ctx), "rollback")

	var keys []string
	rows, err := pool.Query(ctx, "SELECT task_key FROM "+s.table+" ORDER BY task_key")
	testkit.Must(t, err, "read tasks")
	for rows.Next() {
		var k string
		testkit.Must(t, rows.Scan(&k), "scan")
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != "order-confirmation/o-1" {
		t.Errorf("tasks = %q; want [order-confirmation/o-1]", keys)
	}
	if got := testutil.ToFloat64(m.created); got != 2 { // o-1 and the rolled-back o-3
		t.Errorf("created counter = %v; want 2", got)
	}
	if got := testutil.ToFloat64(m.refused); got != 2 {
		t.Errorf("refused counter = %v; want 2", got)
	}
}
