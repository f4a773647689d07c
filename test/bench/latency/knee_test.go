//go:build bench

package latency

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// kneeRates are TestBenchKnee's steps, transactions per second (issue 20).
var kneeRates = []int{2500, 5000, 7500, 10000, 15000, 20000, 30000}

// kneeRatesEnv overrides kneeRates (comma-separated).
const kneeRatesEnv = "WALRELAY_BENCH_KNEE_RATES"

// TestBenchKnee steps the steady load up until one relay stops keeping up
// (issue 20): each step is TestBenchLatency's measure at one rate, and the
// steps end at the first rate where the commit-to-ack p99 is above 50 ms,
// or where the writer could not reach the rate (then PostgreSQL on this
// machine is the limit, not walrelay). Figures are reported, not asserted.
func TestBenchKnee(t *testing.T) {
	window := max(10*time.Second, time.Duration(float64(20*time.Second)*benchenv.Scale(t)))
	flags := relayFlags()
	env := machine(t)
	var results []result
	for _, rate := range ratesFrom(t, kneeRatesEnv, kneeRates) {
		var r result
		if !t.Run(fmt.Sprintf("%d_tx_per_s", rate), func(t *testing.T) { r = measure(t, rate, window, flags) }) {
			return // a run that did not complete has no figures to report
		}
		results = append(results, r)
		if !keptUp(r) || writerShort(r) {
			break
		}
	}
	t.Logf("steady-load knee, every column:\n%s\n%s", render(results), renderStages(results))
	t.Logf("%s\n%s", renderKnee(results), verdict(results))
	writeKneeReport(t, env, flags, window, results)
}

// keptUp is whether walrelay's commit-to-ack p99 was at most 50 ms. 50 ms
// being a bucket bound, that is exactly whether 99% of the window's acks
// were within it; a window without acks did not keep up.
func keptUp(r result) bool { return r.within50ms >= .99 }

// writerShort is whether the writer's COMMITs in the window fell below 95%
// of the rate asked for.
func writerShort(r result) bool { return r.pace.achieved < .95*float64(r.rate) }

// verdict is the steps' one-line conclusion, from the last step (the only
// one that may have stopped them) and the one before, naming the other busy
// programs seen beside the last: on a shared machine they may be its cause.
func verdict(results []result) string {
	last := results[len(results)-1]
	p99 := est(last.hist.quantile(.99))
	if last.around.neighbours != "none" {
		p99 += ", beside " + last.around.neighbours
	}
	switch {
	case writerShort(last) && !keptUp(last):
		return fmt.Sprintf("the writer's limit and walrelay's came together, not to be told apart here: asked for %d tx/s, the writer achieved %.0f; p99 was %s",
			last.rate, last.pace.achieved, p99)
	case writerShort(last):
		return fmt.Sprintf("the writer's limit (%.0f tx/s achieved, of %d asked for) came before walrelay's: at %.0f tx/s p99 was %s",
			last.pace.achieved, last.rate, last.pace.achieved, p99)
	case !keptUp(last) && len(results) == 1:
		return fmt.Sprintf("knee: below %d tx/s, the first rate measured; at %d tx/s p99 was %s", last.rate, last.rate, p99)
	case !keptUp(last):
		return fmt.Sprintf("knee: between %d and %d tx/s; at %d tx/s p99 was %s", results[len(results)-2].rate, last.rate, last.rate, p99)
	}
	return fmt.Sprintf("no knee up to %d tx/s, the last rate measured; there p99 was %s", last.rate, p99)
}

// renderKnee is the steps' table: the latency benchmark's figures that
// decide the knee and say where the time goes.
func renderKnee(results []result) string {
	var b strings.Builder
	b.WriteString("| target tx/s | achieved tx/s | commit-to-ack p50 | p99 | acks <= 50 ms | consumer p99 | COMMIT return -> sink p99 | sink -> consumer p99 | walrelay CPU µs/msg | walrelay % of a core | walsender µs/msg | walsender % of a core | machine CPU busy | other busy programs | walrelay peak RSS MB |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %.0f | %s | %s | %s | %s | %s | %s | %.1f | %.0f%% | %s | %s | %.0f%% | %s | %.0f |\n",
			r.rate, r.pace.achieved, est(r.hist.quantile(.5)), est(r.hist.quantile(.99)), percent(r.within50ms),
			ms(pick(r.consumer, .99)), ms(pick(r.stages.toSink, .99)), ms(pick(r.stages.toConsumer, .99)),
			float64(r.cpu.Microseconds())/float64(r.messages), 100*r.cpu.Seconds()/r.ran.Seconds(),
			orNA("%.1f", 1e6*r.around.walsender/r.pace.achieved), orNA("%.0f%%", 100*r.around.walsender),
			100*r.around.machineCPU, r.around.neighbours, float64(r.peakRSS)/(1<<20))
	}
	return b.String()
}

// percent shows a share as a percentage, NaN (no acks) as n/a.
func percent(share float64) string { return orNA("%.2f%%", 100*share) }

// orNA formats v, or shows n/a for a figure that could not be had (NaN).
func orNA(format string, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(format, v)
}

// writeKneeReport writes knee.md beside latency.md.
func writeKneeReport(t *testing.T, e environment, flags []string, window time.Duration, results []result) {
	t.Helper()
	scale := e.benchScaleSetting
	if scale == "" {
		scale = "1"
	}
	cmd := "WALRELAY_BENCH_SCALE=" + scale + " go test -tags bench -run TestBenchKnee -count=1 -timeout 60m -v ./bench/latency"
	if s := os.Getenv(kneeRatesEnv); s != "" {
		cmd = kneeRatesEnv + "=" + s + " " + cmd
	}
	cmd = "cd test && " + cmd // the benchmarks are the test module's
	var b strings.Builder
	b.WriteString("## Steady-load knee (issue 20)\n\n")
	fmt.Fprintf(&b, "Reproduce (rig running, `eval \"$(scripts/rig.sh env)\"`): `%s`\n\n", withRelayFlags(cmd, flags))
	b.WriteString(e.line() + "\n\n")
	fmt.Fprintf(&b, "The latency benchmark's run (a fresh outbox, slot and 3-partition topic; walrelay with %s; the paced writer "+
		"of single-row transactions on %d connections) at rising rates, a measured window of %s each, until walrelay's "+
		"commit-to-ack p99 is above 50 ms or the writer falls below 95%% of the rate. Load average after: %s.\n\n",
		relaySetting(flags), writerConns, window, benchenv.LoadAverage())
	b.WriteString(renderKnee(results))
	fmt.Fprintf(&b, "\n**%s.**\n", verdict(results))
	b.WriteString(`
- *commit-to-ack*: walrelay's histogram over the window, estimates within the bucket shown; *acks <= 50 ms* is
  exact, and below 99% exactly when p99 is above 50 ms. *consumer p99* is the cross-check from the writer's COMMIT
  return to the benchmark's consumer (see the latency benchmark's notes).
- Where the time goes: the consumer's p99 splits at walrelay's sink into *COMMIT return -> sink* (the walsender's
  decoding, the network, walrelay's reading and decoding) and *sink -> consumer* (the linger, the produce request,
  Kafka's acknowledgement, the fetch). The part that grows with the rate is the one falling behind. The CPU
  columns say why: a walsender near 100% of a core decodes as fast as one process can (PostgreSQL's limit);
  walrelay taking most of the machine would be walrelay's own; a stage behind while neither is busy but *machine
  CPU busy* is near 100% waits for a core shared with PostgreSQL's backends, Kafka, the writer and the consumer
  (and any *other busy programs*): the machine's limit, not walrelay's.
- *walrelay CPU*: its whole run (start-up, warm-up, window, tail) over every message of the step, and over the
  run's wall time. *walsender*: the process serving the slot, over the window only, per COMMIT returned in it
  (n/a if PostgreSQL's processes cannot be read here). *machine CPU busy*: every process on the machine.
  *other busy programs*: as in the latency benchmark, other test binaries, walrelay and pg_recvlogical processes,
  the Go toolchain, autovacuum, seen in the window.
- A writer below 95% of its target means PostgreSQL, with the writer's connections on this machine, could not
  commit faster; if walrelay still kept up there, its own knee lies above the rate the writer achieved.
`)
	benchenv.WriteReport(t, "knee.md", b.String())
}
