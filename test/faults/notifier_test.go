//go:build faults

package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/examples/mailsink/smtpsink"
	"github.com/walrelay/walrelay/examples/orderevents"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// The notifier test's figures.
const (
	notifyOrders      = 200
	notifyCommitKill  = "inbox-after-commit@30"        // the first notifier dies after its 30th inbox commit
	notifySendKill    = "notifier-after-send@15"       // the second after the 15th e-mail the sink accepted
	notifyRetryMin    = 100 * time.Millisecond         // --retry-min
	notifyRetryMax    = 2 * time.Second                // --retry-max
	notifyDownAtLeast = 3 * time.Second                // how long the mail server stays down at least
	notifyLease       = 5 * time.Second                // --lease: when a killed sender's task comes back
	notifyWithin      = 60 * time.Second               // bound of every wait
	notifyConsumerID  = "notifier"                     // both instances: one inbox identity
	notifyNotSent     = "confirmation e-mail not sent" // the notifier's log line for a failed attempt
	notifyDuplicate   = "duplicate message skipped"    // the inbox's log line for a duplicate
)

// TestNotifierExactlyOneEmail runs the example notifier (a failpoints build)
// against real PostgreSQL and Kafka while the relay publishes 200 orders:
// the mail server is down at first, the notifier is killed after an inbox
// commit and again after an SMTP send, and a second instance in another
// consumer group, with the same inbox consumer id, gets every message too.
// In the end every order has exactly one distinct e-mail (Message-ID), every
// task is sent, nothing was sent for an unknown order, and the only extra
// copies are the resends after the kill that followed a send.
func TestNotifierExactlyOneEmail(t *testing.T) {
	parallel(t)
	began := time.Now()
	f := harness.New(t, orderevents.AggregateType)
	relay := f.Start()
	env := notifySetup(t, f)
	relay.WaitStarted()
	orders := notifyWriteOrders(t, f, notifyOrders)

	// Mail is down: nothing listens on env.smtpAddr. A dies after its 30th
	// inbox commit, between the database commit and the offset commit.
	a1 := env.start("A1", env.groupA, notifyCommitKill)
	a1.WaitFailpoint(notifyCommitKill, notifyWithin)
	// A again, to die after a send, and B: the same messages in a second
	// group, under the same inbox consumer id.
	a2 := env.start("A2", env.groupA, notifySendKill)
	b := env.start("B", env.groupB, "")
	down := notifyWhileDown(t, env, orders, a2, b)

	sink, err := smtpsink.Start(env.smtpAddr)
	testkit.Must(t, err, "start the SMTP sink on %s", env.smtpAddr)
	t.Cleanup(func() { sink.Close() }) //nolint:errcheck // closed below; a second Close is a no-op
	a2.WaitFailpoint(notifySendKill, notifyWithin, b)
	a3 := env.start("A3", env.groupA, "")
	notifyWaitAllSent(t, env, a3, b)
	notifyWaitConsumed(t, f, env, a3, b)
	for _, p := range []*notifyProc{a3, b} {
		if code := p.Stop(); code != 0 {
			t.Errorf("%s exit code after SIGTERM = %d; want 0", p.Name, code)
		}
	}
	testkit.Must(t, sink.Close(), "close the SMTP sink")
	procs := []*notifyProc{a1, a2, a3, b}
	notifyVerify(t, env, orders, sink.Mails(), 1)
	notifySummary(t, env, orders, sink.Mails(), procs, down, began)
}

// notifyEnv is the notifier's world: its database, binary, groups and
// SMTP address.
type notifyEnv struct {
	t              *testing.T
	f              *harness.Fixture
	bin            string
	dbURL          string
	db             *pgxpool.Pool
	smtpAddr       string
	groupA, groupB string
}

// notifySetup creates the notifier's database and consumer group names
// (both removed in cleanup, after the notifiers are killed) and builds the
// notifier with failpoints.
func notifySetup(t *testing.T, f *harness.Fixture) *notifyEnv {
	t.Helper()
	e := &notifyEnv{t: t, f: f, smtpAddr: testkit.FreePort(t),
		groupA: "notifier_a_" + f.ID, groupB: "notifier_b_" + f.ID}
	kafkatest.DeleteGroupsAtCleanup(t, f.Brokers, e.groupA, e.groupB)
	e.dbURL, e.db = f.PG.CreateDatabase("nt_" + f.ID)
	var err error
	e.bin, err = harness.Build(t.TempDir(), "github.com/walrelay/walrelay/examples/notifier", "failpoints")
	testkit.Must(t, err, "build the notifier")
	return e
}

// start runs a notifier in group with the failpoint spec armed ("" for
// none).
func (e *notifyEnv) start(name, group, spec string) *notifyProc {
	e.t.Helper()
	var env []string
	if spec != "" {
		env = append(env, "WALRELAY_FAILPOINT="+spec)
	}
	return notifyStart(e.t, name, e.bin, env,
		"--postgres-url", e.dbURL, "--kafka-brokers", e.f.Brokers, "--topic", e.f.Topic(orderevents.AggregateType),
		"--group", group, "--consumer-id", notifyConsumerID, "--smtp-addr", e.smtpAddr,
		"--retry-min", notifyRetryMin.String(), "--retry-max", notifyRetryMax.String(),
		"--lease", notifyLease.String(), "--smtp-timeout", "2s", "--session-timeout", "6s",
		"--poll-interval", "100ms", "--log-level", "debug")
}

// notifyOrder is one order the test submitted.
type notifyOrder struct {
	id, email string
}

// notifyWriteOrders commits n orders through the outbox writer, ten per
// transaction, one order.submitted.v1 message each.
func notifyWriteOrders(t *testing.T, f *harness.Fixture, n int) map[string]notifyOrder {
	t.Helper()
	ctx := context.Background()
	w, err := outbox.New(outbox.Config{Table: schema.Table{Schema: "public", Name: f.Table}})
	testkit.Must(t, err, "outbox writer")
	orders := map[string]notifyOrder{}
	for first := 0; first < n; first += 10 {
		tx, err := f.DB.Begin(ctx)
		testkit.Must(t, err, "begin")
		var msgs []*outbox.Message
		for i := first; i < min(first+10, n); i++ {
			o := notifyOrder{id: fmt.Sprintf("ord-%s-%03d", f.ID, i), email: fmt.Sprintf("customer%03d@example.com", i)}
			orders[o.id] = o
			msgs = append(msgs, &outbox.Message{
				AggregateType: orderevents.AggregateType, AggregateID: o.id, AggregateVersion: 1, HasVersion: true,
				Type: orderevents.TypeSubmitted,
				Payload: orderevents.Submitted{OrderID: o.id, CustomerEmail: o.email, SubmittedAt: time.Now().UTC(),
					Items: []orderevents.Item{{SKU: "sku-" + strconv.Itoa(i%7), Quantity: 1 + i%3}}},
			})
		}
		testkit.Must(t, w.Write(ctx, tx, msgs...), "write outbox messages")
		testkit.Must(t, tx.Commit(ctx), "commit orders")
	}
	return orders
}

// notifyDown is what the test saw while the mail server was down.
type notifyDown struct {
	took        time.Duration // from the first notifier start after the kill to the sink's start
	attempts    int           // attempts recorded on the tasks then
	maxAttempts int
}

// notifyWhileDown waits until every order has its task and every task has
// failed at least twice (three attempts) for notifyDownAtLeast, then checks
// that the retries were controlled: every pending task carries its error,
// none was sent, and no task was tried more often than the backoff allows.
func notifyWhileDown(t *testing.T, e *notifyEnv, orders map[string]notifyOrder, procs ...*notifyProc) notifyDown {
	t.Helper()
	start := time.Now()
	notifyWait(t, notifyWithin, "every order's task tried 3 times while mail is down", procs, func() bool {
		var n, least int
		err := e.db.QueryRow(context.Background(), "SELECT count(*), coalesce(min(attempts), 0) FROM email_tasks").Scan(&n, &least)
		return err == nil && n == len(orders) && least >= 3 && time.Since(start) >= notifyDownAtLeast
	})
	rows, err := e.db.Query(context.Background(), `SELECT task_key, status, attempts, last_error IS NOT NULL,
		extract(epoch FROM now() - created_at) * 1000 FROM email_tasks`)
	testkit.Must(t, err, "read the tasks")
	defer rows.Close()
	d := notifyDown{took: time.Since(start)}
	bad := &notifyErrors{t: t}
	defer bad.done("tasks wrong while mail was down")
	for rows.Next() {
		var key, status string
		var attempts int
		var hasError bool
		var ageMs float64
		testkit.Must(t, rows.Scan(&key, &status, &attempts, &hasError, &ageMs), "scan a task")
		age := time.Duration(ageMs * float64(time.Millisecond))
		d.attempts += attempts
		d.maxAttempts = max(d.maxAttempts, attempts)
		switch limit := notifyMostAttempts(age); {
		case status != "pending":
			bad.errorf("task %s is %s while mail is down; want pending", key, status)
		case attempts < 2 || !hasError:
			bad.errorf("task %s: %d attempts, last_error set %v; want more than 1 attempt and the error", key, attempts, hasError)
		case attempts > limit:
			bad.errorf("task %s: %d attempts in %s; the backoff (%s doubling to %s, jitter in the upper half) allows %d",
				key, attempts, age.Round(time.Millisecond), notifyRetryMin, notifyRetryMax, limit)
		}
	}
	testkit.Must(t, rows.Err(), "read the tasks")
	return d
}

// notifyMostAttempts is how many attempts the backoff allows within age:
// attempt k+1 comes at least half the k-th delay (100ms, 200ms, ... capped
// at 2s) after attempt k. 5ms a delay covers rounding to milliseconds.
func notifyMostAttempts(age time.Duration) int {
	k, d, spent := 1, notifyRetryMin, time.Duration(0)
	for {
		spent += d/2 - 5*time.Millisecond
		if spent > age {
			return k
		}
		k++
		d = min(2*d, notifyRetryMax)
	}
}

// notifyWaitAllSent waits until every task is sent.
func notifyWaitAllSent(t *testing.T, e *notifyEnv, procs ...*notifyProc) {
	t.Helper()
	notifyWait(t, notifyWithin, "every task sent", procs, func() bool {
		var pending int
		err := e.db.QueryRow(context.Background(), "SELECT count(*) FROM email_tasks WHERE status <> 'sent'").Scan(&pending)
		return err == nil && pending == 0
	})
}

// notifyWaitConsumed waits until both consumer groups committed the end
// offset of every partition: each group has handled every message.
func notifyWaitConsumed(t *testing.T, f *harness.Fixture, e *notifyEnv, procs ...*notifyProc) {
	t.Helper()
	topic := f.Topic(orderevents.AggregateType)
	notifyWait(t, notifyWithin, "both groups at the end of "+topic, procs, func() bool {
		end := f.Mark()
		for _, g := range []string{e.groupA, e.groupB} {
			committed, err := kafkatest.Committed(context.Background(), f.Brokers, g, topic, []int{0, 1, 2})
			if err != nil {
				return false
			}
			for p, offset := range committed {
				if offset != end[harness.Position{Topic: topic, Partition: int32(p)}] {
					return false
				}
			}
		}
		return true
	})
}

// notifyMessageID is the Message-ID the notifier gives an order's e-mail
// (its package doc): a SHA-256 prefix of the task key.
func notifyMessageID(orderID string) string {
	sum := sha256.Sum256([]byte("order-confirmation/" + orderID))
	return "<" + hex.EncodeToString(sum[:16]) + "@notifier.walrelay.example>"
}

// notifyVerify checks the end state: one distinct e-mail per order, to its
// customer; every task sent, none for an unknown order; physical copies
// beyond one per order only from the kills after a send (sendKills); one
// inbox row per message.
func notifyVerify(t *testing.T, e *notifyEnv, orders map[string]notifyOrder, mails []smtpsink.Mail, sendKills int) {
	t.Helper()
	byID := map[string]notifyOrder{}
	for _, o := range orders {
		byID[notifyMessageID(o.id)] = o
	}
	bad := &notifyErrors{t: t}
	defer bad.done("e-mails or orders wrong")
	copies := map[string]int{}
	for _, m := range mails {
		o, ok := byID[m.MessageID]
		if !ok {
			bad.errorf("e-mail with Message-ID %q (subject %q) for no order of the test", m.MessageID, m.Subject)
			continue
		}
		copies[o.id]++
		if len(m.To) != 1 || m.To[0] != o.email {
			bad.errorf("e-mail for order %s went to %q; want [%s]", o.id, m.To, o.email)
		}
	}
	for id := range orders {
		if copies[id] == 0 {
			bad.errorf("order %s has no e-mail", id)
		}
	}
	if len(copies) != len(orders) {
		t.Errorf("distinct e-mails (Message-IDs) = %d; want %d, one per order", len(copies), len(orders))
	}
	if len(mails) < len(orders) || len(mails) > len(orders)+sendKills {
		t.Errorf("e-mails received = %d; want %d to %d (one per order, plus one resend per kill after a send)",
			len(mails), len(orders), len(orders)+sendKills)
	}
	notifyVerifyTasks(t, e, orders)
}

// notifyVerifyTasks: one sent task per order and none other; one inbox row
// per message.
func notifyVerifyTasks(t *testing.T, e *notifyEnv, orders map[string]notifyOrder) {
	t.Helper()
	ctx := context.Background()
	rows, err := e.db.Query(ctx, "SELECT order_id, status, recipient FROM email_tasks")
	testkit.Must(t, err, "read the tasks")
	defer rows.Close()
	bad := &notifyErrors{t: t}
	defer bad.done("tasks wrong")
	tasks := 0
	for rows.Next() {
		var id, status, to string
		testkit.Must(t, rows.Scan(&id, &status, &to), "scan a task")
		tasks++
		o, ok := orders[id]
		switch {
		case !ok:
			bad.errorf("task for unknown order %q", id)
		case status != "sent" || to != o.email:
			bad.errorf("task of order %s: %s to %s; want sent to %s", id, status, to, o.email)
		}
	}
	testkit.Must(t, rows.Err(), "read the tasks")
	if tasks != len(orders) {
		t.Errorf("tasks = %d; want %d", tasks, len(orders))
	}
	var applied int
	err = e.db.QueryRow(ctx, "SELECT count(*) FROM inbox_messages WHERE consumer_id = $1", notifyConsumerID).Scan(&applied)
	testkit.Must(t, err, "count the inbox rows")
	if applied != len(orders) {
		t.Errorf("inbox rows of consumer %s = %d; want %d, one per message", notifyConsumerID, applied, len(orders))
	}
}

// notifySummary logs the figures of the run.
func notifySummary(t *testing.T, e *notifyEnv, orders map[string]notifyOrder, mails []smtpsink.Mail, procs []*notifyProc, down notifyDown, began time.Time) {
	t.Helper()
	distinct := map[string]bool{}
	for _, m := range mails {
		distinct[m.MessageID] = true
	}
	var dups, failures int
	for _, p := range procs {
		out := p.Output()
		dups += strings.Count(out, notifyDuplicate)
		failures += strings.Count(out, notifyNotSent)
	}
	if dups < len(orders) {
		t.Errorf("duplicates recognised by the inbox = %d; want at least %d (every message reached both groups)", dups, len(orders))
	}
	t.Logf("orders %d, e-mails received %d (physical), distinct Message-IDs %d, duplicates recognised by the inbox %d, "+
		"send failures while mail was down %d (attempts recorded when it came up: %d, at most %d on one task, over %s), "+
		"kills 2 (%s, %s), run time %s",
		len(orders), len(mails), len(distinct), dups, failures, down.attempts, down.maxAttempts, down.took.Round(time.Millisecond),
		notifyCommitKill, notifySendKill, time.Since(began).Round(time.Millisecond))
}

// notifyWait polls cond until it holds, failing the test after within or
// when one of procs exits.
func notifyWait(t *testing.T, within time.Duration, what string, procs []*notifyProc, cond func() bool) {
	t.Helper()
	poll.EventuallyEvery(t, within, 100*time.Millisecond, what, func() (string, bool) {
		if cond() {
			return "", true
		}
		for _, p := range procs {
			p.Running()
		}
		return "none", false
	})
}

// notifyErrors reports the first few errors of one check, then how many
// more there were.
type notifyErrors struct {
	t *testing.T
	n int
}

const notifyErrorsShown = 5

func (e *notifyErrors) errorf(format string, args ...any) {
	e.t.Helper()
	if e.n++; e.n <= notifyErrorsShown {
		e.t.Errorf(format, args...)
	}
}

func (e *notifyErrors) done(what string) {
	e.t.Helper()
	if e.n > notifyErrorsShown {
		e.t.Errorf("... %d %s in all", e.n, what)
	}
}

// notifyProc is one running notifier.
type notifyProc = harness.Process

func notifyStart(t *testing.T, name, bin string, env []string, args ...string) *notifyProc {
	t.Helper()
	return harness.StartProcess(t, "notifier "+name, bin, env, args...)
}
