// Package idempotency runs a business command at most once per
// idempotency key.
package idempotency
