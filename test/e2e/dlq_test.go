package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// dlqEntry is the part of `walrelay dlq list --json` the test checks.
type dlqEntry struct {
	Position      string  `json:"position"`
	MessageID     *string `json:"message_id"`
	AggregateType *string `json:"aggregate_type"`
	AggregateID   *string `json:"aggregate_id"`
	PayloadBytes  *int    `json:"payload_bytes"`
	Undecodable   bool    `json:"undecodable"`
	Reason        string  `json:"reason"`
	BlockedBy     *string `json:"blocked_by"`
	Status        string  `json:"status"`
	DiscardReason *string `json:"discard_reason"`
}

// TestDLQVerbs drives the dead-letter verbs of the binary: init creates the
// table; list shows parked rows as a table and as JSON, never payloads;
// discard needs a reason; retry republishes an aggregate in order with its
// message ids and removes it, and leaves what it cannot publish.
func TestDLQVerbs(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	ctx := context.Background()
	table := schema.Table{Schema: "public", Name: f.Table + "_dead_letters"}
	dropDeadLetters(t, f, table)
	t.Cleanup(func() { f.DB.Exec(context.Background(), "DROP TABLE IF EXISTS "+table.Quoted()) }) //nolint:errcheck // best effort

	// init creates the table when its role may: here the tables' owner
	// (TestLeastPrivilegeRoleSaysWhatIsMissing covers the relay's role,
	// which may not). The owner then grants the relay's role its share.
	out := f.WalrelayOK("init", "--postgres-url", f.PGURL)
	if want := "dead-letter table " + table.String() + ", recoveries table "; !strings.Contains(out, want) {
		t.Errorf("init said %q; want it to contain %q", out, want)
	}
	var exists bool
	testkit.Must(t, f.DB.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table.String()).Scan(&exists), "look for %s", table)
	if !exists {
		t.Fatalf("after init: table %s does not exist; want it created", table)
	}
	err := harness.ExecGrants(ctx, f.DB, f.WalrelayOK("schema", "--grant-to", harness.RelayRole))
	testkit.Must(t, err, "grant %s its privileges", harness.RelayRole)

	st, err := dlq.New(f.DB, table)
	testkit.Must(t, err, "dead-letter store")
	a := []*schema.Message{e2eMessage(1, "A"), e2eMessage(2, "A"), e2eMessage(4, "A")}
	b, c := e2eMessage(3, "B"), []*schema.Message{e2eMessage(5, "C"), e2eMessage(6, "C")}
	parkAggregate(t, st, f.Topic("order"), a...)
	parkAggregate(t, st, f.Topic("order"), b)
	parkAggregate(t, st, f.Topic("order"), c...)
	bad := "{oops"
	undecodable := schema.DeadLetter{Position: schema.Position{CommitLSN: 0x5000700}, Reason: `column "aggregate_id": null`,
		Row: map[string]*string{"payload": &bad, "aggregate_id": nil}}
	if ok, err := st.Park(ctx, undecodable); err != nil || !ok {
		t.Fatalf("park the undecodable row: %v, %v", ok, err)
	}

	checkListTable(t, f, a, b, c)
	entries := listJSON(t, f)
	if len(entries) != 7 {
		t.Fatalf("dlq list --json: %d entries; want 7", len(entries))
	}
	aOnly := listJSON(t, f, "--aggregate", "order/A")
	if len(aOnly) != 3 {
		t.Fatalf("dlq list --aggregate order/A --json: %d entries; want 3", len(aOnly))
	}
	for i, e := range aOnly {
		if e.MessageID == nil || *e.MessageID != a[i].ID.String() || e.PayloadBytes == nil || *e.PayloadBytes != len(a[i].Payload) {
			t.Errorf("order/A entry %d: %+v; want message %s with payload_bytes %d", i, e, a[i].ID, len(a[i].Payload))
		}
		if (i > 0) != (e.BlockedBy != nil) || i > 0 && *e.BlockedBy != a[0].ID.String() {
			t.Errorf("order/A entry %d: blocked_by %v; want %s for all but the first", i, e.BlockedBy, a[0].ID)
		}
	}

	// discard without a reason is a usage error, and changes nothing.
	stdout, stderr, code := runDLQ(t, f, "discard", "--aggregate", "order/B")
	if code != 2 || !strings.Contains(stderr, "--reason is required") {
		t.Errorf("dlq discard without --reason: exit %d, stderr %q; want exit 2 and the usage", code, stderr)
	}
	if got := listJSON(t, f, "--aggregate", "order/B"); len(got) != 1 {
		t.Fatalf("after a refused discard: order/B has %d parked rows; want 1", len(got))
	}
	stdout, stderr, code = runDLQ(t, f, "discard", "--aggregate", "order/B", "--reason", "replaced by a corrected row")
	if code != 0 || !strings.Contains(stdout, "discarded 1 parked message") {
		t.Errorf("dlq discard: exit %d, stdout %q, stderr %q; want exit 0, one discarded", code, stdout, stderr)
	}
	discarded := listJSON(t, f, "--status", "discarded")
	if len(discarded) != 1 || discarded[0].Status != "discarded" || discarded[0].DiscardReason == nil ||
		*discarded[0].DiscardReason != "replaced by a corrected row" {
		t.Errorf("discarded rows: %+v; want order/B's message with the reason", discarded)
	}

	// one message that is not first in its aggregate is refused.
	_, stderr, code = runDLQ(t, f, "retry", "--message-id", c[1].ID.String())
	if code != 1 || !strings.Contains(stderr, "is not the first parked message of aggregate order/C") {
		t.Errorf("dlq retry of the second message of order/C: exit %d, stderr %q; want exit 1 and the refusal", code, stderr)
	}

	stdout, stderr, code = runDLQ(t, f, "retry", "--aggregate", "order/A")
	if code != 0 {
		t.Fatalf("dlq retry --aggregate order/A: exit %d; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("dlq retry --aggregate order/A:\n%s", stdout)
	checkRetryOutput(t, stdout, a)
	checkTopic(t, f, "A", a)
	if got := listJSON(t, f, "--aggregate", "order/A"); len(got) != 0 {
		t.Errorf("after the retry: order/A has %d parked rows; want 0", len(got))
	}

	stdout, stderr, code = runDLQ(t, f, "retry", "--all")
	t.Logf("dlq retry --all:\n%s%s", stdout, stderr)
	if code != 1 || !strings.Contains(stdout, "fix the data with a new outbox row, then discard this one") ||
		!strings.Contains(stdout, "2 published and removed, 1 left parked") {
		t.Errorf("dlq retry --all: exit %d, stdout:\n%s\nwant exit 1, order/C published and the undecodable row left", code, stdout)
	}
	checkTopic(t, f, "C", c)
	if left := listJSON(t, f); len(left) != 1 || !left[0].Undecodable {
		t.Errorf("parked after retry --all: %+v; want the undecodable row alone", left)
	}
}

// dropDeadLetters removes the table `walrelay schema` created, so that the
// test sees init create it.
func dropDeadLetters(t *testing.T, f *harness.Fixture, table schema.Table) {
	t.Helper()
	_, err := f.DB.Exec(context.Background(), "DROP TABLE "+table.Quoted())
	testkit.Must(t, err, "drop %s", table)
}

// runDLQ runs `walrelay dlq SUB` with the fixture's flags and returns
// stdout, stderr and the exit code.
func runDLQ(t *testing.T, f *harness.Fixture, sub string, extra ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := f.Command(ctx, nil, append([]string{"dlq", sub}, extra...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("run walrelay dlq %s: %v", sub, err)
	}
	return stdout.String(), stderr.String(), 0
}

func listJSON(t *testing.T, f *harness.Fixture, extra ...string) []dlqEntry {
	t.Helper()
	stdout, stderr, code := runDLQ(t, f, "list", append([]string{"--json"}, extra...)...)
	if code != 0 {
		t.Fatalf("dlq list --json %v: exit %d; want 0\n%s", extra, code, stderr)
	}
	var es []dlqEntry
	if err := json.Unmarshal([]byte(stdout), &es); err != nil {
		t.Fatalf("parse dlq list --json: %v\n%s", err, stdout)
	}
	if strings.Contains(stdout, "payload-secret") {
		t.Errorf("dlq list --json printed a payload:\n%s", stdout)
	}
	return es
}

// checkListTable: a header and one line per parked row, the rows of an
// aggregate in position order, later ones naming the first, no payloads.
func checkListTable(t *testing.T, f *harness.Fixture, a []*schema.Message, b *schema.Message, c []*schema.Message) {
	t.Helper()
	stdout, stderr, code := runDLQ(t, f, "list")
	if code != 0 {
		t.Fatalf("dlq list: exit %d\n%s", code, stderr)
	}
	t.Logf("dlq list:\n%s", stdout)
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "POSITION") {
		t.Fatalf("dlq list: %d lines; want a header and 7 rows\n%s", len(lines), stdout)
	}
	if strings.Contains(stdout, "payload-secret") {
		t.Errorf("dlq list printed a payload:\n%s", stdout)
	}
	last := -1
	for i, m := range a {
		at := lineWith(lines, m.ID.String())
		if at <= last {
			t.Errorf("order/A message %d (%s) on line %d, after line %d; want position order", i, m.ID, at, last)
		}
		if at < 0 {
			t.Fatalf("dlq list: no line for %s", m.ID)
		}
		last = at
		if fs := strings.Fields(lines[at]); i > 0 && fs[len(fs)-1] != a[0].ID.String() {
			t.Errorf("line %q: want blocked_by %s last", lines[at], a[0].ID)
		}
	}
	for _, want := range []string{"order/A", "order/B", b.ID.String(), c[0].ID.String(), "-/-"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dlq list lacks %q", want)
		}
	}
}

// lineWith is the index of the line whose message_id column is id.
func lineWith(lines []string, id string) int {
	for i, l := range lines {
		if fs := strings.Fields(l); len(fs) > 1 && fs[1] == id {
			return i
		}
	}
	return -1
}

func checkRetryOutput(t *testing.T, stdout string, msgs []*schema.Message) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != len(msgs)+1 {
		t.Fatalf("dlq retry printed %d lines; want %d published and a summary\n%s", len(lines), len(msgs), stdout)
	}
	for i, m := range msgs {
		if !strings.HasPrefix(lines[i], "published") || !strings.Contains(lines[i], m.ID.String()) {
			t.Errorf("retry line %d: %q; want published %s", i, lines[i], m.ID)
		}
	}
}

// checkTopic reads the order topic with kcat: the records of aggregate agg
// are msgs, in order, with their message ids and headers.
func checkTopic(t *testing.T, f *harness.Fixture, agg string, msgs []*schema.Message) {
	t.Helper()
	var got []kafkatest.Record
	for _, r := range f.ReadTopic(f.Topic("order")) {
		if r.Key != nil && *r.Key == agg {
			got = append(got, r)
		}
	}
	if len(got) != len(msgs) {
		t.Fatalf("aggregate %s: %d records in Kafka; want %d", agg, len(got), len(msgs))
	}
	for i, r := range got {
		m := msgs[i]
		if r.Headers["ce_id"] != m.ID.String() || r.Headers["correlation_id"] != m.Headers[0].Value ||
			r.Payload == nil || *r.Payload != string(m.Payload) {
			t.Errorf("aggregate %s record %d: ce_id %s, correlation_id %q; want %s, %q and the parked payload",
				agg, i, r.Headers["ce_id"], r.Headers["correlation_id"], m.ID, m.Headers[0].Value)
		}
	}
}

func e2eMessage(n int, agg string) *schema.Message {
	m := &schema.Message{
		AggregateType: "order", AggregateID: agg, AggregateVersion: int64(n), HasVersion: true,
		Type: "order.changed.v1", Payload: []byte(fmt.Sprintf(`{"n":%d,"note":"payload-secret-%d"}`, n, n)),
		ContentType: "application/json",
		Headers:     []schema.Header{{Key: "correlation_id", Value: fmt.Sprintf("corr-%d", n)}},
		OccurredAt:  time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC),
		CommitLSN:   pglogrepl.LSN(0x5000000 + n*0x100), Seq: 0,
	}
	m.ID = schema.MessageID(fmt.Sprintf("e2%02x0000-0000-4000-8000-000000000099", n&0xff))
	return m
}

// parkAggregate parks msgs as the relay would: the first refused by Kafka,
// the others behind it.
func parkAggregate(t *testing.T, st *dlq.Store, topic string, msgs ...*schema.Message) {
	t.Helper()
	for i, m := range msgs {
		dl := schema.DeadLetter{Position: m.Position(), Message: m, Topic: topic, Reason: "kafka refused the record: MESSAGE_TOO_LARGE"}
		if i > 0 {
			dl.BlockedBy = &schema.Blocker{Position: msgs[0].Position(), MessageID: &msgs[0].ID}
			dl.Reason = "blocked by " + msgs[0].ID.String()
		}
		if ok, err := st.Park(context.Background(), dl); err != nil || !ok {
			t.Fatalf("Park(%s) = %v, %v; want true", dl.Position, ok, err)
		}
	}
}
