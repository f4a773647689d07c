//go:build bench

package latency

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

// defaultRates are the writer's target rates, transactions per second
// (issue 7).
var defaultRates = []int{1000, 2500}

// ackHistogram is walrelay's commit-to-ack histogram (relay/metrics.go).
const ackHistogram = "walrelay_commit_to_ack_seconds"

// result is one rate's figures, one row of the table.
type result struct {
	rate       int
	window     time.Duration
	pace       pace
	messages   int // committed in all, warm-up and tail included
	hist       histogram
	within50ms float64
	consumer   []time.Duration // arrival - COMMIT return, for the window's messages
	stages     stages
	slow       string       // the window's seconds with consumer latencies over 50 ms
	around     surroundings // the machine, the cluster and Kafka in the window
	slotStats  slotStats
	duplicates int64
	reconnects int64         // the consumer's: each delays the records behind it
	cpu        time.Duration // walrelay's user + system time, start to SIGTERM
	ran        time.Duration // walrelay's run, start to exit
	peakRSS    int64         // bytes
}

func TestBenchLatency(t *testing.T) {
	window := max(10*time.Second, time.Duration(float64(60*time.Second)*benchenv.Scale(t)))
	flags := relayFlags()
	env := machine(t)
	var results []result
	for _, rate := range rates(t) {
		t.Run(fmt.Sprintf("%d_tx_per_s", rate), func(t *testing.T) {
			results = append(results, measure(t, rate, window, flags))
		})
	}
	if len(results) == 0 {
		t.Fatal("no rate was measured")
	}
	tables := render(results) + "\n" + renderStages(results)
	t.Logf("latency at steady load:\n%s", tables)
	writeReport(t, env, flags, window, tables)
}

// rates are the target rates: WALRELAY_BENCH_RATES (comma-separated, for
// experiments) or the issue's.
func rates(t *testing.T) []int { return ratesFrom(t, "WALRELAY_BENCH_RATES", defaultRates) }

// ratesFrom are the rates in the environment variable name
// (comma-separated), or otherwise if it is unset.
func ratesFrom(t *testing.T, name string, otherwise []int) []int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return otherwise
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			t.Fatalf("%s=%q: want positive integers, comma-separated", name, s)
		}
		out = append(out, r)
	}
	return out
}

// relayFlags are extra `walrelay run` flags from WALRELAY_BENCH_RELAY_FLAGS
// (space-separated, e.g. "--kafka-linger=1ms"), for experiments; the
// benchmark proper runs with none, that is with the defaults.
// partitionsEnv sets the partition count of the benchmark's topics:
// harness.Partitions (3) by default; issue 48 measured its producers on
// 12, the shape of a production topic.
const partitionsEnv = "WALRELAY_BENCH_PARTITIONS"

func benchPartitions(t *testing.T) int {
	s := os.Getenv(partitionsEnv)
	if s == "" {
		return harness.Partitions
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a partition count", partitionsEnv, s)
	}
	return n
}

func relayFlags() []string { return strings.Fields(os.Getenv("WALRELAY_BENCH_RELAY_FLAGS")) }

// measure runs one rate on a fresh outbox, slot and topic: warm-up, the
// measured window, and a tail, all at the same rate, so that every ack in
// the window happens under steady load.
func measure(t *testing.T, rate int, window time.Duration, flags []string) result {
	return measureWith(t, runSpec{rate: rate, window: window, flags: flags, payload: payload})
}

// runSpec is one rate's measure: what the writer writes and what else runs.
type runSpec struct {
	rate    int
	window  time.Duration
	flags   []string           // extra `walrelay run` flags
	payload func(n int) string // the n-th row's payload
	beside  *beside            // nil: nothing else runs
}

// beside is what a benchmark runs next to measure's relay and writer, on
// the same WAL (TestBenchSteady: pg_recvlogical on a slot of its own).
// start runs once the relay streams, before the writer begins, and returns
// the processes it started (not neighbours, for the window's watch); begin
// and end run at the measured window's start and end, just after its
// histogram scrapes, and fail the test if what they watch has died.
type beside struct {
	start      func(t *testing.T, f *harness.Fixture, relay *harness.Relay, metricsAddr string) []int
	begin, end func(t *testing.T)
}

// warmupFor is how long a run writes before its measured window.
func warmupFor(window time.Duration) time.Duration { return max(3*time.Second, window/12) }

func measureWith(t *testing.T, spec runSpec) result {
	rate, window, flags := spec.rate, spec.window, spec.flags
	warmup := warmupFor(window)
	const tail = time.Second
	total := int(int64(rate) * int64(warmup+window+tail) / int64(time.Second))

	f := harness.NewPartitioned(t, benchPartitions(t), "bench", "probe")
	f.WalrelayOK("init")
	addr := testkit.FreePort(t)
	// --status-interval is set back to its default (the fixture shortens it).
	started := time.Now()
	relay := f.Run(append([]string{"--metrics-addr", addr, "--status-interval", "10s"}, flags...)...)
	relay.WaitStarted()

	var own []int
	if spec.beside != nil {
		own = spec.beside.start(t, f, relay, addr)
	}

	pool := writerPool(t, f.PGURL)
	ids := newIDs()
	base := time.Now().Add(200 * time.Millisecond) // the consumer's readers connect meanwhile
	cons, err := startConsumer(f.Brokers, f.Topic("bench"), total, base, ids)
	testkit.Must(t, err, "start the consumer")
	t.Cleanup(cons.stop)

	pr := startProbe(f.Brokers, f.Topic("probe"))
	t.Cleanup(pr.end)

	w := newWriter(pool, f.Table, rate, total, base, ids, spec.payload)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failed test stops the writer
	writeErr := make(chan error, 1)
	go func() { writeErr <- w.run(ctx) }()

	before := scrapeAt(t, relay, addr, base.Add(warmup))
	if spec.beside != nil {
		spec.beside.begin(t)
	}
	watch := startWatch(t, f, pr, append(own, relay.Cmd.Process.Pid)...)
	after := scrapeAt(t, relay, addr, base.Add(warmup+window))
	if spec.beside != nil {
		spec.beside.end(t)
	}
	around := watch.end(t)
	testkit.Must(t, <-writeErr, "write")
	hist, err := after.since(before)
	testkit.Must(t, err, "histogram difference")
	// A minute without an arrival, not in all: a relay behind its writer
	// has a backlog to work off.
	if err := cons.waitAll(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := cons.foreign.Load(); n > 0 {
		t.Errorf("consumer read %d records of no message of this run", n)
	}
	cons.stop()

	stats := readSlotStats(t, f.DB, f.Slot)
	if code := relay.Stop(); code != 0 {
		t.Fatalf("walrelay run exited %d after SIGTERM; want 0", code)
	}
	ran := time.Since(started)
	within, err := hist.fractionWithin(.05)
	testkit.Must(t, err, "acks within 50 ms")
	res := result{
		rate: rate, window: window, messages: total, hist: hist, within50ms: within,
		pace:       w.pace(warmup, warmup+window),
		consumer:   consumerLatencies(w, cons, warmup, warmup+window),
		duplicates: cons.duplicates.Load(),
		reconnects: cons.reconnects.Load(),
		stages:     splitStages(w, cons, warmup, warmup+window),
		slow:       slowSeconds(w, cons, warmup, warmup+window, 50*time.Millisecond),
		around:     around,
		slotStats:  stats,
		ran:        ran,
	}
	res.cpu, res.peakRSS = usage(t, relay)
	return res
}

// writerPool opens the writer's connections up front, so that connecting
// is not part of the first transactions' latency.
func writerPool(t *testing.T, pgURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgURL)
	testkit.Must(t, err, "parse the postgres url")
	cfg.MaxConns, cfg.MinConns = writerConns, writerConns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	testkit.Must(t, err, "open the writer's pool")
	t.Cleanup(pool.Close)
	conns := make([]*pgxpool.Conn, 0, writerConns)
	for range writerConns {
		c, err := pool.Acquire(ctx)
		testkit.Must(t, err, "connect a writer")
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	return pool
}

// scrapeAt waits until at, checks that walrelay still runs and scrapes its
// commit-to-ack histogram.
func scrapeAt(t *testing.T, relay *harness.Relay, addr string, at time.Time) histogram {
	t.Helper()
	time.Sleep(time.Until(at))
	relay.Running()
	h, err := scrapeHistogram(addr, ackHistogram)
	testkit.Must(t, err, "scrape walrelay")
	return h
}

// consumerLatencies are arrival minus COMMIT return of the messages whose
// COMMIT returned in [from, to), sorted.
func consumerLatencies(w *writer, c *consumer, from, to time.Duration) []time.Duration {
	var out []time.Duration
	for n := range w.total {
		committed := w.committed[n]
		if committed < from || committed >= to {
			continue
		}
		if at, ok := c.arrival(n); ok {
			out = append(out, at-committed)
		}
	}
	slices.Sort(out)
	return out
}

// slotStats are the slot's decoding figures from pg_stat_replication_slots
// (PostgreSQL 14+), over the whole run: the walsender decodes every
// transaction of the database, the outbox's and everybody else's.
type slotStats struct {
	decodedBytes, spillBytes int64
}

func readSlotStats(t *testing.T, db *pgxpool.Pool, slot string) slotStats {
	t.Helper()
	var s slotStats
	err := db.QueryRow(context.Background(),
		"SELECT coalesce(total_bytes, 0), coalesce(spill_bytes, 0) FROM pg_stat_replication_slots WHERE slot_name = $1", slot).
		Scan(&s.decodedBytes, &s.spillBytes)
	testkit.Must(t, err, "read pg_stat_replication_slots for %s", slot)
	return s
}

// usage is walrelay's CPU time and peak RSS, from its exit status.
func usage(t *testing.T, relay *harness.Relay) (time.Duration, int64) {
	t.Helper()
	ru, ok := relay.Cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatalf("no rusage for walrelay on this platform")
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Maxrss * 1024 // Linux reports kilobytes
}
