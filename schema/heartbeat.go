package schema

// HeartbeatPrefix is the prefix of the logical decoding messages walrelay
// writes as heartbeats (pg_logical_emit_message, outside any transaction,
// with the slot's name as content). The leader writes one on a timer so the
// slot keeps moving while the outbox is idle; the decoder recognises them
// and the relay never publishes them: each only proves that everything
// before its WAL position has been decoded.
const HeartbeatPrefix = "walrelay.heartbeat"
