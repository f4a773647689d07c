// Package outbox writes walrelay's outbox rows from a Go application on pgx,
// inside the application's own transaction.
//
// # The caller's transaction
//
// The Transactional Outbox pattern holds only if the business change and
// the message announcing it commit together: an order without its
// order.submitted message, or a message about an order that was rolled
// back, is exactly the inconsistency the pattern exists to prevent. So a
// Writer never opens a connection of its own. Write takes the caller's
// pgx.Tx and inserts the rows there; commit publishes them (walrelay reads
// committed inserts from the WAL), rollback makes them never have existed.
// The caller owns the transaction from Begin to Commit or Rollback.
//
// Write validates every message before it writes any, and refuses the call
// with a *ValidationError that names the message and the field: a missing
// aggregate type, id or type, a payload that is not JSON or is over the
// limit, a header PostgreSQL or the relay cannot carry, a topic Kafka would
// refuse. The relay would otherwise halt on such a row, or park it in the
// dead-letter table, after it is committed; here the caller learns of it
// while it can still roll back. After any error from Write, roll back.
//
// # Stable message ids
//
// Every message has a message_id, the primary key of the outbox row and
// the ce_id header of the Kafka record. It is chosen once, before the row
// is written (NewID, a time-ordered UUIDv7, unless the caller set one), and
// every retry and replay of the message carries it: walrelay publishes at
// least once, and consumers (package inbox) drop the repeats by this id.
// Write stores the id it picked back in the Message, so the caller can log
// it or return it.
//
// # Headers
//
// A message's Headers become Kafka record headers. Write starts them from
// the context: the W3C traceparent set with WithTraceparent (when it is
// well formed) and the correlation id set with WithCorrelationID, so that a
// trace and a business request can be followed from the HTTP handler to
// every consumer. An entry of the message's own Headers wins over the one
// from the context. The relay sets the CloudEvents headers (ce_*,
// content-type) and aggregate_type and aggregate_version itself, and drops
// a ce_ entry that is not a valid CloudEvents attribute (schema.CheckHeader:
// a name other than 1 to 20 of a-z and 0-9, ce_datacontenttype, a
// ce_dataschema that is not an absolute URI), so Write refuses those keys
// rather than let them vanish. Other ce_ entries are CloudEvents extensions.
//
// # Limits
//
// The payload is JSON: any value encoding/json encodes, or a
// json.RawMessage or []byte of JSON text taken as it is. Config's
// MaxPayloadBytes (900 KiB by default, the relay's own default) bounds it,
// measured as the relay will measure it: for a jsonb column PostgreSQL
// prints a space after every ',' and ':', so a compact payload counts a
// little longer than its bytes. Keep the relay's --max-payload-bytes and
// the topics' max.message.bytes at least as large. One call writes any
// number of messages in one statement (one per 7,281 messages beyond
// that, PostgreSQL's parameter limit).
//
// For applications: it is the writing half of the pattern, the side that
// walrelay reads.
package outbox
