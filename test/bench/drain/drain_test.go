//go:build bench

package drain

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// Run indexes into result.runs and backlog.slots. pg_recvlogical runs
// first and again last: the first run of a shape reads WAL the others then
// find in the page cache, and the baseline is the faster of the two, so
// that order favours no one but the baseline. runPrev runs only with
// WALRELAY_BENCH_BASELINE (main_test.go).
const (
	runRecv    = iota
	runGo      // goreader, the minimal pgoutput client
	runDiscard // walrelay -tags walrelay_discard
	runKafka   // walrelay to Kafka
	runPrev    // walrelay to Kafka, built at WALRELAY_BENCH_BASELINE
	runRecv2
	runCount
)

// result is one shape and payload, drained in rounds of four runs.
type result struct {
	shape        shape
	payload      int
	capped       bool
	walBytes     int64
	payloadBytes int64
	runs         [runCount]measure   // each run's median round
	all          [][runCount]measure // every round, for the spread
	rounds       int
	records      int64 // in the Kafka run's topic
}

func TestBenchDrain(t *testing.T) {
	pgURL, brokers, scale, loadBefore := setUp(t)
	var results []result
	for _, s := range shapes {
		for _, p := range payloadSizes {
			scaled, capped := s.scaled(scale, p)
			t.Run(s.slug+"/"+payloadName(p), func(t *testing.T) {
				r := drainShape(t, pgURL, brokers, scaled, p)
				r.capped = capped
				results = append(results, r)
			})
		}
	}
	if len(results) == 0 {
		return
	}
	md := report(t, pgURL, brokers, scale, results, loadBefore+" before, "+benchenv.LoadAverage()+" after")
	t.Log("\n" + md)
	benchenv.WriteReport(t, "drain.md", md)
}

// drainShape loads one backlog and drains it with the four runs, in
// rounds: a short backlog (see roundsFor) is drained three times, each round
// through slots of its own, and each run's figures are those of its median
// round, so that a hiccup of the shared machine does not decide a ratio.
func drainShape(t *testing.T, pgURL, brokers string, s shape, payload int) result {
	ctx := context.Background()
	rounds := roundsFor(t, s, payload)
	b := newBacklog(ctx, t, pgURL, brokers, rounds*runCount)
	slot := func(round, run int) string { return b.slots[round*runCount+run] }
	began := time.Now()
	b.fill(ctx, t, s, payload)
	t.Logf("loaded %d rows (%d transactions) of ~%d B in %s: WAL %s..%s (%.1f MB); %d round(s)",
		s.rows(), s.txns, payload, time.Since(began).Round(time.Millisecond), b.start, b.end, float64(b.end-b.start)/1e6, rounds)
	settle(t)
	r := result{shape: s, payload: payload, walBytes: int64(b.end - b.start), payloadBytes: b.payloadBytes, rounds: rounds}
	// A hang guard, not a target: far slower than any run should be.
	within := 5*time.Minute + time.Duration(s.rows())*5*time.Millisecond

	var all [][runCount]measure
	for round := range rounds {
		var m [runCount]measure
		prefix := fmt.Sprintf("drain_%s_%d", b.id, round)
		m[runRecv] = runRecvlogical(ctx, t, b, slot(round, runRecv), within)
		m[runGo] = runGoreader(ctx, t, b, slot(round, runGo), within)
		m[runDiscard] = runWalrelay(ctx, t, b, discardBin, slot(round, runDiscard), prefix+"_discard.{aggregate_type}", within)
		for _, run := range []int{runKafka, runPrev} {
			bin := walrelayBin
			if run == runPrev {
				if prevBin == "" {
					continue
				}
				bin = prevBin
			}
			var n int64
			m[run], n = runToKafka(ctx, t, b, bin, slot(round, run), fmt.Sprintf("%s_%d", prefix, run), partitions, within)
			r.records = max(r.records, n)
		}
		m[runRecv2] = runRecvlogical(ctx, t, b, slot(round, runRecv2), within)
		for i, m := range m {
			if i == runPrev && prevBin == "" {
				continue
			}
			t.Logf("round %d %-20s wall %6.2fs (start-up %.2fs)  %9.0f msg/s  cpu %6.2fs  rss %4d MiB  walsender cpu %6.2fs  broker cpu %5.2fs (JIT %4.2fs)",
				round+1, runNames[i], m.wall.Seconds(), m.startup.Seconds(), float64(s.rows())/m.wall.Seconds(),
				m.cpu.Seconds(), m.maxRSS>>20, m.walsender.Seconds(), m.broker.Seconds(), m.brokerJIT.Seconds())
		}
		all = append(all, m)
	}
	r.runs = medianRuns(all)
	r.all = all
	return r
}

// roundsFor is how many times a backlog is drained: three times when its
// payload is under 500 MB (runs of a few seconds, where noise and
// walrelay's fixed costs weigh most), once otherwise.
// WALRELAY_BENCH_ROUNDS overrides it.
func roundsFor(t *testing.T, s shape, payload int) int {
	if v := os.Getenv("WALRELAY_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WALRELAY_BENCH_ROUNDS=%q: want a positive integer", v)
		}
		return n
	}
	if int64(s.rows())*int64(payload) < 500e6 {
		return 3
	}
	return 1
}

// medianRuns picks, for each run, the round with the median wall time.
// pg_recvlogical's two runs of a round stay together: the round is ranked
// by the faster of them, the baseline.
func medianRuns(all [][runCount]measure) (out [runCount]measure) {
	median := func(wall func(m [runCount]measure) time.Duration) [runCount]measure {
		sorted := slices.Clone(all)
		slices.SortFunc(sorted, func(a, b [runCount]measure) int { return cmp.Compare(wall(a), wall(b)) })
		return sorted[len(sorted)/2]
	}
	base := median(func(m [runCount]measure) time.Duration { return min(m[runRecv].wall, m[runRecv2].wall) })
	out[runRecv], out[runRecv2] = base[runRecv], base[runRecv2]
	for _, run := range []int{runGo, runDiscard, runKafka, runPrev} {
		out[run] = median(func(m [runCount]measure) time.Duration { return m[run].wall })[run]
	}
	return out
}

var runNames = [runCount]string{"pg_recvlogical", "goreader", "walrelay discarding", "walrelay to Kafka", "baseline to Kafka", "pg_recvlogical again"}

func payloadName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
