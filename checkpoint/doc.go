// Package checkpoint holds walrelay's confirm rule: which WAL position may be
// reported to PostgreSQL as written, flushed and applied, so that the server
// may forget the WAL before it.
//
// The slot's confirmed position is walrelay's only checkpoint. Whatever lies
// below it will never be sent again, so it may only move past a row once
// Kafka has acknowledged that row. Confirm too early and a crash loses the
// row; confirm too late and a crash merely replays duplicates. Every choice
// here leans towards the second.
//
// # The rule
//
// pgoutput (protocol v1) streams only committed transactions, each as Begin,
// its rows, Commit. The driver reports them to a Tracker as they arrive:
// Begin, Add for every row handed to the sink (before the Commit is even
// seen), Commit with the Commit message's TransactionEndLSN, and Ack for
// every row Kafka acknowledged, in whatever order the acks come back.
//
//   - A transaction is done when its Commit has arrived and every row added
//     to it has been acknowledged. A transaction without rows is done at its
//     Commit.
//   - Safe is the end LSN of the last transaction in the longest prefix of
//     done transactions, in the order they began (which is commit order).
//     Never the CommitLSN (it points at the commit record, not past it, and
//     confirming it makes the server resend the transaction), never a row's
//     LSN, never the highest acknowledged LSN out of order: if transaction 2
//     is done before transaction 1, Safe stays at transaction 0's end until
//     1 is done, then jumps to 2's end.
//   - Safe never decreases, not even when a replayed transaction ends below
//     it, and never goes below the position New started from.
//
// # Keepalives
//
// A keepalive's ServerWALEnd (and the end of a non-transactional WAL message,
// such as walrelay's heartbeat) may be confirmed only when nothing is in
// flight: no transaction open and every received one done. Otherwise
// Keepalive ignores it. The server's WAL end runs ahead of what walrelay has
// published: a keepalive can arrive while the rows of the transaction it
// covers are still in a Kafka batch, or even between a Begin and its Commit.
// Confirming it then tells PostgreSQL those rows are safe; if Kafka then
// fails, or walrelay is killed, the replay starts after them and they are
// lost for good. This is the classic data-loss bug of CDC tools.
//
// # Shape
//
// Tracker is a pure state machine: no I/O, clock, logging or goroutines, and
// not safe for concurrent use (the driver holds a mutex around it, since
// Kafka acks arrive on other goroutines). It counts messages rather than
// storing them and drops done transactions from the front of a ring indexed
// by id, so Add and Ack are O(1) and allocation-free, and memory is
// O(pending transactions), even for a transaction of a million rows.
// Calls that break the protocol return an error wrapping one of the Err
// values and change nothing.
//
// It is public, and pure, so that anyone who builds on walrelay's stream can
// confirm positions by the same rule; internal/relay is walrelay's own
// caller.
package checkpoint
