package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/faultproxy"
	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/pgserver"
)

// The tests of `walrelay recover` (issue 17): a slot lost to
// max_slot_wal_keep_size, a failover below PostgreSQL 17, a first start on
// an outbox half published by another relay, a recovery killed half-way,
// and what recover refuses. Each ends with the independent reader
// (harness.Verify) against the outbox table: nothing lost, every aggregate
// in order, and the duplicates counted against what the recovery re-read.

// defaultMargin is `walrelay recover`'s --margin default: it reads the rows
// that occurred up to this long before --since.
const defaultMargin = time.Hour

// A slot the server invalidates (max_slot_wal_keep_size) while Kafka is
// unreachable for walrelay: `walrelay run` stops with a line that names
// where the gap starts and the command that closes it; following it,
// `walrelay recover --since` publishes the rows from the table and
// `walrelay run` streams from the new slot. Nothing is lost; recover reads
// exactly the rows that occurred from --since minus the margin, so the
// duplicates are at most those, and the rows that occurred before that
// window are not published again.
func TestRecoverClosesTheGapOfALostSlot(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	// Segments of 16 MB and a keep size under one: a slot is lost as soon as
	// a checkpoint starts in a later segment than its restart_lsn's.
	srv := pgserver.Start(t, pgserver.Settings{"max_slot_wal_keep_size = 2MB"})
	_, brokers := testkit.Services(t)
	f := harness.NewWith(t, srv.URL("walrelay"), brokers, "order")
	stop, rounds := loseTheSlot(t, f)
	rows := f.OutboxRows()
	gap := len(f.Verify(rows).Lost)
	if gap == 0 {
		t.Fatalf("no row of %d missing from Kafka before the recovery: the test made no gap", len(rows))
	}
	window := followAdvice(t, f, stop)
	all := streamAndVerify(t, f, 200)
	t.Logf("lost slot: %d rows from %d load rounds (and %d that occurred long ago), %d of them in Kafka before the recovery, a gap of %d; recover's window held %d rows",
		len(rows)-oldRows, rounds, oldRows, len(rows)-gap, gap, window)
	harness.AssertClean(t, f.Verify(all), window)
}

// oldRows is how many rows TestRecoverClosesTheGapOfALostSlot writes that
// occurred long before the loss.
const oldRows = 50

// slotLoss is what the test saw of a slot's loss: walrelay's confirmed
// position and when the test first saw it there, and walrelay's stop line.
type slotLoss struct {
	confirmed   pglogrepl.LSN
	confirmedAt time.Time
	line        string
}

// loseTheSlot runs walrelay through the Kafka proxy under load, with
// oldRows rows that occurred two margins ago among the first, cuts Kafka
// off, invalidates the slot, and checks walrelay's stop: exit 1, a last
// line naming the loss, the confirmed position and `walrelay recover`. It
// returns what it saw and the load's rounds.
func loseTheSlot(t *testing.T, f *harness.Fixture) (slotLoss, int) {
	t.Helper()
	ctx := context.Background()
	f.WalrelayOK("init")
	link := kafkaLink(t)
	r := f.Run("--kafka-brokers", link.Addr(), "--shutdown-timeout", "2s")
	r.WaitStarted()
	f.WriteBulk(ctx, harness.Bulk{Rows: oldRows, Aggregates: oldRows, Types: []string{"order"}, OccurredAt: time.Now().Add(-2 * defaultMargin), Prefix: f.ID + "-old"})
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	wait := f.LoadUntil(loadCtx, harness.Load{Writers: 2, Rows: 100, MaxTxRows: 20, AggregatesPerWriter: 5, Types: []string{"order"}, Pause: 20 * time.Millisecond})
	time.Sleep(2 * time.Second) // the load streams through walrelay
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)

	link.Cut()
	var loss slotLoss
	loss.confirmed, loss.confirmedAt = settledConfirmation(t, f)
	lost := invalidateSlot(t, f)
	code := r.Wait(time.Minute)
	stopLoad()
	rounds, _ := wait()
	link.Close() //nolint:errcheck // only the listener's error; the port is free again
	loss.line = lastLine(r.Stderr.String())
	t.Logf("slot lost %s after walrelay last confirmed %s; walrelay stopped with: %s", lost.Sub(loss.confirmedAt).Round(time.Millisecond), loss.confirmed, loss.line)
	if code != 1 {
		t.Errorf("walrelay run exit code after its slot was lost: got %d; want 1", code)
	}
	for _, want := range []string{"lost", loss.confirmed.String(), "walrelay recover"} {
		if !strings.Contains(loss.line, want) {
			t.Errorf("walrelay run's last line: want %q in it (the slot is lost, where the gap starts, what to do):\n%s", want, loss.line)
		}
	}
	return loss, rounds
}

// followAdvice runs the `walrelay recover --since TIME` of walrelay's stop
// line, checks that TIME is no later than the test saw the slot confirm,
// and that recover read every row that occurred from TIME minus the margin,
// and returns how many those were.
func followAdvice(t *testing.T, f *harness.Fixture, loss slotLoss) int {
	t.Helper()
	advice := regexp.MustCompile("walrelay recover --since (\\S+)").FindStringSubmatch(loss.line)
	if advice == nil {
		t.Fatalf("walrelay run's last line: want `walrelay recover --since TIME` in it:\n%s", loss.line)
	}
	since, err := time.Parse(time.RFC3339Nano, advice[1])
	testkit.Must(t, err, "parse the time of the advice %q", advice[0])
	if since.After(loss.confirmedAt) {
		t.Errorf("the advice's --since %s is after the test saw the slot confirm %s, at %s", advice[1], loss.confirmed, loss.confirmedAt.UTC().Format(time.RFC3339Nano))
	}
	window := f.CountSince(since.Add(-defaultMargin))
	summary := f.WalrelayOK("recover", "--since", advice[1])
	t.Logf("walrelay recover: %s", strings.TrimSpace(summary))
	if read := summaryCount(t, summary, "rows"); read != window {
		t.Errorf("recover read %d rows; want the %d that occurred since %s minus the margin", read, window, advice[1])
	}
	return window
}

// kafkaLink is a proxy to the rig's broker on the address its PROXIED
// listener is advertised at (test/faultproxy): walrelay given it as
// --kafka-brokers reaches Kafka only through it, and Cut makes Kafka
// unreachable for that walrelay alone. The address is the rig's one: only
// test/faults (run after everything else) and test/faultproxy's
// TestKafkaThroughProxy (for a fraction of a second) use it too, so a busy
// port is waited for a little.
func kafkaLink(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	var p *faultproxy.Proxy
	var err error
	poll.Until(10*time.Second, 100*time.Millisecond, func() bool {
		p, err = faultproxy.Start(rig.Env(t, "WALRELAY_TEST_KAFKA_PROXY"), rig.Env(t, "WALRELAY_TEST_KAFKA_PROXIED"))
		return err == nil
	})
	testkit.Must(t, err, "start the Kafka proxy")
	t.Cleanup(func() { p.Close() }) //nolint:errcheck // closed by the test already, normally; a second Close returns nil
	return p
}

// settledConfirmation waits until the fixture's slot has confirmed nothing
// new for 3 s and returns its confirmed position and when the test first
// saw it there: walrelay confirmed it at that time or up to a status
// interval before.
func settledConfirmation(t *testing.T, f *harness.Fixture) (pglogrepl.LSN, time.Time) {
	t.Helper()
	last, at := f.ConfirmedLSN(), time.Now()
	poll.EventuallyEvery(t, time.Minute, 100*time.Millisecond, "no confirmation for 3s", func() (string, bool) {
		if now := f.ConfirmedLSN(); now != last {
			last, at = now, time.Now()
		}
		return "confirmed " + last.String(), time.Since(at) >= 3*time.Second
	})
	return last, at
}

// invalidateSlot moves the server to new WAL segments and checkpoints until
// it reports the fixture's slot lost, and returns when it did.
func invalidateSlot(t *testing.T, f *harness.Fixture) time.Time {
	t.Helper()
	var status string
	poll.EventuallyEvery(t, time.Minute, 200*time.Millisecond, "wal_status lost", func() (string, bool) {
		f.PG.Exec("SELECT pg_switch_wal()")
		f.PG.Exec("CHECKPOINT")
		testkit.Must(t, f.DB.QueryRow(context.Background(), "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1", f.Slot).Scan(&status), "read wal_status")
		return "wal_status " + status, status == "lost"
	})
	return time.Now()
}

// streamAndVerify runs `walrelay run` until it has confirmed extra more
// rows written while it streams, stops it and returns every outbox row.
func streamAndVerify(t *testing.T, f *harness.Fixture, extra int) []harness.Row {
	t.Helper()
	r := f.Run()
	r.WaitStarted()
	_, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: extra, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order"}})
	testkit.Must(t, err, "write %d rows while walrelay streams", extra)
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	return f.OutboxRows()
}

// summaryCount reads the first number before what and a comma (say "rows"
// in "4493 rows, in order of ..." or "100000 rows read, ...") in recover's
// summary line.
func summaryCount(t *testing.T, summary, what string) int {
	t.Helper()
	m := regexp.MustCompile(`(\d+) ` + regexp.QuoteMeta(what) + `(?: read)?,`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("recover's summary %q: want \"N %s\" in it", summary, what)
	}
	n, err := strconv.Atoi(m[1])
	testkit.Must(t, err, "parse %q", m[1])
	return n
}

// A first start on an outbox whose older half another relay published
// already (the test writes those records to Kafka itself, as walrelay
// would): with no slot, `walrelay recover --since` the first unpublished
// row's occurred_at and no margin publishes exactly the other half while
// the application keeps writing, and `walrelay run` streams the rest from
// the slot recover made. Every row is in Kafka once, each aggregate in
// version order.
func TestRecoverFirstStartAfterAnotherRelay(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order", "customer")
	ctx := context.Background()
	f.WriteBulk(ctx, harness.Bulk{Rows: 10000, Aggregates: 100, Types: []string{"order", "customer"}, Payload: 100,
		OccurredAt: time.Now().Add(-time.Minute), Batch: 1000})
	rows := f.OutboxRows()
	sort.Slice(rows, func(i, j int) bool { return rows[i].OccurredAt.Before(rows[j].OccurredAt) })
	publishAsAnotherRelay(t, f, rows[:5000])
	if rep := f.Verify(rows[:5000]); len(rep.Lost) > 0 || rep.Duplicates > 0 || len(rep.Mismatches) > 0 {
		t.Fatalf("the other relay's records: %s; want the first 5000 rows exactly as walrelay publishes them", rep)
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	wait := f.LoadUntil(loadCtx, harness.Load{Writers: 2, Rows: 100, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order", "customer"}, Pause: 20 * time.Millisecond})
	began := time.Now()
	summary := f.WalrelayOK("recover", "--since", rows[5000].OccurredAt.UTC().Format(time.RFC3339Nano), "--margin", "0s")
	took := time.Since(began)
	t.Logf("walrelay recover (%s): %s", took.Round(time.Millisecond), strings.TrimSpace(summary))
	if read := summaryCount(t, summary, "rows"); read < 5000 {
		t.Errorf("recover read %d rows; want the 5000 unpublished ones and what the load committed before its snapshot", read)
	}
	r := f.Run()
	r.WaitStarted()
	time.Sleep(2 * time.Second) // the load streams through walrelay
	stopLoad()
	rounds, _ := wait()
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	rows = f.OutboxRows()
	rep := f.Verify(rows)
	t.Logf("first start: 10000 rows, 5000 published by another relay, %d written by %d load rounds during recover and run", len(rows)-10000, rounds)
	harness.AssertClean(t, rep, 0)
}

// publishAsAnotherRelay writes rows to Kafka as walrelay would (key, value,
// headers, topic, partition by murmur2 of the key), in the order given,
// with a client of its own: a relay that ran before walrelay.
func publishAsAnotherRelay(t *testing.T, f *harness.Fixture, rows []harness.Row) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(f.Brokers, ",")...), Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: 500, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	msgs := make([]kafka.Message, len(rows))
	for i, r := range rows {
		headers := []kafka.Header{{Key: "ce_specversion", Value: []byte("1.0")}, {Key: "ce_id", Value: []byte(r.ID)},
			{Key: "ce_type", Value: []byte(r.Type)}, {Key: "ce_source", Value: []byte("walrelay")}, {Key: "ce_subject", Value: []byte(r.AggregateID)},
			{Key: "ce_time", Value: []byte(r.OccurredAt.UTC().Format(time.RFC3339Nano))}, {Key: "content-type", Value: []byte("application/json")},
			{Key: "aggregate_type", Value: []byte(r.AggregateType)}}
		if r.Version != nil {
			headers = append(headers, kafka.Header{Key: "aggregate_version", Value: []byte(strconv.FormatInt(*r.Version, 10))})
		}
		msgs[i] = kafka.Message{Topic: f.ExpectedTopic(r), Key: []byte(r.AggregateID), Value: []byte(r.Payload), Headers: headers}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.Must(t, w.WriteMessages(ctx, msgs...), "publish %d rows as another relay", len(rows))
}

// `walrelay recover --all` killed with SIGKILL half-way through publishing
// 50,000 rows leaves its recovery pending, and `walrelay run` refuses to
// stream (rule "recovery"): the slot it made already lies past the rows it
// had not published yet. Run again, recover publishes every row; run
// streams on. Nothing is lost, and the duplicates are at most what the
// killed recovery had published.
func TestRecoverKilledHalfWayIsSafeToRunAgain(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	ctx := context.Background()
	const rows = 50000
	f.WriteBulk(ctx, harness.Bulk{Rows: rows, Aggregates: 500, Types: []string{"order"}, Payload: 100,
		OccurredAt: time.Now().Add(-10 * time.Minute), Batch: 10000})

	rec := f.Spawn(nil, "recover", "--all")
	poll.EventuallyEvery(t, 2*time.Minute, 20*time.Millisecond, "recover half-way (5000 records in Kafka)", func() (string, bool) {
		if rec.Exited() {
			t.Fatalf("walrelay recover ended before the test could kill it: %d rows are too few\n%s", rows, rec.Stderr.String())
		}
		n := f.Mark().Records()
		return fmt.Sprintf("%d records", n), n >= 5000
	})
	rec.Kill()
	// What the killed recovery published includes the produce requests it
	// had written before it died: the kernel still delivers them, and the
	// broker appends them a moment later. Count once the topics stand still.
	killed := settledRecords(t, f)
	if killed >= rows {
		t.Fatalf("the killed recovery had published %d records; want fewer than the %d rows (killed half-way)", killed, rows)
	}
	if pending := recoveryPending(t, f); !pending {
		t.Errorf("the recoveries table: got no pending recovery of slot %s after recover was killed; want one", f.Slot)
	}
	if got := statusTableExit(t, f, "a recovery is pending")["recovery"]; !strings.HasPrefix(got, "PENDING: a recovery of slot") || !strings.Contains(got, "every row") {
		t.Errorf("walrelay status, recovery: got %q; want it PENDING, of every row", got)
	}
	var st struct {
		Recovery *struct {
			Pending       bool    `json:"pending"`
			Since         *string `json:"since"`
			ConsistentLSN *string `json:"consistent_lsn"`
		} `json:"recovery"`
	}
	testkit.Must(t, json.Unmarshal([]byte(statusRun(t, f, "a recovery is pending", "--json")), &st), "parse walrelay status --json")
	if r := st.Recovery; r == nil || !r.Pending || r.Since != nil || r.ConsistentLSN == nil {
		t.Errorf("walrelay status --json, recovery: got %+v; want pending, since null (every row), a consistent_lsn", r)
	}

	if out, streamed := runRefuses(t, f); streamed {
		t.Errorf("walrelay run with a recovery pending streamed; want it to refuse (rule \"recovery\"):\n%s", out)
	} else if !strings.Contains(out, "is pending") || !strings.Contains(out, "walrelay recover") {
		t.Errorf("walrelay run with a recovery pending: want the rule saying the recovery is pending and to run `walrelay recover`:\n%s", out)
	}

	summary := f.WalrelayOK("recover", "--all")
	t.Logf("walrelay recover, again: %s", strings.TrimSpace(summary))
	if read := summaryCount(t, summary, "rows"); read != rows {
		t.Errorf("the second recover read %d rows; want all %d", read, rows)
	}
	if recoveryPending(t, f) {
		t.Errorf("the recoveries table: recovery of slot %s still pending after recover finished", f.Slot)
	}
	if got, want := statusTable(t, f)["recovery"], fmt.Sprintf(": %d published, 0 parked", rows); !strings.HasPrefix(got, "last finished at ") || !strings.HasSuffix(got, want) {
		t.Errorf("walrelay status, recovery: got %q; want last finished at ..%s", got, want)
	}
	all := streamAndVerify(t, f, 200)
	rep := f.Verify(all)
	t.Logf("killed half-way: the killed recovery had published %d of %d records", killed, rows)
	harness.AssertClean(t, rep, killed)
}

// settledRecords is the records in the fixture's topics once two counts
// 500 ms apart agree.
func settledRecords(t *testing.T, f *harness.Fixture) int {
	t.Helper()
	last := int64(-1)
	var n int64
	poll.EventuallyEvery(t, 30*time.Second, 500*time.Millisecond, "the topics to stand still", func() (string, bool) {
		n = f.Mark().Records()
		settled := n == last
		last = n
		return fmt.Sprintf("%d records", n), settled
	})
	return int(n)
}

// runRefuses runs `walrelay run` until it exits or streams, and returns its
// output and whether it streamed (then it is stopped). An exit other than
// 1 fails the test.
func runRefuses(t *testing.T, f *harness.Fixture) (out string, streamed bool) {
	t.Helper()
	run := f.Spawn(nil, "run")
	poll.Eventually(t, time.Minute, "walrelay run to exit or stream", func() (string, bool) {
		streamed = strings.Contains(run.Stderr.String(), `"replication started"`)
		return "neither yet", streamed || run.Exited()
	})
	if streamed {
		run.Kill()
		return run.Stderr.String(), true
	}
	if code := run.Wait(time.Second); code != 1 {
		t.Errorf("walrelay run exit code: got %d; want 1", code)
	}
	return run.Stderr.String(), false
}

// recoveryPending reads whether the fixture's slot has a pending recovery
// in the recoveries table (beside the outbox table: <table>_recoveries).
func recoveryPending(t *testing.T, f *harness.Fixture) bool {
	t.Helper()
	var pending bool
	err := f.DB.QueryRow(context.Background(), `SELECT count(*) > 0 FROM `+f.Table+`_recoveries WHERE slot_name = $1 AND finished_at IS NULL`, f.Slot).Scan(&pending)
	testkit.Must(t, err, "read the recoveries table")
	return pending
}

// `walrelay recover` refuses while `walrelay run` leads the slot, and
// refuses to replace a slot that is still usable unless told why with
// --force: the reason is kept in the recoveries table, and nothing is lost
// across the replacement.
func TestRecoverRefusesALeaderAndAUsableSlot(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	r := f.Start()
	r.WaitStarted()
	_, err := f.Write(context.Background(), harness.Load{Writers: 2, Rows: 200, MaxTxRows: 10, AggregatesPerWriter: 5, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), time.Minute)
	confirmed := f.ConfirmedLSN()

	_, stderr, code := f.Walrelay("recover", "--since", "10m")
	t.Logf("walrelay recover while walrelay run leads: exit %d: %s", code, lastLine(stderr))
	if code == 0 || !strings.Contains(stderr, "another walrelay leads") {
		t.Errorf("walrelay recover while walrelay run leads the slot: exit %d; want a refusal that says another walrelay leads it:\n%s", code, stderr)
	}
	r.Running()
	if now := f.ConfirmedLSN(); now < confirmed {
		t.Errorf("slot confirmed_flush_lsn after the refused recover: %s; want the running relay's slot, at %s or later", now, confirmed)
	}
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay run exit code after SIGTERM: got %d; want 0", code)
	}
	stopped := f.ConfirmedLSN()

	_, stderr, code = f.Walrelay("recover", "--since", "10m")
	t.Logf("walrelay recover on a usable slot: exit %d: %s", code, lastLine(stderr))
	if code == 0 || !strings.Contains(stderr, "--force") {
		t.Errorf("walrelay recover on a usable slot without --force: exit %d; want a refusal that names --force:\n%s", code, stderr)
	}
	if now := f.ConfirmedLSN(); now != stopped {
		t.Errorf("slot confirmed_flush_lsn after the refused recover: %s; want the slot as it was, at %s", now, stopped)
	}

	const reason = "e2e: replace a usable slot"
	summary := f.WalrelayOK("recover", "--since", "10m", "--force", reason)
	t.Logf("walrelay recover --force: %s", strings.TrimSpace(summary))
	var forced string
	var finished bool
	err = f.DB.QueryRow(context.Background(), `SELECT coalesce(force_reason, ''), finished_at IS NOT NULL FROM `+f.Table+`_recoveries WHERE slot_name = $1`, f.Slot).Scan(&forced, &finished)
	testkit.Must(t, err, "read the recoveries table")
	if forced != reason || !finished {
		t.Errorf("the recoveries table: force_reason %q, finished %v; want %q, true", forced, finished, reason)
	}
	rows := streamAndVerify(t, f, 200)
	harness.AssertClean(t, f.Verify(rows), 200)
}

// Below PostgreSQL 17 no slot survives a failover: walrelay stops on the
// promoted standby (TestFailover), and `walrelay recover --since-message-id`
// the newest message already in Kafka, on the new primary, publishes what
// the old slot had not; walrelay run then streams from there. Nothing the
// new primary holds is lost. A switchover, not a crash: the standby is
// asynchronous, and only a clean stop ships it every row walrelay may have
// published.
func TestRecoverAfterFailoverWithoutFailoverSlots(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	if pgserver.Major() >= 17 {
		t.Skip("PostgreSQL 17 and later keep the slot through a failover (TestFailover); `make compat` runs this test on 14 to 16")
	}
	p := harness.NewPair(t, false)
	r, stopLoad := p.StartUnderLoad(t)
	time.Sleep(2 * time.Second) // the load streams through walrelay
	began, _ := p.Failover(t, "switchover")
	code := r.Wait(2 * time.Minute)
	rounds, failed := stopLoad()
	t.Logf("walrelay stopped %s after the switchover with: %s", time.Since(began).Round(time.Millisecond), lastLine(r.Stderr.String()))
	if code != 1 {
		t.Fatalf("walrelay run exit code after a failover without failover slots: got %d; want 1", code)
	}

	newest := newestPublished(t, p.F)
	summary := p.F.WalrelayOK("recover", "--since-message-id", newest)
	t.Logf("walrelay recover on the new primary: %s", strings.TrimSpace(summary))
	rows := streamAndVerify(t, p.F, 200)
	rep := p.F.Verify(rows)
	t.Logf("failover: %d rows on the new primary from %d load rounds (%d cut by the switchover)", len(rows), rounds, failed)
	harness.AssertClean(t, rep, len(rows))
}

// newestPublished is the message id of the newest row (by occurred_at) of
// the outbox that is in Kafka: the last message a consumer saw.
func newestPublished(t *testing.T, f *harness.Fixture) string {
	t.Helper()
	rows := f.OutboxRows()
	lost := map[string]bool{}
	for _, id := range f.Verify(rows).Lost {
		lost[id] = true
	}
	var newest harness.Row
	for _, r := range rows {
		if !lost[r.ID] && r.OccurredAt.After(newest.OccurredAt) {
			newest = r
		}
	}
	if newest.ID == "" {
		t.Fatalf("none of the %d rows is in Kafka", len(rows))
	}
	return newest.ID
}
