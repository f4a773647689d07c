package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/idempotency"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
)

// store runs the SubmitOrder command against the service's database.
type store struct {
	db        *pgxpool.Pool
	orders    string // the orders table, quoted
	keys      *idempotency.Store
	outbox    *outbox.Writer
	outboxDDL string // the outbox table, its publication and dead letters
}

func newStore(db *pgxpool.Pool, o options) (*store, error) {
	keys, err := idempotency.New(idempotency.Config{Table: o.idempotencyTable})
	if err != nil {
		return nil, fmt.Errorf("idempotency store: %w", err)
	}
	w, err := outbox.New(outbox.Config{Table: o.outboxTable})
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	c := schema.DefaultConfig()
	c.Table, c.Publication = o.outboxTable, o.publication
	ddl, err := schema.DDL(c)
	if err != nil {
		return nil, fmt.Errorf("outbox ddl: %w", err)
	}
	return &store{db: db, orders: o.ordersTable.Quoted(), keys: keys, outbox: w, outboxDDL: ddl}, nil
}

// migrationLock serialises the migrations of service instances that start
// together: CREATE ... IF NOT EXISTS alone can still collide in the catalog.
const migrationLock = 0x6f72646572 // "order"

// migrate creates what the service needs; safe to run at every start.
func (s *store) migrate(ctx context.Context) error {
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS ` + s.orders + ` (
			order_id       uuid        PRIMARY KEY,
			customer_email text        NOT NULL,
			items          jsonb       NOT NULL,
			created_at     timestamptz NOT NULL DEFAULT now()
		)`,
		s.keys.DDL(),
		s.outboxDDL,
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		for _, stmt := range ddl {
			// No arguments: pgx sends it with the simple protocol, so one
			// string may hold several statements.
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		return nil
	})
}

// submitResponse is the body of a 201 answer, stored with the key and
// returned as it is to every retry.
type submitResponse struct {
	OrderID   string `json:"order_id"`
	MessageID string `json:"message_id"`
}

// submit runs SubmitOrder at most once for key: the order, its
// order.submitted.v1 message and the key with its response commit in one
// transaction.
func (s *store) submit(ctx context.Context, key string, fingerprint []byte, o order) ([]byte, bool, error) {
	return s.keys.Do(ctx, s.db, key, fingerprint, func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
		return s.insert(ctx, tx, o)
	})
}

// insert writes the order and its message in tx.
func (s *store) insert(ctx context.Context, tx pgx.Tx, o order) ([]byte, error) {
	id := outbox.NewID().String()
	items, err := json.Marshal(o.Items)
	if err != nil {
		return nil, fmt.Errorf("encode items: %w", err)
	}
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO `+s.orders+` (order_id, customer_email, items) VALUES ($1, $2, $3)
		RETURNING created_at`, id, o.CustomerEmail, items).Scan(&created)
	if err != nil {
		return nil, fmt.Errorf("insert order: %w", err)
	}
	msg := &outbox.Message{
		AggregateType:    orderevents.AggregateType,
		AggregateID:      id,
		AggregateVersion: 1,
		HasVersion:       true,
		Type:             orderevents.TypeSubmitted,
		Payload: orderevents.Submitted{
			OrderID: id, CustomerEmail: o.CustomerEmail, Items: o.Items, SubmittedAt: created,
		},
		OccurredAt: created,
	}
	if err := s.outbox.Write(ctx, tx, msg); err != nil {
		return nil, fmt.Errorf("write outbox message: %w", err)
	}
	resp, err := json.Marshal(submitResponse{OrderID: id, MessageID: msg.ID.String()})
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return resp, nil
}
