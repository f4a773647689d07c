//go:build bench

package latency

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// environment is what the report says about the machine.
type environment struct {
	cpus              int
	cpuModel          string
	postgres, kafka   string
	date              string
	loadBefore        string
	goVersion         string
	benchScaleSetting string
}

func machine(t *testing.T) environment {
	t.Helper()
	pgURL, _ := testkit.Services(t)
	e := environment{
		cpus: runtime.NumCPU(), cpuModel: benchenv.CPUModel(), kafka: benchenv.KafkaVersion(),
		date: time.Now().UTC().Format(time.RFC3339), loadBefore: benchenv.LoadAverage(), goVersion: runtime.Version(),
		benchScaleSetting: os.Getenv("WALRELAY_BENCH_SCALE"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	testkit.Must(t, err, "connect to postgres")
	defer conn.Close(ctx)
	testkit.Must(t, conn.QueryRow(ctx, "SHOW server_version").Scan(&e.postgres), "read the postgres version")
	return e
}

// render is the Markdown table, one row per rate.
func render(results []result) string {
	var b strings.Builder
	b.WriteString("| target tx/s | achieved tx/s | late starts (>5 ms) / max | messages (window / all) | histogram p50 | p99 | p99.9 | acks <= 50 ms | consumer p50 | p99 | p99.9 | max | duplicates | all arrived | walrelay CPU s (cores) | peak RSS MB |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %.0f | %d / %s | %.0f / %d | %s | %s | %s | %.2f%% | %s | %s | %s | %s | %d | yes | %.1f (%.2f) | %.0f |\n",
			r.rate, r.pace.achieved, r.pace.late, ms(r.pace.maxLate), r.hist.total(), r.messages,
			est(r.hist.quantile(.5)), est(r.hist.quantile(.99)), est(r.hist.quantile(.999)), 100*r.within50ms,
			ms(pick(r.consumer, .5)), ms(pick(r.consumer, .99)), ms(pick(r.consumer, .999)), ms(pick(r.consumer, 1)),
			r.duplicates, r.cpu.Seconds(), r.cpu.Seconds()/r.ran.Seconds(), float64(r.peakRSS)/(1<<20))
	}
	return b.String()
}

// renderStages is the second table: where the consumer's latency goes, and
// how busy the machine was.
func renderStages(results []result) string {
	var b strings.Builder
	b.WriteString("| target tx/s | COMMIT return -> walrelay sink p50 | p99 | max | sink -> consumer p50 | p99 | max | Kafka ack probe p50 | p99 | max | machine CPU busy in window | cluster WAL MB/s in window | slot decoded / spilled MB | consumer reconnects | seconds with a consumer latency > 50 ms | PostgreSQL checkpoints in window | other busy programs seen in window |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% | %.1f | %.0f / %.0f | %d | %s | %d | %s |\n", r.rate,
			ms(pick(r.stages.toSink, .5)), ms(pick(r.stages.toSink, .99)), ms(pick(r.stages.toSink, 1)),
			ms(pick(r.stages.toConsumer, .5)), ms(pick(r.stages.toConsumer, .99)), ms(pick(r.stages.toConsumer, 1)),
			ms(pick(r.around.probe, .5)), ms(pick(r.around.probe, .99)), ms(pick(r.around.probe, 1))+failed(r.around.probeErrs),
			100*r.around.machineCPU, r.around.walRate/1e6, float64(r.slotStats.decodedBytes)/1e6, float64(r.slotStats.spillBytes)/1e6, r.reconnects, r.slow, r.around.checkpoints, r.around.neighbours)
	}
	return b.String()
}

// failed notes failed probe requests, if any.
func failed(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d failed)", n)
}

// est shows an estimate with the bucket that bounds it.
func est(e estimate) string {
	if math.IsNaN(e.value) {
		return "n/a"
	}
	if math.IsInf(e.hi, 1) {
		return fmt.Sprintf("> %g ms", e.lo*1000)
	}
	return fmt.Sprintf("%.1f ms (%g–%g]", e.value*1000, e.lo*1000, e.hi*1000)
}

// pick is the q-quantile of sorted values by the nearest-rank method
// (q = 1: the maximum).
func pick(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return math.MinInt64
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms shows a duration in milliseconds; math.MinInt64 (no values) as n/a.
func ms(d time.Duration) string {
	if d == math.MinInt64 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// writeReport writes latency.md into WALRELAY_BENCH_OUT_DIR, by default
// the repository's .rig/bench.
func writeReport(t *testing.T, e environment, flags []string, window time.Duration, tables string) {
	t.Helper()
	cmd := "go test -tags bench -run TestBenchLatency -v -timeout 30m ./bench/latency"
	if e.benchScaleSetting != "" {
		cmd = "WALRELAY_BENCH_SCALE=" + e.benchScaleSetting + " " + cmd
	}
	cmd = "cd test && " + cmd // the benchmarks are the test module's
	var b strings.Builder
	fmt.Fprintf(&b, "## Latency at steady load\n\n")
	fmt.Fprintf(&b, "Reproduce (rig running, `eval \"$(scripts/rig.sh env)\"`): `%s`\n\n", withRelayFlags(cmd, flags))
	b.WriteString(e.line() + "\n\n")
	fmt.Fprintf(&b, "Each rate: a fresh outbox, slot and 3-partition topic; walrelay (plain `go build`) with %s; "+
		"a writer of single-row autocommit INSERT transactions (~200 B JSON payload, %d aggregates) on %d connections, paced by a schedule; "+
		"measured window %s after a warm-up, the writer going on at the same rate until after the window. Load average after: %s.\n\n",
		relaySetting(flags), aggregates, writerConns, window, benchenv.LoadAverage())
	b.WriteString(tables)
	b.WriteString(`
- *histogram*: walrelay_commit_to_ack_seconds, difference of the cumulative buckets scraped at the start and the end of the window (the acks made in the window). It runs from PostgreSQL's commit timestamp to Kafka's acknowledgement. p50/p99/p99.9 are linear interpolations within a bucket (estimates; the true value lies in the bucket shown, ms); *acks <= 50 ms* is read from the 50 ms bucket bound and is exact: it is at least 99% exactly when the issue's target, p99 under 50 ms, holds.
- *consumer*: arrival at the benchmark's consumer (a fetch loop on a kafka-go Conn per partition, MaxWait 10 ms, MinBytes 1) minus the wall time the writer's COMMIT returned, for the messages whose COMMIT returned in the window (nearest rank). It includes the consumer's fetch delay; it starts after the commit's WAL flush, the histogram before it. Under a backlog the two differ more: the histogram counts the acks made in the window (late acks of earlier commits included), the consumer the messages committed in it.
- *late starts*: transactions of the window that began more than 5 ms behind their slot (every connection busy, or the scheduler woke late); *achieved*: COMMITs returned in the window per second.
- *walrelay CPU s*, *peak RSS*: the whole process, start to SIGTERM (warm-up and tail included), from its rusage; *cores* is CPU seconds per second of its run.
- *COMMIT return -> walrelay sink*, *sink -> consumer*: the consumer's latency split at the record timestamp walrelay's sink sets when it takes a decoded message, before batching (millisecond precision; the first part covers walsender, network and decoding and can be slightly negative, since WAL is streamed once flushed, possibly before the writer sees its COMMIT return; the second covers the linger, the produce request, Kafka's acknowledgement and the consumer's fetch).
- *Kafka ack probe*: the benchmark's own produce requests of one small record (RequiredAcks all, every 20 ms, to a topic of its own), request to answer, in the window: the broker's share of *sink -> consumer*, the rest being the batch wait (linger), walrelay's one-request-in-flight queueing per partition, and the fetch.
- *PostgreSQL checkpoints*: checkpoints started in the window (pg_stat_checkpointer on PostgreSQL 17 and later, pg_stat_bgwriter before); one after a neighbour's bulk load flushes its dirty pages while this benchmark runs.
- *other busy programs seen*: test binaries, walrelay and pg_recvlogical processes not of this benchmark, the Go compiler and linker, PostgreSQL autovacuum workers (one for this benchmark's own outbox table is to be expected: 60,000 inserts start an insert-driven vacuum), sampled every 0.5 s in the window; "none" means none of those ran beside it (a checkpoint or another kind of program can still load the machine: see *machine CPU busy*).
- *machine CPU busy*: /proc/stat over the window, every process on the machine (PostgreSQL, Kafka, walrelay, the benchmark's writer and consumer, anything else running).
- *cluster WAL MB/s*: pg_current_wal_lsn() over the window, every database's writes; *slot decoded / spilled*: pg_stat_replication_slots total_bytes and spill_bytes of the run's slot. A logical walsender reads and decodes all the cluster's WAL and reassembles every transaction of its database, not only the outbox's: other writers' traffic costs the relay's slot time too.
- Every committed message arrived (a missing one fails the benchmark); *duplicates* counts records read more than once.
`)
	benchenv.WriteReport(t, "latency.md", b.String())
}

// line is the report's sentence on the machine.
func (e environment) line() string {
	return fmt.Sprintf("Machine: %d CPUs (`nproc`), %s; PostgreSQL %s, Kafka %s, all on this machine; %s; %s. Load average before the run: %s (other work may share the machine).",
		e.cpus, e.cpuModel, e.postgres, e.kafka, e.goVersion, e.date, e.loadBefore)
}

// withRelayFlags prefixes a reproducing command's go test (after its
// "cd test && ") with the run's WALRELAY_BENCH_RELAY_FLAGS, if any.
func withRelayFlags(cmd string, flags []string) string {
	if len(flags) == 0 {
		return cmd
	}
	cd, rest, ok := strings.Cut(cmd, "cd test && ")
	if !ok {
		cd, rest = "", cmd
	} else {
		cd = cd + "cd test && "
	}
	return cd + "WALRELAY_BENCH_RELAY_FLAGS='" + strings.Join(flags, " ") + "' " + rest
}

// relaySetting says how walrelay ran, for a report.
func relaySetting(flags []string) string {
	if len(flags) == 0 {
		return "defaults (acks all, --kafka-linger 5ms)"
	}
	return "defaults plus `" + strings.Join(flags, " ") + "`"
}
