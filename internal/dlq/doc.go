// Package dlq keeps walrelay's dead letters: outbox rows the relay did not
// publish, in a table of the same database (schema.DeadLetterDDL), and the
// operator's verbs over them (list, retry, discard).
//
// A row is keyed by its schema.Position (commit LSN of its transaction,
// place among its outbox rows), so parking the same row again after a
// replay changes nothing. Its status is 'parked' or 'discarded'.
//
// A parked row with a known aggregate (an aggregate id that is neither null
// nor empty) blocks every later message of that aggregate: the relay parks
// them behind it, with the reason "blocked by <message_id>" and blocked_by
// set, so that the aggregate's order survives. Blockers gives the relay the
// first parked row of each aggregate when a session starts. Discarded rows
// no longer block; they stay, with the operator's reason, for audit. Rows
// without an aggregate id block nothing.
//
// Retry publishes parked messages again, with their original message_id and
// headers, in their order, and deletes those Kafka acknowledged. It is safe
// while the relay runs because of one lock discipline:
//
//   - Retry locks the rows it publishes FOR UPDATE, in (aggregate, position)
//     order, and holds the lock until it has deleted what Kafka
//     acknowledged and committed.
//   - Park, for a message blocked behind an earlier one, first reads the
//     aggregate's earlier parked rows FOR SHARE. That read waits for a
//     Retry (or a Discard) holding them, and then sees the outcome: rows
//     deleted or discarded no longer count. When none is left, Park stores
//     nothing and reports false: the aggregate was unblocked and the relay
//     publishes the message after the retried ones. When some are left,
//     the message is parked behind them.
//
// So a message is either published after the retried ones of its aggregate
// or parked behind the ones still parked; it is never published before an
// earlier message of its aggregate, and never lost.
//
// A row that could not be decoded (row_data set, no message) cannot be
// retried: fix the data with a new outbox row, then discard the dead one.
//
// What `walrelay dlq` prints is here too, as plain code over values:
// Options turns its flags into a Selection or a Filter, WriteTable and
// WriteJSON print a listing (never a payload), Result.WriteText a retry.
//
// Internal: walrelay's own; the table's shape is public in
// schema.DeadLetterDDL.
package dlq
