package leader_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// Fast settings for the tests: check timeout 160ms.
const (
	retryInterval = 250 * time.Millisecond
	checkInterval = 200 * time.Millisecond
	leaseTimeout  = time.Second
	// slack covers scheduling and round trips under -race.
	slack = 750 * time.Millisecond
)

// pgURL returns the rig's PostgreSQL URL, or ends the test: a skip under
// -short, a failure otherwise (CI must never pass by skipping).
func pgURL(t *testing.T) string {
	t.Helper()
	return rig.Env(t, "WALRELAY_TEST_PG_URL")
}

func uniqueSlot() string {
	return fmt.Sprintf("wrlead_%016x", rand.Uint64())
}

// term is one call of lead.
type term struct {
	ctx  context.Context
	at   time.Time
	fail chan error // a value sent here makes lead return it
}

// node is one Elector running in the background until the test ends.
type node struct {
	e     *leader.Elector
	terms chan term
	done  chan error // Run's result
	stop  context.CancelFunc
}

// active counts lead funcs running at once across the nodes that share it.
func startNode(t *testing.T, cfg leader.Config, reg prometheus.Registerer, active *atomic.Int32, hook func(*leader.Elector)) *node {
	t.Helper()
	e, err := leader.New(cfg, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatalf("New: got %v; want nil", err)
	}
	if hook != nil {
		hook(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{e: e, terms: make(chan term, 16), done: make(chan error, 1), stop: cancel}
	go func() { n.done <- e.Run(ctx, n.lead(t, active)) }()
	t.Cleanup(func() { n.shutdown(t) })
	return n
}

func (n *node) lead(t *testing.T, active *atomic.Int32) func(context.Context) error {
	return func(ctx context.Context) error {
		if got := active.Add(1); got != 1 {
			t.Errorf("lead funcs running at once: got %d; want 1", got)
		}
		defer active.Add(-1)
		if err := n.e.Check(); err != nil {
			t.Errorf("Check at the start of lead: got %v; want nil", err)
		}
		tm := term{ctx: ctx, at: time.Now(), fail: make(chan error, 1)}
		n.terms <- tm
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-tm.fail:
			return err
		}
	}
}

// shutdown cancels Run and waits for it: no goroutine outlives the test.
func (n *node) shutdown(t *testing.T) error {
	t.Helper()
	n.stop()
	select {
	case err := <-n.done:
		n.done <- err
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("Run did not return within 5s of cancel")
		return nil
	}
}

func (n *node) waitTerm(t *testing.T, within time.Duration) term {
	t.Helper()
	select {
	case tm := <-n.terms:
		return tm
	case <-time.After(within):
		t.Fatalf("lead not called within %s", within)
		return term{}
	}
}

func (n *node) noTerm(t *testing.T, during time.Duration) {
	t.Helper()
	select {
	case <-n.terms:
		t.Fatalf("lead called while another node leads")
	case <-time.After(during):
	}
}

func testConfig(url, slot string) leader.Config {
	return leader.Config{ConnString: url, Slot: slot, RetryInterval: retryInterval,
		CheckInterval: checkInterval, LeaseTimeout: leaseTimeout}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: got %v; want a connection", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestOneLeaderAndTakeover(t *testing.T) {
	url := pgURL(t)
	slot := uniqueSlot()
	var active atomic.Int32
	reg := prometheus.NewRegistry()
	a := startNode(t, testConfig(url, slot), reg, &active, nil)
	a.waitTerm(t, 5*time.Second)
	b := startNode(t, testConfig(url, slot), nil, &active, nil)
	b.noTerm(t, 3*retryInterval)
	if err := a.e.Check(); err != nil {
		t.Errorf("leader Check: got %v; want nil", err)
	}
	if err := b.e.Check(); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("standby Check: got %v; want ErrNotLeader", err)
	}
	if got := gauge(t, reg, "walrelay_leader"); got != 1 {
		t.Errorf("walrelay_leader while leading: got %v; want 1", got)
	}

	stopped := time.Now()
	if err := a.shutdown(t); err != nil {
		t.Errorf("Run after cancel: got %v; want nil", err)
	}
	tm := b.waitTerm(t, retryInterval+slack)
	t.Logf("takeover after the leader's ctx was cancelled: %s", tm.at.Sub(stopped))
	if err := a.e.Check(); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("old leader Check: got %v; want ErrNotLeader", err)
	}
	if err := b.e.Check(); err != nil {
		t.Errorf("new leader Check: got %v; want nil", err)
	}
	if got := gauge(t, reg, "walrelay_leader"); got != 0 {
		t.Errorf("walrelay_leader after stepping down: got %v; want 0", got)
	}
	if got := gauge(t, reg, "walrelay_leader_changes_total"); got != 2 {
		t.Errorf("walrelay_leader_changes_total: got %v; want 2", got)
	}
}

// lockBackend finds the backend holding slot's lock the way an operator
// would: by application_name and the key in pg_locks.
func lockBackend(t *testing.T, conn *pgx.Conn, slot string) int32 {
	t.Helper()
	ctx := context.Background()
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatalf("current_database: %v", err)
	}
	var pid int32
	err := conn.QueryRow(ctx, `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE a.application_name = 'walrelay-leader' AND l.locktype = 'advisory' AND l.granted
		  AND l.objsubid = 1 AND ((l.classid::int8 << 32) | l.objid::int8) = $1`,
		leader.LockKey(db, slot)).Scan(&pid)
	if err != nil {
		t.Fatalf("find the leader's lock backend: got %v; want its pid", err)
	}
	return pid
}

func TestLostLockConnection(t *testing.T) {
	url := pgURL(t)
	slot := uniqueSlot()
	conn := connect(t, url)
	// Not shared: the server frees the lock at once, so the new leader
	// may start before the old lead func has seen its cancellation.
	var activeA, activeB atomic.Int32
	a := startNode(t, testConfig(url, slot), nil, &activeA, nil)
	first := a.waitTerm(t, 5*time.Second)
	b := startNode(t, testConfig(url, slot), nil, &activeB, nil)
	b.noTerm(t, 2*retryInterval)

	pid := lockBackend(t, conn, slot)
	h, found, err := leader.FindHolder(context.Background(), conn, slot)
	if err != nil || !found || int32(h.PID) != pid || h.ApplicationName != leader.ApplicationName {
		t.Errorf("FindHolder: got %+v, %v, %v; want pid %d of %s", h, found, err, pid, leader.ApplicationName)
	}
	killed := time.Now()
	if _, err := conn.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatalf("pg_terminate_backend: %v", err)
	}
	select {
	case <-first.ctx.Done():
		t.Logf("leader's lead ctx cancelled %s after its lock backend was terminated", time.Since(killed))
	case <-time.After(checkInterval + slack):
		t.Fatalf("lead ctx not cancelled within %s of losing the lock", checkInterval+slack)
	}
	if err := a.e.Check(); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("old leader Check: got %v; want ErrNotLeader", err)
	}
	tm := b.waitTerm(t, retryInterval+checkInterval+slack)
	t.Logf("takeover after the lock backend was terminated: %s", tm.at.Sub(killed))
	a.noTerm(t, 2*retryInterval)
	if err := b.e.Check(); err != nil {
		t.Errorf("new leader Check: got %v; want nil", err)
	}
}

// A leader whose checks stall (the way a paused process's would) fails
// Check once its lease is over, before anything cancels its lead ctx.
func TestLeaseExpiresWithoutIO(t *testing.T) {
	url := pgURL(t)
	var frozen atomic.Bool
	thaw := make(chan struct{})
	hook := func(e *leader.Elector) {
		leader.SetBeforeCheck(e, func(ctx context.Context) {
			if frozen.Load() {
				select {
				case <-thaw:
				case <-ctx.Done():
				}
			}
		})
	}
	var active atomic.Int32
	a := startNode(t, testConfig(url, uniqueSlot()), nil, &active, hook)
	first := a.waitTerm(t, 5*time.Second)

	frozen.Store(true)
	froze := time.Now()
	deadline := froze.Add(leaseTimeout + slack)
	for a.e.Check() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	expired := time.Since(froze)
	if err := a.e.Check(); !errors.Is(err, leader.ErrLeaseExpired) {
		t.Fatalf("Check %s after the checks froze: got %v; want ErrLeaseExpired", expired, err)
	}
	t.Logf("Check failed %s after the checks froze (lease %s)", expired, leaseTimeout)
	if expired < leaseTimeout-checkInterval {
		t.Errorf("lease ended after %s; want no sooner than %s", expired, leaseTimeout-checkInterval)
	}
	if first.ctx.Err() != nil {
		t.Fatalf("lead ctx cancelled while the checks were frozen; want it live (no I/O happened)")
	}

	frozen.Store(false)
	close(thaw)
	select {
	case <-first.ctx.Done():
	case <-time.After(slack):
		t.Fatalf("lead ctx not cancelled within %s of the checks resuming with an expired lease", slack)
	}
	a.waitTerm(t, retryInterval+slack)
	if err := a.e.Check(); err != nil {
		t.Errorf("Check after leading again: got %v; want nil", err)
	}
}

func TestLeadErrorEndsRun(t *testing.T) {
	url := pgURL(t)
	slot := uniqueSlot()
	var active atomic.Int32
	a := startNode(t, testConfig(url, slot), nil, &active, nil)
	first := a.waitTerm(t, 5*time.Second)
	b := startNode(t, testConfig(url, slot), nil, &active, nil)
	b.noTerm(t, 2*retryInterval)

	boom := errors.New("boom")
	failed := time.Now()
	first.fail <- boom
	select {
	case err := <-a.done:
		a.done <- err
		if !errors.Is(err, boom) {
			t.Errorf("Run: got %v; want %v", err, boom)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Run did not return after lead failed")
	}
	if err := a.e.Check(); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("Check after Run returned: got %v; want ErrNotLeader", err)
	}
	tm := b.waitTerm(t, retryInterval+slack)
	t.Logf("takeover after lead failed: %s", tm.at.Sub(failed))
}

// A transient connection failure is retried, never returned.
func TestRunRetriesUnreachableServer(t *testing.T) {
	cfg := leader.Config{ConnString: "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=1",
		Slot: "s", RetryInterval: 50 * time.Millisecond}
	var active atomic.Int32
	n := startNode(t, cfg, nil, &active, nil)
	select {
	case err := <-n.done:
		t.Fatalf("Run returned %v while the server was unreachable; want it to keep trying", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := n.shutdown(t); err != nil {
		t.Errorf("Run after cancel: got %v; want nil", err)
	}
	if err := n.e.Check(); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("Check: got %v; want ErrNotLeader", err)
	}
}
