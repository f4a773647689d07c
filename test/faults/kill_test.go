//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/faultproxy"
	"github.com/walrelay/walrelay/test/harness"
)

// killTypes are the aggregate types (topics) of the kill tests.
var killTypes = []string{"order", "customer"}

// TestKillAtRandomMoments kills walrelay with SIGKILL at random moments
// (while it streams, and now and then while it starts up) under a load of
// concurrent writers, restarting it after each kill. After the load, the
// last relay drains: nothing is lost, no aggregate is out of order, and
// every duplicate repeats a message that was not confirmed when its fault
// hit. What a restart would publish again is skipped where its
// partition's log has it (--resume-from-kafka, on by default; issue 38),
// so at most 0.5% of the rows arrive twice. WALRELAY_KILL_SEED replays
// the moments of an earlier run.
func TestKillAtRandomMoments(t *testing.T) {
	parallel(t)
	killAtRandomMoments(t, true)
}

// TestKillAtRandomMomentsPublishingAgain is the same kill loop with
// --resume-from-kafka=false: every restart publishes again what the slot
// had not confirmed, and still loses nothing.
func TestKillAtRandomMomentsPublishingAgain(t *testing.T) {
	parallel(t)
	killAtRandomMoments(t, false)
}

func killAtRandomMoments(t *testing.T, resume bool) {
	began := time.Now()
	n := scale(t)
	seed := killSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	f := harness.New(t, killTypes...)
	w := newKillWitness(t, f)
	metrics := testkit.FreePort(t)
	flags := []string{"--metrics-addr", metrics, "--status-interval", "1s"}
	// Given either way, so that WALRELAY_RESUME_FROM_KAFKA=false (the
	// suite's run without it, for the figures before) leaves this pair be.
	flags = append(flags, fmt.Sprintf("--resume-from-kafka=%t", resume))
	r := f.Start(flags...)
	r.WaitStarted()

	// ~8,000 rows per scale from 4 writers, 1 to 100 rows a transaction
	// (about 50 on average): 40 transactions a writer, one a second, so the
	// writing lasts about 40 s per scale.
	load := harness.Load{Writers: 4, Rows: 8000 * n, MaxTxRows: 100, AggregatesPerWriter: 10, Types: killTypes, Pause: time.Second}
	writes := killWriteAsync(f, load)

	kills := 20 * n
	var faults []killFault
	var takeovers []time.Duration
	spawned := time.Now()
	for i := 1; i <= kills; i++ {
		var moment string
		if rng.IntN(5) == 0 {
			d := time.Duration(rng.Int64N(int64(time.Second)))
			time.Sleep(time.Until(spawned.Add(d)))
			moment = fmt.Sprintf("%s after spawn", d.Round(time.Millisecond))
		} else {
			r.WaitStarted()
			if i > 1 { // the first relay was spawned before the load
				takeovers = append(takeovers, time.Since(spawned))
			}
			d := time.Duration(rng.Int64N(int64(2 * time.Second)))
			time.Sleep(d)
			moment = fmt.Sprintf("streaming, %s after replication started", d.Round(time.Millisecond))
		}
		r.Running()
		inFlight := harness.Scrape(metrics, "walrelay_sink_in_flight_messages")
		r.Kill()
		faults = append(faults, killRecordFault(f, fmt.Sprintf("kill %d/%d (%s; sink in flight just before: %v)", i, kills, moment, inFlight)))
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		spawned = time.Now()
		r = f.Run(flags...)
	}
	killsTook := time.Since(began)
	testkit.Must(t, <-writes.done, "write outbox rows")
	end := f.CurrentLSN()
	catchUp := f.WaitConfirmed(r, end, time.Duration(3*n)*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code of the draining relay after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	t.Logf("%d kills (seed %d) in %s while %d rows were written in %s; the last relay confirmed %s %s after the last commit",
		kills, seed, killsTook.Round(time.Millisecond), writes.rows, writes.took.Round(time.Millisecond), end, catchUp.Round(time.Millisecond))
	t.Logf("takeover (spawn to replication started) of %d relays: %s", len(takeovers), killDurations(takeovers))
	rep := killVerify(t, f, w, faults, writes.rows, began)
	t.Logf("resume from Kafka %v: %d kills, %d rows, lost %d, duplicates %d (%.2f%%)",
		resume, kills, writes.rows, len(rep.Lost), rep.Duplicates, 100*float64(rep.Duplicates)/float64(max(1, writes.rows)))
	if resume && float64(rep.Duplicates) > 0.005*float64(writes.rows) {
		t.Errorf("%d duplicates over %d rows resuming from Kafka; want at most 0.5%%", rep.Duplicates, writes.rows)
	}
}

// TestKillAtFailpoints kills walrelay at each of its failpoints (a binary
// built with -tags failpoints), then runs a normal relay until it caught
// up: nothing is lost, no aggregate is out of order, and the duplicates are
// explained by the in-flight window at the kill.
func TestKillAtFailpoints(t *testing.T) {
	exclusive(t)
	t.Run("after-ack", func(t *testing.T) { killUnderLoad(t, "after-ack@3") })
	t.Run("after-status", func(t *testing.T) { killUnderLoad(t, "after-status@2") })
	t.Run("publish-mid-transaction", killMidTransaction)
	t.Run("keepalive-reply-in-flight", killAtKeepaliveReply)
	t.Run("reconnect", killAtReconnect)
}

// killUnderLoad arms spec in a relay started while writers commit.
func killUnderLoad(t *testing.T, spec string) {
	began := time.Now()
	n := scale(t)
	f := harness.New(t, killTypes...)
	w := newKillWitness(t, f)
	f.WalrelayOK("init")
	// 2,000 rows per scale, a transaction every 0.5 s per writer: about 5 s
	// of writing, so the failpoint hits in the middle of it.
	load := harness.Load{Writers: 4, Rows: 2000 * n, MaxTxRows: 100, AggregatesPerWriter: 10, Types: killTypes, Pause: 500 * time.Millisecond}
	writes := killWriteAsync(f, load)
	spawned := time.Now()
	r := f.RunEnv([]string{"WALRELAY_FAILPOINT=" + spec}, "--metrics-addr", testkit.FreePort(t))
	died := killExpectFailpoint(t, r, spec, spawned, 2*time.Minute)
	fault := killRecordFault(f, fmt.Sprintf("failpoint %s, %s after the relay was spawned", spec, died.Round(time.Millisecond)))
	testkit.Must(t, <-writes.done, "write outbox rows")
	killRecover(t, f)
	killVerify(t, f, w, []killFault{fault}, writes.rows, began)
}

// killMidTransaction kills the relay after it handed the 500th message of
// one 1,000-row transaction to the sink: between the BEGIN and the COMMIT
// as the stream sees it.
func killMidTransaction(t *testing.T) {
	began := time.Now()
	const spec, rows = "publish@500", 1000
	f := harness.New(t, killTypes...)
	w := newKillWitness(t, f)
	f.WalrelayOK("init")
	spawned := time.Now()
	r := f.RunEnv([]string{"WALRELAY_FAILPOINT=" + spec}, "--metrics-addr", testkit.FreePort(t))
	r.WaitStarted()
	killInsert(t, f, "big", rows)
	died := killExpectFailpoint(t, r, spec, spawned, 2*time.Minute)
	fault := killRecordFault(f, fmt.Sprintf("failpoint %s in one %d-row transaction, %s after the relay was spawned", spec, rows, died.Round(time.Millisecond)))
	if got := fault.mark.Records(); got > 500 {
		t.Errorf("records in Kafka at the kill = %d; want at most 500 (the relay handed 500 messages to the sink)", got)
	}
	killRecover(t, f)
	killVerify(t, f, w, []killFault{fault}, rows, began)
}

// killAtKeepaliveReply kills the relay as it answers a keepalive that asked
// for a reply while messages are in flight: Kafka is reached through a
// stalled proxy, so nothing sent after the stall is acknowledged. A reply
// that confirmed the keepalive's WAL end would lose those messages.
func killAtKeepaliveReply(t *testing.T) {
	began := time.Now()
	// The second reply: the first comes about 1 s after the stream starts,
	// before the test can have stalled Kafka and written rows; it tells the
	// test that the next one is about 1 s away.
	const spec, rows = "keepalive-reply@2", 200
	f := harness.New(t, killTypes...)
	w := newKillWitness(t, f)
	f.WalrelayOK("init")
	p, err := faultproxy.Start(rig.Env(t, "WALRELAY_TEST_KAFKA_PROXY"), rig.Env(t, "WALRELAY_TEST_KAFKA_PROXIED"))
	testkit.Must(t, err, "start the Kafka proxy")
	t.Cleanup(func() { p.Close() }) //nolint:errcheck // closed below; a second Close returns nil

	// The server asks for a reply after wal_sender_timeout/2 = 1 s without
	// hearing from the client; status updates every 10 s leave that to the
	// keepalives.
	sep := "?"
	if strings.Contains(f.RelayURL, "?") {
		sep = "&"
	}
	pgURL := f.RelayURL + sep + "options=-c%20wal_sender_timeout%3D2s"
	metrics := testkit.FreePort(t)
	spawned := time.Now()
	r := f.RunEnv([]string{"WALRELAY_FAILPOINT=" + spec},
		"--postgres-url", pgURL, "--kafka-brokers", p.Addr(), "--status-interval", "10s", "--metrics-addr", metrics)
	r.WaitStarted()
	// One row per topic first, so that the sink has looked up both topics
	// through the proxy before it stalls.
	killInsert(t, f, "warm", 2)
	killWaitFor(t, r, 30*time.Second, "the two warm-up records in Kafka", func() bool { return f.Mark().Records() >= 2 })
	killWaitFor(t, r, 30*time.Second, "the first keepalive reply", func() bool {
		return harness.Scrape(metrics, "walrelay_last_status_update_timestamp_seconds") > 0
	})
	p.Stall()
	killInsert(t, f, "inflight", rows)
	inFlight := 0.0
	poll.Until(time.Minute, 20*time.Millisecond, func() bool {
		if r.Exited() {
			return true
		}
		if v := harness.Scrape(metrics, "walrelay_sink_in_flight_messages"); v > inFlight {
			inFlight = v
		}
		return false
	})
	died := killExpectFailpoint(t, r, spec, spawned, time.Minute)
	// Close, not Restore: a held produce request of the dead relay must not
	// reach Kafka after the mark.
	testkit.Must(t, p.Close(), "close the Kafka proxy")
	fault := killRecordFault(f, fmt.Sprintf("failpoint %s with Kafka stalled, %s after the relay was spawned; sink in flight before the kill: %v",
		spec, died.Round(time.Millisecond), inFlight))
	if inFlight <= 0 {
		t.Errorf("the sink's in-flight messages stayed at %v until the kill; want > 0 (the keepalive reply came before the rows were in flight)", inFlight)
	}
	killRecover(t, f)
	killVerify(t, f, w, []killFault{fault}, 2+rows, began)
}

// killAtReconnect restarts PostgreSQL under a relay that has streamed: its
// session fails, and the relay dies as it is about to start a new one.
func killAtReconnect(t *testing.T) {
	began := time.Now()
	const spec = "reconnect@1"
	n := scale(t)
	f := harness.New(t, killTypes...)
	w := newKillWitness(t, f)
	f.WalrelayOK("init")
	r := f.RunEnv([]string{"WALRELAY_FAILPOINT=" + spec}, "--metrics-addr", testkit.FreePort(t))
	r.WaitStarted()
	written, err := f.Write(context.Background(), harness.Load{Writers: 4, Rows: 1000 * n, MaxTxRows: 100, AggregatesPerWriter: 10, Types: killTypes})
	testkit.Must(t, err, "write outbox rows")
	restarted := time.Now()
	rig.Script(t, "pg.sh", "restart", "fast")
	f.DB.Reset() // the pool's connections died with the server
	died := killExpectFailpoint(t, r, spec, restarted, 2*time.Minute)
	fault := killRecordFault(f, fmt.Sprintf("failpoint %s, %s after PostgreSQL was restarted (fast)", spec, died.Round(time.Millisecond)))
	killRecover(t, f)
	killVerify(t, f, w, []killFault{fault}, written, began)
}

// killSeed is WALRELAY_KILL_SEED, or a new seed; either way it is logged.
func killSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WALRELAY_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		testkit.Must(t, err, "WALRELAY_KILL_SEED=%q", s)
		seed = v
	}
	t.Logf("random seed %d (WALRELAY_KILL_SEED=%d repeats these kill moments)", seed, seed)
	return seed
}

// killWrites is a load being committed in the background.
type killWrites struct {
	rows int           // rows committed; valid once done gave its error
	took time.Duration // how long the writing took; the same
	done chan error
}

// killWriteAsync commits l in the background.
func killWriteAsync(f *harness.Fixture, l harness.Load) *killWrites {
	w := &killWrites{done: make(chan error, 1)}
	go func() {
		start := time.Now()
		n, err := f.Write(context.Background(), l)
		w.rows, w.took = n, time.Since(start)
		w.done <- err
	}()
	return w
}

// killInsert commits count rows in one multi-row INSERT: aggregates
// prefix-0 ... prefix-9, each with versions 1, 2, 3, ... in insert order, in
// both topics.
func killInsert(t *testing.T, f *harness.Fixture, prefix string, count int) {
	t.Helper()
	_, err := f.DB.Exec(context.Background(), `INSERT INTO `+f.Table+`
		(message_id, aggregate_type, aggregate_id, aggregate_version, type, payload)
		SELECT gen_random_uuid(), CASE WHEN i % 2 = 0 THEN 'order' ELSE 'customer' END,
			$1 || '-' || (i % 10), (i - 1) / 10 + 1, 'order.submitted.v1', jsonb_build_object('i', i, 'note', 'kill -9')
		FROM generate_series(1, $2::int) AS i ORDER BY i`, prefix, count)
	testkit.Must(t, err, "insert %d %s rows", count, prefix)
}

// killWaitFor polls cond until it holds, failing the test after within or
// when the relay exits.
func killWaitFor(t *testing.T, r *harness.Relay, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Eventually(t, within, what, func() (string, bool) {
		if cond() {
			return "", true
		}
		r.Running()
		return "none; walrelay output:\n" + r.Stderr.String(), false
	})
}

// killExpectFailpoint waits for the relay to die and fails the test unless
// the failpoint spec (name@N) killed it. It returns how long after spawned
// the death was seen.
func killExpectFailpoint(t *testing.T, r *harness.Relay, spec string, spawned time.Time, within time.Duration) time.Duration {
	t.Helper()
	r.Wait(within)
	lived := time.Since(spawned)
	ws, ok := r.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("walrelay with WALRELAY_FAILPOINT=%s ended with %s; want death by SIGKILL\n%s", spec, r.Cmd.ProcessState, r.Stderr.String())
	}
	if line := "failpoint " + spec + ": killing walrelay"; !strings.Contains(r.Stderr.String(), line) {
		t.Fatalf("stderr lacks %q\n%s", line, r.Stderr.String())
	}
	return lived
}

// killRecover runs a normal relay until the slot confirmed the current WAL
// position, then stops it with SIGTERM.
func killRecover(t *testing.T, f *harness.Fixture) {
	t.Helper()
	spawned := time.Now()
	r := f.Run()
	r.WaitStarted()
	takeover := time.Since(spawned)
	end := f.CurrentLSN()
	catchUp := f.WaitConfirmed(r, end, 3*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code of the recovering relay after SIGTERM = %d; want 0\n%s", code, r.Stderr.String())
	}
	t.Logf("recovery: a normal relay streamed %s after its spawn and confirmed %s %s later",
		takeover.Round(time.Millisecond), end, catchUp.Round(time.Millisecond))
}

// killFault is one kill and the state of Kafka and the slot right after it.
type killFault struct {
	what      string
	mark      harness.Mark  // end offsets once Kafka stopped moving
	late      int64         // records that landed after the first mark
	confirmed pglogrepl.LSN // the slot's confirmed_flush_lsn
	walEnd    pglogrepl.LSN // the server's WAL position
}

// killRecordFault marks Kafka right after a kill. No relay runs then, yet a
// produce request the dead process had sent may still be appended: the
// mark is read again until two reads agree (up to ~1 s), and the records
// that landed meanwhile are counted as late.
func killRecordFault(f *harness.Fixture, what string) killFault {
	fault := killFault{what: what, mark: f.Mark()}
	first := fault.mark.Records()
	for i := 0; i < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		m := f.Mark()
		if m.Records() == fault.mark.Records() {
			break
		}
		fault.mark = m
	}
	fault.late = fault.mark.Records() - first
	fault.confirmed = f.ConfirmedLSN()
	fault.walEnd = f.CurrentLSN()
	return fault
}

// killWitness is a second logical slot (test_decoding) on the fixture's
// database, made before any write. At the end it tells the end LSN of the
// transaction of every outbox row: the position the relay's slot confirms
// once the whole transaction is in Kafka.
type killWitness struct {
	t    *testing.T
	f    *harness.Fixture
	slot string
}

func newKillWitness(t *testing.T, f *harness.Fixture) *killWitness {
	t.Helper()
	w := &killWitness{t: t, f: f, slot: "witness_" + f.ID}
	_, err := f.DB.Exec(context.Background(), "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", w.slot)
	testkit.Must(t, err, "create the witness slot %s", w.slot)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f.DB.Exec(ctx, "SELECT pg_drop_replication_slot($1)", w.slot) //nolint:errcheck // best effort
	})
	return w
}

var killMessageID = regexp.MustCompile(`message_id\[uuid\]:'([0-9a-f-]{36})'`)

// ends maps each outbox message id to its transaction's end LSN. With the
// SQL interface, test_decoding's COMMIT row carries the transaction's end
// LSN (logical.c sets write_location to txn->end_lsn for the commit).
func (w *killWitness) ends() map[string]pglogrepl.LSN {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := w.f.DB.Query(ctx, `SELECT lsn::text, data FROM pg_logical_slot_peek_changes($1, NULL, NULL,
		'include-xids', '0', 'skip-empty-xacts', '1')`, w.slot)
	testkit.Must(w.t, err, "read the witness slot")
	defer rows.Close()
	prefix := "table public." + w.f.Table + ": INSERT: "
	ends := map[string]pglogrepl.LSN{}
	var open []string
	for rows.Next() {
		var lsnText, data string
		testkit.Must(w.t, rows.Scan(&lsnText, &data), "scan a witness change")
		switch {
		case data == "BEGIN":
			open = open[:0]
		case strings.HasPrefix(data, prefix):
			m := killMessageID.FindStringSubmatch(data)
			if m == nil {
				w.t.Fatalf("witness: no message_id in %q", data)
			}
			open = append(open, m[1])
		case strings.HasPrefix(data, "COMMIT"):
			lsn, err := pglogrepl.ParseLSN(lsnText)
			testkit.Must(w.t, err, "witness commit lsn")
			for _, id := range open {
				ends[id] = lsn
			}
			open = open[:0]
		}
	}
	testkit.Must(w.t, rows.Err(), "read the witness slot")
	return ends
}

// killVerify checks what every kill test promises and logs the figures: no
// row lost, none out of order; at each fault, everything the slot had
// confirmed was in Kafka; every duplicate repeats a row that was not
// confirmed at the fault it follows; and no more duplicates in all than the
// in-flight windows (rows in Kafka, not yet confirmed, at each fault).
func killVerify(t *testing.T, f *harness.Fixture, w *killWitness, faults []killFault, written int, began time.Time) harness.Report {
	t.Helper()
	rows := f.OutboxRows()
	if len(rows) != written {
		t.Fatalf("outbox holds %d rows; the test committed %d", len(rows), written)
	}
	rep := f.Verify(rows)
	ends := w.ends()
	for _, r := range rows {
		if _, ok := ends[r.ID]; !ok {
			t.Fatalf("the witness slot did not see row %s: cannot tell its transaction's end", r.ID)
		}
	}
	recs := map[harness.Position]string{} // where each record stands: its message id
	for topic := range killTopics(f, rows) {
		for _, rec := range f.ReadTopic(topic) {
			recs[harness.Position{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}] = rec.Headers["ce_id"]
		}
	}
	marks := make([]harness.Mark, len(faults))
	for i, fl := range faults {
		marks[i] = fl.mark
	}
	perFault, before := rep.ByFault(marks)
	windowTotal := 0
	for i, fl := range faults {
		window := killWindow(t, fl, recs, ends, rows)
		windowTotal += window
		t.Logf("fault %d: %s: records in Kafka %d (%d landed after the kill), slot confirmed %s, WAL at %s (%d bytes unconfirmed), in-flight window %d records, duplicates after it %d",
			i+1, fl.what, fl.mark.Records(), fl.late, fl.confirmed, fl.walEnd, uint64(fl.walEnd-fl.confirmed), window, perFault[i])
	}
	for _, pos := range rep.Repeats {
		i := killFaultOf(marks, pos)
		id := recs[pos]
		switch {
		case i < 0:
			t.Errorf("duplicate of %s at %s/%d@%d before the first fault", id, pos.Topic, pos.Partition, pos.Offset)
		case ends[id] <= faults[i].confirmed:
			t.Errorf("duplicate of %s at %s/%d@%d after fault %d: its transaction (end %s) was confirmed at the fault (%s), yet published again",
				id, pos.Topic, pos.Partition, pos.Offset, i+1, ends[id], faults[i].confirmed)
		}
	}
	t.Logf("%s: messages %d, delivered %d, faults %d, lost %d, out of order %d, duplicates %d (%d before the first fault; in-flight windows %d), run time %s",
		t.Name(), rep.Expected, rep.Delivered, len(faults), len(rep.Lost), len(rep.OutOfOrder), rep.Duplicates, before, windowTotal,
		time.Since(began).Round(time.Millisecond))
	harness.AssertClean(t, rep, windowTotal)
	return rep
}

// killWindow counts the rows in Kafka at the fault whose transaction the
// slot had not confirmed: what a restart publishes again. It fails the test
// for every row confirmed at the fault that was not in Kafka then.
func killWindow(t *testing.T, fl killFault, recs map[harness.Position]string, ends map[string]pglogrepl.LSN, rows []harness.Row) int {
	t.Helper()
	in := map[string]bool{}
	for pos, id := range recs {
		if pos.Offset < fl.mark[harness.Position{Topic: pos.Topic, Partition: pos.Partition}] {
			in[id] = true
		}
	}
	window := 0
	var missing []string
	for _, r := range rows {
		switch {
		case ends[r.ID] > fl.confirmed && in[r.ID]:
			window++
		case ends[r.ID] <= fl.confirmed && !in[r.ID]:
			missing = append(missing, r.ID+" (end "+ends[r.ID].String()+")")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("%s: %d rows confirmed (slot at %s) but not in Kafka at the fault, first: %s",
			fl.what, len(missing), fl.confirmed, strings.Join(missing[:min(5, len(missing))], ", "))
	}
	return window
}

// killFaultOf is the index of the last fault marked before pos was written,
// as Report.ByFault counts it; -1 before the first.
func killFaultOf(marks []harness.Mark, pos harness.Position) int {
	key := harness.Position{Topic: pos.Topic, Partition: pos.Partition}
	return sort.Search(len(marks), func(i int) bool { return marks[i][key] > pos.Offset }) - 1
}

func killTopics(f *harness.Fixture, rows []harness.Row) map[string]bool {
	topics := map[string]bool{}
	for _, r := range rows {
		topics[f.ExpectedTopic(r)] = true
	}
	return topics
}

// killDurations summarises durations: min, median, max.
func killDurations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("min %s, median %s, max %s", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}
