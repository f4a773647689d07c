package main

import (
	"testing"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/inbox"
)

func TestDecodeSubmitted(t *testing.T) {
	const order = "0190a8c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d"
	msg := func(typ, payload string) inbox.Message {
		return inbox.Message{Type: typ, AggregateID: order, Payload: []byte(payload)}
	}
	good := `{"order_id":"` + order + `","customer_email":"ann@example.com","items":[{"sku":"A","quantity":2}],"submitted_at":"2026-01-02T03:04:05Z","added_in_v1_1":true}`
	sub, ok, err := decodeSubmitted(msg(orderevents.TypeSubmitted, good))
	if err != nil || !ok {
		t.Fatalf("decodeSubmitted(good) = ok %v, err %v; want ok, nil", ok, err)
	}
	if sub.OrderID != order || len(sub.Items) != 1 || sub.Items[0] != (orderevents.Item{SKU: "A", Quantity: 2}) {
		t.Errorf("decodeSubmitted(good) = %+v", sub)
	}
	if _, ok, err := decodeSubmitted(msg("order.cancelled.v1", `not even json`)); ok || err != nil {
		t.Errorf("another type: ok %v, err %v; want false, nil (recorded as handled, no effect)", ok, err)
	}
	bad := map[string]string{
		"not json":       `{"order_id":`,
		"no order id":    `{"customer_email":"ann@example.com","items":[{"sku":"A","quantity":2}]}`,
		"another order":  `{"order_id":"0190a8c4-0000-7a8b-9c0d-1e2f3a4b5c6d","items":[{"sku":"A","quantity":2}]}`,
		"no items":       `{"order_id":"` + order + `","items":[]}`,
		"wrong quantity": `{"order_id":"` + order + `","items":[{"sku":"A","quantity":"two"}]}`,
	}
	for name, payload := range bad {
		if _, ok, err := decodeSubmitted(msg(orderevents.TypeSubmitted, payload)); ok || err == nil {
			t.Errorf("%s: ok %v, err %v; want false and an error", name, ok, err)
		}
	}
}
