//go:build bench

package drain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// pollInterval is how often a run's slot is read: the end of a walrelay run
// is known this late at most.
const pollInterval = 20 * time.Millisecond

// measure is what one run cost.
type measure struct {
	wall      time.Duration // process start to done
	startup   time.Duration // process start to "replication started" (walrelay only)
	cpu       time.Duration // the child's user + system time
	maxRSS    int64         // the child's peak RSS (VmHWM), bytes
	walsender time.Duration // CPU time of the walsender that served the run
	broker    time.Duration // CPU time of the Kafka broker during the run (walrelay runs)
	brokerJIT time.Duration // of it, its JIT compiler's (brokerJIT)
}

// child is one measured process, its output captured.
type child struct {
	cmd     *exec.Cmd
	out     *startWatch
	started time.Time
	done    chan struct{}
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.out = &startWatch{}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		c.cmd.Wait() //nolint:errcheck // read from ProcessState
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill() //nolint:errcheck // has exited already, normally
		<-c.done
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// usage fills m's CPU time from the exited child's rusage.
//
// The peak RSS is not taken from there: Go starts a child with
// clone(CLONE_VM|CLONE_VFORK), so until its exec the child runs in the
// test's own address space, and Linux folds that address space's high
// water mark into the child's ru_maxrss: it never reads below the test
// process's RSS (33 MiB after a load). sampleRSS reads VmHWM instead, the
// peak of the child's own, post-exec address space.
func (c *child) usage(m *measure) {
	ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return
	}
	m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleRSS raises m.maxRSS to the running child's VmHWM. Call it while
// the child runs, last just before it ends (or is stopped).
func (c *child) sampleRSS(m *measure) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return // exited meanwhile: the last sample stands
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m.maxRSS = max(m.maxRSS, kb<<10)
			}
			return
		}
	}
}

// tail is the last n lines the child printed.
func (c *child) tail(n int) string {
	lines := strings.Split(strings.TrimRight(c.out.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startWatch keeps a process's output and notes when it first logged that
// replication started.
type startWatch struct {
	mu  sync.Mutex
	b   bytes.Buffer
	at  time.Time
	hit bool
}

func (w *startWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hit && bytes.Contains(p, []byte(`"replication started"`)) {
		w.hit, w.at = true, time.Now()
	}
	return w.b.Write(p)
}

func (w *startWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *startWatch) startedAt() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at, w.hit
}

// slotWatch reads a slot's confirmed position and the CPU time of the
// walsender serving it, remembering the last CPU time it saw (the
// walsender's own ends with the run).
type slotWatch struct {
	db   *pgxpool.Pool
	slot string
	cpu  time.Duration
}

func (w *slotWatch) poll(ctx context.Context) (pglogrepl.LSN, error) {
	var confirmed string
	var pid *int32
	err := w.db.QueryRow(ctx, "SELECT confirmed_flush_lsn::text, active_pid FROM pg_replication_slots WHERE slot_name = $1",
		w.slot).Scan(&confirmed, &pid)
	if err != nil {
		return 0, fmt.Errorf("read slot %s: %w", w.slot, err)
	}
	if pid != nil {
		if cpu, ok := benchenv.ProcCPU(int(*pid)); ok {
			w.cpu = cpu
		}
	}
	return pglogrepl.ParseLSN(confirmed)
}

// runRecvlogical drains slot with pg_recvlogical up to end and times it.
func runRecvlogical(ctx context.Context, t *testing.T, b *backlog, slot string, within time.Duration) measure {
	t.Helper()
	return runToEnd(ctx, t, b, slot, within, "pg_recvlogical", recvlogical(), "-d", b.pgURL, "--start", "-S", slot, "-P", "pgoutput",
		"-o", "proto_version=1", "-o", "publication_names="+b.publication,
		"--endpos="+b.end.String(), "--no-loop", "-f", "/dev/null")
}

// runGoreader drains slot with goreader, the minimal pgoutput client, up
// to end and times it.
func runGoreader(ctx context.Context, t *testing.T, b *backlog, slot string, within time.Duration) measure {
	t.Helper()
	return runToEnd(ctx, t, b, slot, within, "goreader", goreaderBin,
		"-url", b.pgURL, "-slot", slot, "-publication", b.publication, "-endpos", b.end.String())
}

// runToEnd runs a client that exits by itself at the backlog's end (name,
// for the messages: bin with args) on slot, and times it.
func runToEnd(ctx context.Context, t *testing.T, b *backlog, slot string, within time.Duration, name, bin string, args ...string) measure {
	t.Helper()
	c := startChild(t, bin, args...)
	w := &slotWatch{db: b.db, slot: slot}
	var m measure
	deadline := time.Now().Add(within)
	for !c.exited() {
		c.sampleRSS(&m)
		if _, err := w.poll(ctx); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %s within %s:\n%s", name, b.end, within, c.tail(20))
		}
		sleepOrDone(c.done, pollInterval)
	}
	m.wall, m.walsender = time.Since(c.started), w.cpu
	if !c.cmd.ProcessState.Success() {
		t.Fatalf("%s: %s:\n%s", name, c.cmd.ProcessState, c.tail(20))
	}
	c.usage(&m)
	return m
}

// recvlogical is PostgreSQL 15's pg_recvlogical, or one on PATH.
func recvlogical() string {
	const debian = "/usr/lib/postgresql/15/bin/pg_recvlogical"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	return "pg_recvlogical"
}

// runWalrelay runs `bin run` on slot until the slot's confirmed position
// reaches the backlog's end, then stops it with SIGTERM.
func runWalrelay(ctx context.Context, t *testing.T, b *backlog, bin, slot, topicTemplate string, within time.Duration) measure {
	t.Helper()
	args := []string{
		"--postgres-url", b.pgURL, "--kafka-brokers", b.brokers,
		"--table", "public." + b.table, "--publication", b.publication, "--slot", slot,
		"--topic-template", topicTemplate}
	ms, broker, jit := runRelays(ctx, t, b, within, relayRun{bin: bin, slot: slot, args: args})
	ms[0].broker, ms[0].brokerJIT = broker, jit
	return ms[0]
}

// relayRun is one walrelay process of runRelays: its binary, the slot it
// reads and the flags of its `run` (a config file, say).
type relayRun struct {
	bin, slot string
	args      []string
}

// runRelays starts `run` of every relay at once, each with --metrics-addr
// off and --confirm-interval at the poll interval, and waits until the slot
// of each has confirmed the backlog's end; then it stops them all with
// SIGTERM. Each relay's wall time ends when its own slot confirmed the end.
// The broker's CPU time (and its JIT compiler's) is the whole group's, from
// the first start until the last slot confirmed.
func runRelays(ctx context.Context, t *testing.T, b *backlog, within time.Duration, runs ...relayRun) (ms []measure, broker, jit time.Duration) {
	t.Helper()
	brokerBefore, brokerKnown := benchenv.ProcCPU(kafkaPid)
	jitBefore := brokerJIT(kafkaPid)
	cs, ws := make([]*child, len(runs)), make([]*slotWatch, len(runs))
	ms, done := make([]measure, len(runs)), make([]bool, len(runs))
	for i, r := range runs {
		args := append([]string{"run"}, r.args...)
		// Confirm at the resolution the end is polled at: with the default
		// 250 ms a drain's end is rounded up to the next confirmation, a
		// quarter of a second on cells that drain in 1.3 s.
		args = append(args, "--metrics-addr", "", "--confirm-interval", pollInterval.String())
		cs[i], ws[i] = startChild(t, r.bin, append(args, relayFlags()...)...), &slotWatch{db: b.db, slot: r.slot}
	}
	deadline := time.Now().Add(within)
	for left := len(runs); left > 0; {
		for i, c := range cs {
			c.sampleRSS(&ms[i])
			pos, err := ws[i].poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case done[i]:
			case pos >= b.end:
				done[i], ms[i].wall = true, time.Since(c.started)
				left--
			case c.exited():
				t.Fatalf("walrelay on %s exited before confirming %s (at %s): %s\n%s", runs[i].slot, b.end, pos, c.cmd.ProcessState, c.tail(30))
			case time.Now().After(deadline):
				t.Fatalf("walrelay on %s confirmed %s after %s; want >= %s\n%s", runs[i].slot, pos, within, b.end, c.tail(30))
			}
		}
		if left > 0 {
			sleepOrDone(cs[0].done, pollInterval)
		}
	}
	if after, ok := benchenv.ProcCPU(kafkaPid); ok && brokerKnown {
		broker, jit = after-brokerBefore, brokerJIT(kafkaPid)-jitBefore
	}
	for i, c := range cs {
		ms[i].walsender = ws[i].cpu
		c.sampleRSS(&ms[i])
		if at, ok := c.out.startedAt(); ok {
			ms[i].startup = at.Sub(c.started)
		}
		c.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by the exit status below
	}
	for i, c := range cs {
		select {
		case <-c.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("walrelay on %s did not stop within 60s of SIGTERM:\n%s", runs[i].slot, c.tail(30))
		}
		if !c.cmd.ProcessState.Success() {
			t.Fatalf("walrelay on %s stopped with %s:\n%s", runs[i].slot, c.cmd.ProcessState, c.tail(30))
		}
		c.usage(&ms[i])
	}
	return ms, broker, jit
}

func sleepOrDone(done <-chan struct{}, d time.Duration) {
	select {
	case <-done:
	case <-time.After(d):
	}
}

// relayFlags are extra flags for every walrelay run, from
// WALRELAY_BENCH_RELAY_FLAGS (say "--max-in-flight-bytes 16777216"), for
// trying a setting; the report names them.
func relayFlags() []string {
	return strings.Fields(os.Getenv("WALRELAY_BENCH_RELAY_FLAGS"))
}

// kafkaPid is the rig's Kafka broker, whose CPU time the walrelay runs
// report: on this machine it shares the cores with the walsender.
var kafkaPid int
