//go:build bench

// Package recover is the benchmark of `walrelay recover` (issue 17): how
// fast it closes a gap of 100,000 outbox rows from the table, against
// `walrelay run` streaming the same number of rows from a slot, measured in
// the same run on the same machine.
//
// Each side has an outbox table of its own, loaded by SQL (harness.Bulk:
// 1,000 aggregates, a JSON payload of about 200 bytes, transactions of
// 1,000 rows):
//
//   - run: `walrelay init`, the rows, then `walrelay run` from the slot,
//     timed from the process's start until the slot has confirmed the end
//     of the load (then SIGTERM).
//   - recover: `walrelay run` publishes a tenth as many rows first, and
//     stops; the slot is dropped (lost) and the gap's rows are written;
//     `walrelay recover --since` the time walrelay stopped, with the
//     default margin of an hour, which reads the earlier tenth again.
//     Timed from the process's start until it exits, the rows in Kafka.
//
// Each side's peak RSS (VmHWM, sampled every 20 ms) and CPU time (rusage)
// are measured; an independent reader (harness.Verify, kcat) then checks
// that every row is in Kafka and counts the duplicates. The table goes to
// $WALRELAY_BENCH_OUT_DIR/recover.md and to the test log. Nothing is
// asserted about speed: the test fails only when a run could not be done
// correctly (a row missing, walrelay failing).
//
// Run it with `make bench-recover`, or
//
//	cd test && WALRELAY_BENCH_SCALE=0.1 go test -tags bench -run TestBenchRecover -count=1 -v ./bench/recover
//
// (scale 1 is the 100,000-row gap).
package recover
