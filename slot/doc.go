// Package slot owns walrelay's side of PostgreSQL logical replication: the
// preflight of the server, the publication and the slot, their creation by
// `walrelay init`, the marker of a slot's pending recovery (`walrelay
// recover`), and the replication stream itself.
//
// One goroutine owns the replication connection (pgconn is not safe for
// concurrent use): Stream.Run connects, starts replication from 0/0 so that
// the server resumes at the slot's confirmed_flush_lsn, copies every XLogData
// out of the receive buffer, and hands it and every keepalive, in WAL order,
// to one channel. It never decides what is safe to confirm: it asks a
// Position func, which the caller backs with the confirm rule, and sends that
// position as write, flush and apply in standby status updates on a timer,
// whenever the server asks, and once more at shutdown. Status updates keep
// flowing while the consumer of the channel is blocked (Kafka down), so the
// server never drops the connection for silence.
//
// The slot is the checkpoint: walrelay keeps no state of its own, so a
// restart replays from confirmed_flush_lsn and a crash can duplicate but
// never lose a committed message.
//
// It is public for programs that run walrelay's replication side themselves:
// creating and checking the slot and publication, streaming with the confirm
// rule's position, reading the slot's figures. walrelay's verbs call it
// through cmd/walrelay and internal/relay.
package slot
