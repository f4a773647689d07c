//go:build bench

package drain

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/harness"
)

// Run indexes into result.runs and backlog.slots. pg_recvlogical runs
// first and again last: the first run of a shape reads WAL the others then
// find in the page cache, and the baseline is the faster of the two, so
// that order favours no one but the baseline.
const (
	runRecv = iota
	runDiscard
	runKafka
	runRecv2
	runCount
)

// result is one shape and payload, drained three times.
type result struct {
	shape        shape
	payload      int
	capped       bool
	walBytes     int64
	payloadBytes int64
	runs         [runCount]measure
	records      int64 // in the Kafka run's topic
}

func TestBenchDrain(t *testing.T) {
	pgURL, brokers := harness.Services(t)
	scale := benchScale(t)
	loadBefore := loadAverage()
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
	md := report(t, pgURL, brokers, scale, results, loadBefore+" before, "+loadAverage()+" after")
	t.Log("\n" + md)
	writeReport(t, md)
}

// drainShape loads one backlog and drains it with each of the four runs.
func drainShape(t *testing.T, pgURL, brokers string, s shape, payload int) result {
	ctx := context.Background()
	b := newBacklog(ctx, t, pgURL, brokers)
	began := time.Now()
	b.fill(ctx, t, s, payload)
	t.Logf("loaded %d rows (%d transactions) of ~%d B in %s: WAL %s..%s (%.1f MB)",
		s.rows(), s.txns, payload, time.Since(began).Round(time.Millisecond), b.start, b.end, float64(b.end-b.start)/1e6)
	r := result{shape: s, payload: payload, walBytes: int64(b.end - b.start), payloadBytes: b.payloadBytes}
	// A hang guard, not a target: far slower than any run should be.
	within := 5*time.Minute + time.Duration(s.rows())*5*time.Millisecond

	r.runs[runRecv] = runRecvlogical(ctx, t, b, b.slots[runRecv], within)
	r.runs[runDiscard] = runWalrelay(ctx, t, b, discardBin, b.slots[runDiscard], "drain_"+b.id+"_discard.{aggregate_type}", within)

	topic := "drain_" + b.id + ".bench"
	createTopic(ctx, t, brokers, topic)
	r.runs[runKafka] = runWalrelay(ctx, t, b, walrelayBin, b.slots[runKafka], "drain_"+b.id+".{aggregate_type}", within)
	r.runs[runRecv2] = runRecvlogical(ctx, t, b, b.slots[runRecv2], within)
	n, err := topicRecords(ctx, brokers, topic)
	harness.Must(t, err, "count the records of %s", topic)
	r.records = n
	switch {
	case n < int64(s.rows()):
		t.Errorf("topic %s holds %d records; want %d (messages are missing)", topic, n, s.rows())
	case n > int64(s.rows()):
		t.Logf("topic %s holds %d records for %d rows: %d duplicates", topic, n, s.rows(), n-int64(s.rows()))
	}
	for i, m := range r.runs {
		t.Logf("%-20s wall %6.2fs (start-up %.2fs)  %9.0f msg/s  cpu %6.2fs  rss %4d MiB  walsender cpu %6.2fs",
			runNames[i], m.wall.Seconds(), m.startup.Seconds(), float64(s.rows())/m.wall.Seconds(),
			m.cpu.Seconds(), m.maxRSS>>20, m.walsender.Seconds())
	}
	return r
}

var runNames = [runCount]string{"pg_recvlogical", "walrelay discarding", "walrelay to Kafka", "pg_recvlogical again"}

// benchScale is WALRELAY_BENCH_SCALE (default 1).
func benchScale(t *testing.T) float64 {
	v := os.Getenv("WALRELAY_BENCH_SCALE")
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("WALRELAY_BENCH_SCALE=%q: want a positive number", v)
	}
	return f
}

func payloadName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
