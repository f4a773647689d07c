package outbox_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/outbox"
)

type orderSubmitted struct {
	OrderID string `json:"order_id"`
	Total   int64  `json:"total_cents"`
}

// An order and its order.submitted.v1 message, in one transaction.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, "postgres://app@localhost/shop")
	if err != nil {
		panic(err)
	}
	w, err := outbox.New(outbox.Config{}) // public.outbox_messages
	if err != nil {
		panic(err)
	}
	ctx = outbox.WithTraceparent(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx = outbox.WithCorrelationID(ctx, "req-7f3a")

	msg := &outbox.Message{
		AggregateType: "order",
		AggregateID:   "o-1001",
		Type:          "order.submitted.v1",
		Payload:       orderSubmitted{OrderID: "o-1001", Total: 4250},
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total_cents) VALUES ($1, $2)", "o-1001", 4250); err != nil {
			return err
		}
		return w.Write(ctx, tx, msg) // an error rolls back the order too
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("order o-1001 submitted as message", msg.ID)
}
