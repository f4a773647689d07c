// Package orderevents is the message contract between the example services:
// the order service publishes it (through its outbox), the warehouse and the
// notifier consume it (through their inboxes).
package orderevents

import "time"

// The outbox fields of an order's messages.
const (
	// AggregateType routes the messages to the topic outbox.order with the
	// relay's default template.
	AggregateType = "order"
	// TypeSubmitted is the type (ce_type) of Submitted, version 1.
	TypeSubmitted = "order.submitted.v1"
)

// Submitted is the payload of an order.submitted.v1 message. The aggregate
// id is OrderID and the aggregate version 1.
type Submitted struct {
	OrderID       string    `json:"order_id"`
	CustomerEmail string    `json:"customer_email"`
	Items         []Item    `json:"items"`
	SubmittedAt   time.Time `json:"submitted_at"`
}

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}
