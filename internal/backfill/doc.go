// Package backfill publishes outbox rows read from the table itself rather
// than from the WAL: `walrelay recover` closes the gap a lost slot leaves
// (with the snapshot a new slot exports, so that every committed row is
// either read here or streamed by the slot, never neither), and `walrelay
// replay` publishes retained rows again for a consumer that rebuilds its
// state.
//
// A row becomes the same message the stream would make of it: the columns
// are read as text, the form pgoutput sends, and decoded by
// decoder.RowDecoder with the stream's own checks; the sink routes, keys
// and parks it as it does the stream's. The rows are read in one
// repeatable-read transaction through a cursor, a batch at a time, and
// the sink's in-flight bounds hold publishing back, so memory stays
// bounded whatever the selection's size.
//
// Run and Count are the read itself. Recover and Replay are the verbs
// around it, so that cmd/walrelay only parses their flags (Options, as
// given) and prints what they return: Recover decides under the slot's
// leader lock whether the slot may be replaced, marks the recovery
// pending, replaces the slot and publishes its snapshot; Replay stamps
// each message with its header, or counts the rows per topic in a dry
// run.
//
// Internal: walrelay's own, for the recover and replay verbs.
package backfill
