//go:build bench

// Package drain is the drain benchmark of issue 7: how fast walrelay empties
// a backlog of outbox rows, against the decode limit of this machine.
//
// For each shape (many single-row transactions, transactions of 100 rows,
// one huge transaction) and payload size, it loads one outbox table whose
// publication three logical slots (pgoutput) read, all created before the
// load, so the three runs below drain byte-for-byte the same WAL:
//
//  1. pg_recvlogical to /dev/null, up to the end position: PostgreSQL's own
//     client, the decode limit.
//  2. walrelay built with -tags walrelay_discard: decodes and confirms, but
//     acknowledges every message at once instead of producing it.
//  3. walrelay as shipped, to the rig's Kafka (RequireAll), whose topic
//     must then hold exactly one record per row.
//
// Each run is timed from its process's start until it is done (pg_recvlogical
// exits at --endpos; walrelay has confirmed the end position in the slot),
// with the child's CPU time and peak RSS from its rusage and the CPU time of
// the walsender that served it. The table goes to
// $WALRELAY_BENCH_OUT_DIR/drain.md and to the test log. Nothing is asserted
// about speed: the test fails only when a run could not be done correctly.
//
// Run it with
//
//	WALRELAY_BENCH_SCALE=0.02 go test -tags bench -run TestBenchDrain -count=1 -timeout 0 -v ./test/bench/drain
//
// (scale 1 is the full size).
package drain
