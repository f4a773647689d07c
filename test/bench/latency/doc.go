//go:build bench

// Package latency is issue 7's latency-at-steady-load benchmark: a paced
// writer commits single-row outbox transactions at a fixed rate (1,000 and
// 2,500 per second) while a real walrelay relays them to the real Kafka,
// and the delay from commit to Kafka is measured two ways:
//
//   - walrelay's own histogram walrelay_commit_to_ack_seconds, scraped from
//     /metrics before and after the measured window, so that warm-up is
//     excluded. It runs from PostgreSQL's commit timestamp (taken before
//     the commit record is flushed) to Kafka's acknowledgement. Its buckets
//     are coarse, so quantiles are estimates within bucket bounds; the
//     fraction of acks within 50 ms is read straight from a bucket bound
//     and is exact.
//   - a consumer, started before the writer, that stamps each record's
//     arrival; arrival minus the wall time the writer's COMMIT returned is
//     the cross-check. It includes the consumer's own fetch delay.
//
// Every committed message must arrive (a missing one fails the test);
// duplicates are counted. Timings are reported, never asserted. The test
// runs only with the build tag bench and writes latency.md (see
// WALRELAY_BENCH_OUT_DIR).
//
// TestBenchKnee (knee_test.go) runs the same measure at rising rates until
// one relay stops keeping up (p99 above 50 ms) or the writer cannot reach
// the rate, and writes knee.md (issue 20).
//
// TestBenchSteady (steady_test.go) is the CPU a steady load costs (issue
// 37): at 200, 1,000 and 2,500 tx/s, measure's run with pg_recvlogical
// reading a second slot of the same publication, each process's and each
// walsender's CPU per message over the window, and a bare kafka-go Writer
// (test/bench/kafkafloor) at the same rate as the Kafka client's floor;
// it writes steady.md.
package latency
