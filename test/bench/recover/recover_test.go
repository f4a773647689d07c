//go:build bench

package recover

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/bench/benchenv"
	"github.com/walrelay/walrelay/test/harness"
)

// gapRows is the gap, before WALRELAY_BENCH_SCALE.
const gapRows = 100000

// sampleInterval is how often a run's RSS and progress are read.
const sampleInterval = 20 * time.Millisecond

// measure is what one side cost.
type measure struct {
	rows       int           // rows it published (recover: read)
	wall       time.Duration // process start to done
	cpu        time.Duration // user + system (rusage)
	peakRSS    int64         // VmHWM, bytes
	duplicates int           // records repeating a message id, by the independent reader
	summary    string        // recover's summary line
}

func TestBenchRecover(t *testing.T) {
	pgURL, brokers := testkit.Services(t)
	rows := max(1000, int(gapRows*benchenv.Scale(t)))
	shape := harness.Bulk{Rows: rows, Aggregates: 1000, Types: []string{"order"}, Payload: 200, Batch: 1000}
	load := benchenv.LoadAverage()
	run := benchRun(t, shape)
	rec := benchRecover(t, shape)
	md := report(t, pgURL, brokers, shape, run, rec, load)
	t.Log("\n" + md)
	benchenv.WriteReport(t, "recover.md", md)
}

// benchRun streams the shape's rows with `walrelay run` from a slot made
// before they were written.
func benchRun(t *testing.T, shape harness.Bulk) measure {
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	f.WriteBulk(context.Background(), shape)
	end := f.CurrentLSN()
	r := f.Spawn(nil, "run")
	m := measure{rows: shape.Rows}
	began := time.Now()
	if exited := sampleUntil(t, r, &m, "the slot confirming "+end.String(), func() bool { return f.ConfirmedLSN() >= end }); exited {
		t.Fatalf("walrelay run exited before its slot confirmed %s:\n%s", end, r.Stderr.String())
	}
	m.wall = time.Since(began)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay run exit code after SIGTERM: %d; want 0", code)
	}
	usage(r, &m)
	m.duplicates = verify(t, f, 0)
	return m
}

// benchRecover publishes a tenth of the shape with `walrelay run`, loses the
// slot, writes the shape's rows and closes the gap with `walrelay recover
// --since` the time walrelay stopped.
func benchRecover(t *testing.T, shape harness.Bulk) measure {
	ctx := context.Background()
	f := harness.New(t, "order")
	f.WalrelayOK("init")
	r := f.Spawn(nil, "run")
	r.WaitStarted()
	before := shape
	before.Rows, before.Prefix = shape.Rows/10, f.ID+"-before"
	f.WriteBulk(ctx, before)
	f.WaitConfirmed(r, f.CurrentLSN(), 5*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("walrelay run exit code after SIGTERM: %d; want 0", code)
	}
	since := time.Now()
	f.PG.Exec("SELECT pg_drop_replication_slot($1)", f.Slot)
	f.WriteBulk(ctx, shape)

	rec := f.Spawn(nil, "recover", "--since", since.UTC().Format(time.RFC3339Nano))
	m := measure{rows: before.Rows + shape.Rows}
	began := time.Now()
	sampleUntil(t, rec, &m, "walrelay recover to exit", func() bool { return false })
	m.wall = time.Since(began)
	if code := rec.Wait(time.Second); code != 0 {
		t.Fatalf("walrelay recover exit code: %d; want 0\n%s", code, rec.Stderr.String())
	}
	usage(rec, &m)
	m.summary = summaryLine(rec.Stderr.String())
	m.duplicates = verify(t, f, before.Rows)
	return m
}

// sampleUntil samples the process's peak RSS every sampleInterval until
// done or until the process exits, which it reports; it fails the test
// after 10 minutes.
func sampleUntil(t *testing.T, r *harness.Relay, m *measure, what string, done func() bool) (exited bool) {
	t.Helper()
	poll.EventuallyEvery(t, 10*time.Minute, sampleInterval, what, func() (string, bool) {
		if rss, ok := peakRSS(r.Cmd.Process.Pid); ok {
			m.peakRSS = max(m.peakRSS, rss)
		}
		if done() {
			return "", true
		}
		exited = r.Exited()
		return "not yet", exited
	})
	return exited
}

// peakRSS is a running process's VmHWM: the peak of its own address space
// (rusage's maxrss would count the test's, see test/bench/drain).
func peakRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// usage fills m's CPU time from the exited process's rusage.
func usage(r *harness.Relay, m *measure) {
	if ru, ok := r.Cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}

// verify reads every record back with kcat, fails the test on a row
// missing or out of order, and returns the duplicates (at most
// maxDuplicates).
func verify(t *testing.T, f *harness.Fixture, maxDuplicates int) int {
	t.Helper()
	rep := f.Verify(f.OutboxRows())
	harness.AssertClean(t, rep, maxDuplicates)
	if t.Failed() {
		t.FailNow()
	}
	return rep.Duplicates
}

// summaryLine is recover's summary (its line starting "recovered slot").
func summaryLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "recovered slot") {
			return l
		}
	}
	return "(no summary line)"
}

// report is recover.md: how to reproduce it, the machine, the table and
// how to read it.
func report(t *testing.T, pgURL, brokers string, shape harness.Bulk, run, rec measure, load string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Recover: closing a gap from the outbox table\n\n")
	fmt.Fprintf(&b, "Reproduce: `make bench-recover` (`cd test && WALRELAY_BENCH_SCALE=%g go test -tags bench -run TestBenchRecover -count=1 -v ./bench/recover`)\n\n",
		benchenv.Scale(t))
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), PostgreSQL %s, Kafka %s (broker at %s), %s.\n\n",
		runtime.NumCPU(), benchenv.CPUModel(), benchenv.PGVersion(t, pgURL), benchenv.KafkaVersion(), brokers, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) before the runs: %s. Rows: %s.\n\n", load, shape)
	b.WriteString("| walrelay | rows | s | rows/s | duplicates | peak RSS MiB | CPU s |\n|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, m measure) {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.0f | %d | %d | %.2f |\n",
			name, m.rows, m.wall.Seconds(), float64(m.rows)/m.wall.Seconds(), m.duplicates, m.peakRSS>>20, m.cpu.Seconds())
	}
	row("run: the gap's rows streamed from a slot", run)
	row(fmt.Sprintf("recover --since: a %d-row gap and the %d rows of the margin before it", shape.Rows, shape.Rows/10), rec)
	fmt.Fprintf(&b, "\nrecover said: `%s`\n", rec.summary)
	b.WriteString(`
- run: ` + "`walrelay init`" + `, the rows, then ` + "`walrelay run`" + `, timed from its start until the slot confirmed the
  end of the load (confirmed within --confirm-interval, which the time includes).
- recover: ` + "`walrelay run`" + ` published a tenth as many rows first and stopped; the slot was dropped (lost), the
  gap's rows written, and ` + "`walrelay recover --since`" + ` the time walrelay stopped run, with the default --margin
  (1h), so the earlier tenth is read again: those are the duplicates. Timed from its start (preflight, leader
  lock, a slot with an exported snapshot) until it exited with every record acknowledged (acks=all).
- rows/s: rows over that wall time; duplicates: records repeating a message id, counted by an independent
  reader (kcat); peak RSS: VmHWM sampled every 20 ms; CPU s: the process's user + system time (rusage).
`)
	return b.String()
}
