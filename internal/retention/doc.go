// Package retention deletes outbox rows that walrelay no longer needs: rows
// older than a retention period whose transactions the replication slot has
// already confirmed. `walrelay prune` is its command.
//
// # Confirmed by the slot
//
// An outbox row carries no LSN, and the slot confirms LSNs, so a Pruner
// links the two through a mark read in one statement:
//
//	SELECT pg_snapshot_xmin(pg_current_snapshot()), pg_current_wal_insert_lsn()
//
// The snapshot's xmin X is the oldest transaction still running when the
// statement began; every transaction with an xid below X had ended by then.
// A transaction leaves the list of running ones only after its commit
// record is in the WAL, and the insert position L is read after the
// snapshot, so each such commit record ends at or before L. The pruner then
// waits until the slot's confirmed_flush_lsn reaches L. walrelay confirms a
// position only when every transaction that committed before it is done:
// each of its messages acknowledged by Kafka or parked in the dead-letter
// table, which keeps a full copy. A row whose inserting transaction is older
// than X is therefore safe to delete once the slot has passed L; a row of
// any younger transaction is kept, whatever its occurred_at, until a later
// prune.
//
// Rows carry 32-bit xids. The comparison is age(xmin) > age(X mod 2^32),
// which is right across xid wraparound for any row younger than 2^31
// transactions. A row frozen by VACUUM keeps its raw xmin; once that is
// more than 2^31 transactions old it compares as young and is kept: the
// safe direction. Only such very old rows are then left behind; delete them
// by hand if they matter.
//
// The slot being idle does not hold prune up: walrelay's heartbeat writes
// into the WAL and is confirmed like any transaction, so the slot passes L
// within a heartbeat interval or so. A slot that does not pass L within the
// wait (walrelay stopped, Kafka down, a stall) means nothing is deleted and
// the prune fails with a NotConfirmedError.
//
// # What it cannot know
//
// The slot's position says what walrelay processed since the slot was
// created. Rows committed before `walrelay init` created the slot, and the
// rows of the gap after a lost slot was replaced (docs/RUNBOOK.md), were
// never published, yet the new slot has passed them. Keep the retention
// period longer than it takes to notice and reconcile a lost slot. Moving
// the slot by other means (pg_replication_slot_advance) also counts as
// confirmation.
//
// # A pending recovery
//
// `walrelay recover` closes such a gap from the table: it marks the slot's
// recovery pending in the recoveries table (slot.Recovery) before it
// replaces the slot, and finished once Kafka has every selected row. While
// it is pending, a Pruner keeps the rows with occurred_at at or after the
// recovery's Since, and every row when Since is NULL. It reads the mark
// after the slot has passed the prune mark: a slot the recovery created
// exists only after the recovery was marked pending, so the mark is seen
// whenever the slot's position could cover rows not yet published.
//
// # Batches and locks
//
// Rows are deleted in batches of Config.Batch, each one DELETE statement in
// a transaction of its own, with Config.Pause between batches; the run ends
// at the first batch that deletes fewer rows than the batch size. A DELETE
// takes a ROW EXCLUSIVE lock on the table, which does not block the
// application's inserts, and row locks on the rows it deletes, which nobody
// else holds (the outbox is insert-only). The rows are found through the
// index on occurred_at that `walrelay schema` creates.
//
// # The command
//
// `walrelay prune` only wires a Pruner: UsageProblem is its command line's
// rule, asked before connecting, and Summary the line it prints.
//
// Internal: walrelay's own, for `walrelay prune`.
package retention
