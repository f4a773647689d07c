// Package outbox writes walrelay's outbox rows from a Go application on pgx,
// inside the application's own transaction.
package outbox
