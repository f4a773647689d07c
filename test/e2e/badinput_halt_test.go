package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed: under halt, a
// record the topic refuses stops the relay before it, with the exact
// error, without a crash, without confirming past it and without a dead
// letter; once the topic's limit is raised, the relay delivers everything
// by itself, in order.
func TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "customer")
	orderTopic := f.Topic("order")
	f.CreateTopicWith(orderTopic, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: smallRecordLimit})
	metrics := testkit.FreePort(t)
	r := f.Start("--on-bad-message", "halt", "--metrics-addr", metrics)
	r.WaitStarted()

	b := newBook(t, f)
	before := b.commit(b.next("order", "O2"), b.next("customer", "C1"))
	f.WaitConfirmed(r, before, time.Minute)
	o1 := b.next("order", "O1")
	bad := b.next("order", "O1").withPayload(`{"blob": "` + strings.Repeat("x", 2048) + `"}`)
	badEnd := b.commitEnd(o1, bad, b.next("order", "O2"), b.next("customer", "C1"))
	b.commit(b.next("order", "O1"), b.next("order", "O2"), b.next("customer", "C1"))
	haltedAt := time.Now()

	// The halt names the refused message: its id, aggregate, position
	// (LSN#SEQ, the second row of its transaction) and Kafka's reason.
	halt := waitHaltLog(t, r)
	t.Logf("halt: walrelay logged: %s", halt)
	t.Logf("halt: the line before it: %s", firstOf(logLines(r, "relay session ended on error", "")))
	if !strings.Contains(halt, bad.id) {
		t.Errorf("halt log names messages %s; want the refused message %s (O1 v2)", b.describe(uuids(halt)), bad.id)
	}
	for what, want := range map[string]string{"reason": "Message Size Too Large", "topic": orderTopic, "aggregate": "O1"} {
		if !strings.Contains(halt, want) {
			t.Errorf("halt log lacks the refused message's %s %q", what, want)
		}
	}
	if at := positionIn(halt, 1); at <= before || at >= badEnd {
		t.Errorf("halt log names no position LSN#1 in the refused row's transaction (after %s, before %s); found %s", before, badEnd, at)
	}
	why := waitReadyzHalted(t, metrics)
	t.Logf("halt: GET /readyz: 503 %s", why)

	// While halted, the slot's confirmed position stays before the end of
	// the bad row's transaction: nothing past it is confirmed.
	var highest pglogrepl.LSN
	for time.Since(haltedAt) < 5*time.Second {
		r.Running()
		highest = max(highest, f.ConfirmedLSN())
		time.Sleep(200 * time.Millisecond)
	}
	if highest < before || highest >= badEnd {
		t.Errorf("slot confirmed_flush_lsn while halted: up to %s; want from %s (before the bad transaction) to below %s (the end of its commit record)",
			highest, before, badEnd)
	}
	if dead := deadLetters(t, f); len(dead) != 0 {
		t.Errorf("under halt: %d rows in the dead-letter table; want none", len(dead))
	}
	halts := strings.Count(r.Stderr.String(), "halted on a message walrelay cannot publish")
	t.Logf("halt: for %s the relay stayed up and halted %d times (a new session after a doubling backoff, as logged: retry_in %s); slot confirmed_flush_lsn stayed at most %s, below %s, the end of the bad row's transaction; dead-letter table empty",
		time.Since(haltedAt).Round(time.Millisecond), halts, strings.Join(retryIns(r.Stderr.String()), ", "), highest, badEnd)

	f.SetTopicConfig(orderTopic, "max.message.bytes", "1048588")
	fixed := time.Now()
	end := f.CurrentLSN()
	f.WaitConfirmed(r, end, 2*time.Minute)
	halts = strings.Count(r.Stderr.String(), "halted on a message walrelay cannot publish")
	rep := f.Verify(b.harnessRows(b.rows))
	// Each halted session may have published the rows of other partitions
	// before Kafka refused the bad one; the next session sends them again.
	harness.AssertClean(t, rep, halts*len(b.rows))
	if dead := deadLetters(t, f); len(dead) != 0 {
		t.Errorf("under halt: %d rows in the dead-letter table; want none", len(dead))
	}
	if resp := readyz(t, metrics); !strings.HasPrefix(resp, "200") {
		t.Errorf("/readyz after the fix: %s; want 200", resp)
	}
	t.Logf("halt: topic limit raised; the relay delivered everything by itself %s later (%d halts in all): %d rows, %d records, %d duplicates, in aggregate order",
		time.Since(fixed).Round(time.Millisecond), halts, len(b.rows), rep.Delivered, rep.Duplicates)
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay exit code after SIGTERM = %d; want 0", code)
	}
}

// waitHaltLog waits for the relay's first halt and returns its log line.
func waitHaltLog(t *testing.T, r *harness.Relay) string {
	t.Helper()
	return r.WaitLine("halted on a message walrelay cannot publish", time.Minute)
}

// positionIn is the LSN of the first position LSN#seq in line; 0 when
// there is none.
func positionIn(line string, seq int) pglogrepl.LSN {
	m := regexp.MustCompile(`([0-9A-F]+/[0-9A-F]+)#` + strconv.Itoa(seq) + `\b`).FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(m[1])
	if err != nil {
		return 0
	}
	return lsn
}

// retryIns is the retry_in of each halt the relay logged.
func retryIns(log string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`"retry_in":([0-9.]+)`).FindAllStringSubmatch(log, -1) {
		if secs, err := strconv.ParseFloat(m[1], 64); err == nil {
			out = append(out, time.Duration(secs*float64(time.Second)).Round(10*time.Millisecond).String())
		}
	}
	return out
}

// readyz is "<status code> <body>" of GET /readyz.
func readyz(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	testkit.Must(t, err, "GET /readyz")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testkit.Must(t, err, "read /readyz")
	return strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(string(body))
}

// waitReadyzHalted waits until /readyz answers 503 naming the halt (between
// the halted sessions) and returns the answer's body.
func waitReadyzHalted(t *testing.T, addr string) string {
	t.Helper()
	var last string
	poll.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, "/readyz 503 naming the halt", func() (string, bool) {
		last = readyz(t, addr)
		return "/readyz " + last, strings.HasPrefix(last, "503 ") && strings.Contains(last, "halted on a message walrelay cannot publish (--on-bad-message halt)")
	})
	return strings.TrimPrefix(last, "503 ")
}
