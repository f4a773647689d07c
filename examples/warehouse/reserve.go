package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/inbox"
)

// reservations is the warehouse's effect: one stock reservation per
// submitted order.
type reservations struct {
	log *zap.Logger
}

// handle is the inbox handler: it runs in the transaction that records the
// message in the inbox, so the reservation and the record of having made it
// commit together. Messages of other types are none of the warehouse's
// business: it returns nil and the inbox records them as handled. An error
// (a payload that breaks the contract) rolls back and the inbox retries the
// message with backoff, holding its partition: a contract breach stops the
// line rather than losing an order.
func (rs reservations) handle(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	sub, ok, err := decodeSubmitted(m)
	if err != nil || !ok {
		return err
	}
	items, err := json.Marshal(sub.Items)
	if err != nil {
		return fmt.Errorf("encode items of order %s: %w", sub.OrderID, err)
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO reservations (order_id, items) VALUES ($1, $2) RETURNING reservation_id`,
		sub.OrderID, items).Scan(&id)
	if err != nil {
		return fmt.Errorf("insert the reservation of order %s: %w", sub.OrderID, err)
	}
	rs.log.Info("reservation created", zap.Int64("reservation_id", id), zap.String("order_id", sub.OrderID),
		zap.Stringer("message_id", m.ID))
	return nil
}

// decodeSubmitted reads an order.submitted.v1 payload; ok is false for a
// message of another type. Unknown fields are allowed (a producer may add
// fields within v1); a missing order id, one that is not the message's
// aggregate id, or an order without items is an error.
func decodeSubmitted(m inbox.Message) (sub orderevents.Submitted, ok bool, err error) {
	if m.Type != orderevents.TypeSubmitted {
		return sub, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(m.Payload))
	if err := dec.Decode(&sub); err != nil {
		return sub, false, fmt.Errorf("decode %s %s: %w", m.Type, m.ID, err)
	}
	switch {
	case sub.OrderID == "":
		return sub, false, fmt.Errorf("%s %s: no order_id", m.Type, m.ID)
	case sub.OrderID != m.AggregateID:
		return sub, false, fmt.Errorf("%s %s: order_id %q is not the aggregate id %q", m.Type, m.ID, sub.OrderID, m.AggregateID)
	case len(sub.Items) == 0:
		return sub, false, errors.New(m.Type + " " + m.ID.String() + ": no items")
	}
	return sub, true, nil
}
