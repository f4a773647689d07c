//go:build bench

// Package drain is the drain benchmark of issue 7: how fast walrelay empties
// a backlog of outbox rows, against the decode limit of this machine.
//
// For each shape (many single-row transactions, transactions of 100 rows,
// one huge transaction) and payload size, it loads one outbox table whose
// publication a set of logical slots (pgoutput) read, all created before
// the load, so every run below drains byte-for-byte the same WAL. A round
// is these runs, each on a slot of its own:
//
//  1. pg_recvlogical to /dev/null, up to the end position: PostgreSQL's own
//     client, the decode limit.
//  2. goreader (test/bench/goreader): a minimal pgoutput client in Go, the
//     other reference for the CPU a walsender spends per message.
//  3. walrelay built with -tags walrelay_discard: decodes and confirms, but
//     acknowledges every message at once instead of producing it.
//  4. walrelay as shipped, to the rig's Kafka (RequireAll), whose topic
//     must then hold exactly one record per row.
//  5. only with WALRELAY_BENCH_BASELINE=<git rev>: walrelay built at that
//     revision, to Kafka, checked the same way: today's binary against
//     yesterday's, side by side on the same WAL.
//  6. pg_recvlogical again: the baseline is the faster of runs 1 and 6.
//
// A backlog under 500 MB of payload gets three rounds and each run reports
// its median round (WALRELAY_BENCH_ROUNDS overrides); a larger one, one.
// Each run is timed from its process's start until it is done (pg_recvlogical
// exits at --endpos; walrelay, run with --confirm-interval at the 20 ms the
// slot is polled at, has confirmed the end position in the slot),
// with the child's CPU time (rusage), its peak RSS (VmHWM), the CPU time of
// the walsender that served it and, for the Kafka runs, the broker's; a
// second table gives each per message, and the shortest wall time their
// sum allows on this machine's CPUs. The tables go to
// $WALRELAY_BENCH_OUT_DIR/drain.md and to the test log.
// Nothing is asserted about speed: the test fails only when a run could not
// be done correctly.
//
// Before the first backlog the Kafka broker is warmed up until its JIT
// compiler is nearly idle (broker_test.go): a young broker spends most of
// its CPU compiling, which loaded the first cells of a full run with twice
// the broker CPU of the same cell run alone. Every kafka run reports the
// compiler's share of the broker's CPU beside it. After each load, the
// machine settles before the runs (settle: sync, and the broker idle with
// the previous shape's topics deleted), so that no run pays for another's
// leftovers.
//
// TestBenchScale (scale_test.go) draws the scale curves of issue 20: the
// drain rate and the CPU per message against the payload (64 B to 64 KB)
// and against the topic's partitions (1 to 48), one run per point, to
// scale.md.
//
// TestBenchTables (tables_test.go) is issue 36's: single-row transactions
// spread over three outbox tables of different shapes, drained from the
// same WAL by one walrelay whose config file lists the three, on one slot,
// and by three walrelays of one table each, on three slots at once (and,
// for reference, one after another), side by side: wall time, walrelay's
// CPU and the walsenders', to tables.md.
//
// Run it with
//
//	cd test && WALRELAY_BENCH_SCALE=0.02 go test -tags bench -run TestBenchDrain -count=1 -timeout 0 -v ./bench/drain
//
// (scale 1 is the full size).
package drain
