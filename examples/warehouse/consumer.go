package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/inbox"
)

// newReader reads the topic as a member of the group, configured as
// inbox.Consume expects: offsets committed only after the database commit
// of their effect, a new group starting at the oldest record, and a topic
// walrelay creates after the warehouse started picked up. A record whose
// offset was not committed is delivered again, which the inbox recognises.
func newReader(o options, log *zap.Logger) *kafka.Reader {
	errorLog := log.Named("kafka")
	c := inbox.ReaderConfig(o.brokers, o.group, o.topic)
	c.SessionTimeout = o.sessionTimeout
	c.RebalanceTimeout = o.sessionTimeout
	c.HeartbeatInterval = o.sessionTimeout / 10
	c.ErrorLogger = kafka.LoggerFunc(func(msg string, args ...any) {
		errorLog.Warn(fmt.Sprintf(msg, args...))
	})
	return kafka.NewReader(c)
}

// migrationLock serialises the migrations of instances that start together:
// CREATE ... IF NOT EXISTS alone can still collide in the catalog.
const migrationLock = 0x77617265 // "ware"

// reservationsDDL creates the table of the warehouse's effect.
//
// Deliberately no unique constraint on order_id: nothing in the table stops
// a second reservation for an order. The inbox alone makes the effect happen
// once per message, and the fault test counts the reservations of every
// order to prove it.
const reservationsDDL = `CREATE TABLE IF NOT EXISTS reservations (
	reservation_id bigserial   PRIMARY KEY,
	order_id       uuid        NOT NULL,
	items          jsonb       NOT NULL,
	created_at     timestamptz NOT NULL DEFAULT now()
)`

// migrate creates the inbox tables (inboxDDL) and the reservations table;
// safe to run at every start.
func migrate(ctx context.Context, db *pgxpool.Pool, inboxDDL string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		// No arguments: pgx sends them with the simple protocol, so one
		// string may hold several statements.
		for _, ddl := range []string{inboxDDL, reservationsDDL} {
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		return nil
	})
}
