// Package decoder turns pgoutput logical replication messages into
// transaction boundaries and outbox messages.
//
// The input is the WALData of one XLogData frame, as produced by the pgoutput
// plugin with proto_version '1', text format, no streaming and no binary
// mode. Decode reads one such frame and returns an Event: a Begin, a Message
// (one committed outbox row), a Commit, or Skip for everything the relay does
// not act on (Relation, Type, Origin, Update, Delete, Truncate, logical
// messages, rows of other tables).
//
// The decoder is pure: it does no I/O, never logs, never reads the clock and
// starts no goroutines. It is not safe for concurrent use; one goroutine
// drives it (the relay's pump, which reads the events the replication
// connection's goroutine hands over, in WAL order). Use one Decoder per
// replication session, because pgoutput announces every relation (a Relation
// message) once per session before its first row, and the decoder needs that
// announcement to find the outbox columns.
//
// Memory: the caller hands over each data slice and never reuses it. The
// decoder keeps references into it: a Message's Payload is a sub-slice of the
// frame (its capacity capped, so appending to it cannot overwrite the
// frame), except for bytea payloads, which are hex-decoded into a new slice.
// The string fields of a Message share one allocation.
//
// Two kinds of errors come back. A *BadRowError (see IsBadRow) is an outbox
// row that cannot become a Message: a null aggregate id, an unparsable
// message id, a relation that lacks a required column, a NULL payload
// (unless Config.NullPayload makes it a tombstone: a Message with Tombstone
// set and no payload). The stream itself is
// intact; the caller hands it on (the relay gives it to the sink, which
// parks it or halts by policy) and may keep decoding. Any other error is a protocol error (a truncated
// frame, a row for a relation never announced, a Begin inside a transaction):
// the decoder's view of the stream can no longer be trusted, and the caller
// should end the session and start a new one with a new Decoder.
//
// RowDecoder decodes outbox rows read by SQL instead, every column cast to
// text, to recover rows the stream no longer holds. It maps the columns and
// converts a row with the stream's code, so a row read either way becomes
// the same Message or the same *BadRowError. Its Messages share no memory
// with the values it was given.
//
// CheckColumns judges a table's columns before any row is read, with the
// code that judges a Relation message: a *ColumnError names the column and
// the setting to change (schema.Columns' fields, Config.AggregateTypeDefault).
// Programs call it at start (walrelay's "table columns" check), so that a
// table whose rows cannot be decoded is a configuration error, not a bad
// row per row. A table without an aggregate type column is decodable with
// Config.AggregateTypeDefault, which also fills NULL aggregate types.
//
// The text forms the decoder reads depend on the walsender session's
// settings (or, for RowDecoder, the reading session's): timestamps must be
// printed with DateStyle ISO and bytea with bytea_output hex (both
// PostgreSQL defaults). Other forms are bad rows.
//
// It is public for tools that read walrelay's slot or the same pgoutput
// stream themselves (a test, an audit, a second consumer of the WAL);
// walrelay's own callers are internal/relay and internal/backfill.
package decoder
