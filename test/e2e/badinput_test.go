package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/test/harness"
	"github.com/walrelay/walrelay/test/kafkatest"
	"github.com/walrelay/walrelay/test/poll"
)

// The bad inputs of issue 5, each driven through the real binary, a real
// PostgreSQL and a real Kafka broker:
//
//   - TestRetryableBadMessagesAreParkedInOrderAndRetried: a record over
//     the topic's max.message.bytes, a 5 MB payload over walrelay's limit,
//     and topics that do not exist with topic creation off, under
//     --on-bad-message park, then fixed and retried with `walrelay dlq
//     retry`.
//   - TestUndecodableRowsAreParkedAndDiscarded: null and empty aggregate
//     ids, a required column dropped and added back while the relay runs,
//     and an extra column.
//   - TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed: the record
//     over the topic's limit under --on-bad-message halt.

// metadataRefresh is longer than the interval at which the relay's Kafka
// client (kafka-go's Transport, MetadataTTL 6s) refreshes its view of the
// cluster's topics.
const metadataRefresh = 7 * time.Second

// smallRecordLimit is the max.message.bytes of the topic that refuses a
// 2 KB payload: a lone small record (a few hundred bytes with its headers)
// fits, the big one does not.
const smallRecordLimit = "1024"

// TestRetryableBadMessagesAreParkedInOrderAndRetried: under park, each bad
// message lands in the dead-letter table with its reason and the later
// messages of its aggregate are parked behind it, while every other
// aggregate arrives in commit order and the slot confirms past the parked
// rows; after the fix, `dlq retry --aggregate` delivers the parked messages
// in their order with their message ids, and the relay publishes the
// aggregate's next row after them.
func TestRetryableBadMessagesAreParkedInOrderAndRetried(t *testing.T) {
	f := harness.New(t, "customer", "blob")
	orderTopic, blobTopic := f.Topic("order"), f.Topic("blob")
	ghostTopic := f.Topic("ghost")        // the template's topic for aggregate type ghost: not created
	nowhere := f.TopicPrefix + ".nowhere" // a row's own topic: not created
	f.CreateTopicWith(orderTopic, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: smallRecordLimit})
	metrics := harness.FreePort(t)
	r := f.Start("--kafka-create-topics=false", "--metrics-addr", metrics)
	r.WaitStarted()

	b := newBook(t, f)
	bigForTopic := `{"blob": "` + strings.Repeat("x", 2048) + `"}`
	overLimit := `{"blob": "` + strings.Repeat("y", 5<<20) + `"}`
	o1 := []*outRow{b.next("order", "O1"), b.next("order", "O1").withPayload(bigForTopic), b.next("order", "O1"), b.next("order", "O1")}
	o2 := []*outRow{b.next("order", "O2"), b.next("order", "O2"), b.next("order", "O2"), b.next("order", "O2")}
	b1 := []*outRow{b.next("blob", "B1"), b.next("blob", "B1").withPayload(overLimit), b.next("blob", "B1")}
	g1 := []*outRow{b.next("ghost", "G1"), b.next("ghost", "G1")}
	i1 := []*outRow{b.next("invoice", "I1").withTopic(nowhere), b.next("invoice", "I1").withTopic(nowhere)}
	c1 := []*outRow{b.next("customer", "C1"), b.next("customer", "C1"), b.next("customer", "C1")}
	c2 := b.next("customer", "C2")

	start := time.Now()
	b.commit(o1[0], o2[0], c1[0], b1[0])
	b.commit(o1[1], o2[1], g1[0], c1[1])
	b.commit(b1[1], o1[2], o2[2], i1[0], c2)
	end := b.commit(g1[1], i1[1], b1[2], o1[3], o2[3], c1[2])
	took := f.WaitConfirmed(r, end, 2*time.Minute)
	t.Logf("park: wrote %d rows in 4 transactions; the slot confirmed %s (past every parked row) %s after the last commit, %s after the first",
		len(b.rows), end, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	for _, line := range logLines(r, "", `"topic":"`+ghostTopic+`"`, `"topic":"`+nowhere+`"`) {
		t.Logf("park: relay log: %s", line)
	}

	// The dead-letter table holds exactly the bad messages and those
	// behind them, with their reasons.
	dead := deadLetters(t, f)
	parked := []*outRow{o1[1], o1[2], o1[3], b1[1], b1[2], g1[0], g1[1], i1[0], i1[1]}
	expectDeadSet(t, dead, parked...)
	expectParked(t, dead, o1[1], "Message Size Too Large", "")
	expectParked(t, dead, b1[1], "payload of 5242892 bytes is over the limit of 921600 bytes (--max-payload-bytes)", "")
	expectParked(t, dead, g1[0], fmt.Sprintf("topic %q does not exist and topic creation is off (--kafka-create-topics=false)", ghostTopic), ghostTopic)
	expectParked(t, dead, i1[0], fmt.Sprintf("topic %q does not exist and topic creation is off (--kafka-create-topics=false)", nowhere), nowhere)
	for _, bl := range [][2]*outRow{{o1[2], o1[1]}, {o1[3], o1[1]}, {b1[2], b1[1]}, {g1[1], g1[0]}, {i1[1], i1[0]}} {
		expectBlocked(t, dead, bl[0], bl[1])
	}
	for _, first := range []*outRow{o1[1], b1[1], g1[0], i1[0]} {
		t.Logf("park: %s/%s v%d parked: %q", first.aggType, first.aggID, first.version, dead[first.id].Reason)
	}
	t.Logf("park: behind them, %d later messages of the same aggregates parked as \"blocked by <message_id>\" (blocked_by set): O1 v3, v4; B1 v3; G1 v2; I1 v2",
		len(parked)-4)
	counts := parkedByReason(t, metrics)
	wantCounts := map[string]float64{"kafka_refused": 1, "payload_too_large": 1, "topic_missing": 2, "blocked": 5}
	for reason, n := range wantCounts {
		if counts[reason] != n {
			t.Errorf("walrelay_parked_messages_total{reason=%q} = %v; want %v", reason, counts[reason], n)
		}
	}
	t.Logf("park: walrelay_parked_messages_total %v", counts)
	for _, topic := range []string{ghostTopic, nowhere} {
		if f.TopicExists(topic) {
			t.Errorf("topic %s exists; want it not created under --kafka-create-topics=false", topic)
		}
	}

	// Everything else is in Kafka, in commit order per partition, and
	// nothing parked was published.
	delivered := b.except(parked...)
	rep := f.Verify(b.harnessRows(delivered))
	harness.AssertClean(t, rep, 0)
	n := b.checkCommitOrder(orderTopic, blobTopic, f.Topic("customer"))
	t.Logf("park: %d rows in Kafka (other aggregates and the bad aggregates' rows before their bad one), %d in the dead-letter table, %d written: none lost; %d records in commit order within their partitions",
		rep.Delivered, len(dead), len(b.rows), n)

	// The fixes, each followed by a retry of its aggregate.
	f.SetTopicConfig(orderTopic, "max.message.bytes", "1048588")
	retryAggregate(t, f, "order/O1", 0, o1[1:], nil, "--kafka-create-topics=false")

	// walrelay's limit raised, but not yet the topic's: Kafka refuses, and
	// the aggregate stays parked as it was.
	out := retryAggregate(t, f, "blob/B1", 1, nil, b1[1:], "--kafka-create-topics=false", "--max-payload-bytes", "8388608")
	if !strings.Contains(out, "Message Size Too Large") {
		t.Errorf("dlq retry of blob/B1 over the topic's limit said:\n%s\nwant Kafka's MESSAGE_TOO_LARGE as the reason", out)
	}
	if d := deadLetters(t, f)[b1[1].id]; d.Retries != 1 || !strings.Contains(d.LastError, "Message Size Too Large") {
		t.Errorf("blob/B1 v2 after a failed retry: retries %d, last_error %q; want 1 and Kafka's reason", d.Retries, d.LastError)
	}
	f.SetTopicConfig(blobTopic, "max.message.bytes", "8388608")
	retryAggregate(t, f, "blob/B1", 0, b1[1:], nil, "--kafka-create-topics=false", "--max-payload-bytes", "8388608")

	f.CreateTopics(ghostTopic, nowhere)
	created := time.Now()
	retryAggregate(t, f, "ghost/G1", 0, g1, nil, "--kafka-create-topics=false")
	retryAggregate(t, f, "invoice/I1", 0, i1, nil, "--kafka-create-topics=false")
	if left := deadLetters(t, f); len(left) != 0 {
		t.Fatalf("after the retries: %d rows in the dead-letter table; want none", len(left))
	}

	// New rows of the retried aggregates: the relay lifts its blocks and
	// publishes them after the retried ones. The relay learns of a topic
	// created while it runs from its Kafka client's metadata cache, which
	// kafka-go refreshes every 6s; a row for that topic published before
	// the refresh is parked again as topic_missing (a known limitation,
	// reported with issue 5). So the new rows come after a refresh.
	time.Sleep(time.Until(created.Add(metadataRefresh)))
	after := []*outRow{b.next("order", "O1"), b.next("blob", "B1"), b.next("ghost", "G1"), b.next("invoice", "I1").withTopic(nowhere), b.next("customer", "C1")}
	f.WaitConfirmed(r, b.commit(after...), time.Minute)
	if left := deadLetters(t, f); len(left) != 0 {
		t.Errorf("rows written after the retries: %d parked (%v); want none: the retries unblocked their aggregates", len(left), reasons(left))
	}
	rep = f.Verify(b.harnessRows(b.rows))
	harness.AssertClean(t, rep, 0)
	for _, agg := range []string{"O1", "B1", "G1", "I1"} {
		t.Logf("park: after the fixes, %s in Kafka: versions %v (ce_id = the outbox message_id of each)", agg, b.versionsInKafka(agg))
	}
	t.Logf("park: after retries and one new row per aggregate: every one of the %d rows delivered once, in aggregate order; parked counts unchanged: %v",
		len(b.rows), parkedByReason(t, metrics))
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay exit code after SIGTERM = %d; want 0", code)
	}
}

// TestUndecodableRowsAreParkedAndDiscarded: rows the decoder cannot turn
// into messages are parked with all their columns (row_data) and cannot be
// retried; those without an aggregate id block nothing, those with one
// block their aggregate until discarded. A required column dropped while
// the relay runs makes the rows written meanwhile bad; once it is back,
// rows flow again; an added column is ignored.
func TestUndecodableRowsAreParkedAndDiscarded(t *testing.T) {
	f := harness.New(t, "order")
	dropAggregateIDConstraints(t, f)
	metrics := harness.FreePort(t)
	r := f.Start("--metrics-addr", metrics)
	r.WaitStarted()

	b := newBook(t, f)
	nullID, emptyID := b.next("order", "").withNullID(), b.next("order", "")
	a1 := []*outRow{b.next("order", "A1"), b.next("order", "A1")}
	a2 := []*outRow{b.next("order", "A2"), b.next("order", "A2")}
	b.commit(a1[0], nullID, a2[0])
	end := b.commit(emptyID, a1[1], a2[1])
	f.WaitConfirmed(r, end, time.Minute)

	dead := deadLetters(t, f)
	expectDeadSet(t, dead, nullID, emptyID)
	expectUndecodable(t, dead, nullID, `column "aggregate_id": null`, "aggregate_id", nil)
	empty := ""
	expectUndecodable(t, dead, emptyID, `column "aggregate_id": empty`, "aggregate_id", &empty)
	rep := f.Verify(b.harnessRows(b.except(nullID, emptyID)))
	harness.AssertClean(t, rep, 0)
	n := b.checkCommitOrder(f.Topic("order"))
	t.Logf("bad row: null aggregate id parked: %q; row_data %s", dead[nullID.id].Reason, dead[nullID.id].RowDataText)
	t.Logf("bad row: empty aggregate id parked: %q; row_data %s", dead[emptyID.id].Reason, dead[emptyID.id].RowDataText)
	t.Logf("bad row: they block nothing: the %d rows of aggregates A1 and A2 around them are in Kafka in commit order (%d records checked)", rep.Delivered, n)

	stdout, stderr, code := runDLQ(t, f, "retry", "--all")
	if code != 1 || strings.Count(stdout, "walrelay could not decode this row, so it cannot be retried") != 2 ||
		!strings.Contains(stdout, "0 published and removed, 2 left parked") {
		t.Errorf("dlq retry --all of two undecodable rows: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1, both left as undecodable", code, stdout, stderr)
	}
	t.Logf("bad row: dlq retry --all (exit %d):\n%s", code, stdout)

	// A required column dropped mid-stream, then added back; then an extra
	// column.
	alter(t, f, "DROP COLUMN type")
	a3 := b.next("order", "A3").withoutType()
	a1 = append(a1, b.next("order", "A1").withoutType())
	b.commit(a3, a1[2])
	alter(t, f, "ADD COLUMN type text")
	a4 := []*outRow{b.next("order", "A4")}
	a1 = append(a1, b.next("order", "A1"))
	a2 = append(a2, b.next("order", "A2"))
	b.commit(a1[3], a4[0], a2[2])
	alter(t, f, "ADD COLUMN tenant text")
	a4 = append(a4, b.next("order", "A4").withTenant("acme"))
	a2 = append(a2, b.next("order", "A2").withTenant("acme"))
	f.WaitConfirmed(r, b.commit(a4[1], a2[3]), time.Minute)

	dead = deadLetters(t, f)
	expectDeadSet(t, dead, nullID, emptyID, a3, a1[2], a1[3])
	aggID := "A3"
	expectUndecodable(t, dead, a3, `column "type": missing from the table`, "aggregate_id", &aggID)
	aggID = "A1"
	expectUndecodable(t, dead, a1[2], `column "type": missing from the table`, "aggregate_id", &aggID)
	for _, r := range []*outRow{a3, a1[2]} {
		if _, ok := dead[r.id].RowData["type"]; ok {
			t.Errorf("row_data of %s/%s v%d has a type column; want the columns the row had", r.aggType, r.aggID, r.version)
		}
	}
	expectBlocked(t, dead, a1[3], a1[2])
	delivered := b.except(nullID, emptyID, a3, a1[2], a1[3])
	rep = f.Verify(b.harnessRows(delivered))
	harness.AssertClean(t, rep, 0)
	t.Logf("column dropped: rows written without the type column parked: %q; row_data %s", dead[a3.id].Reason, dead[a3.id].RowDataText)
	t.Logf("column dropped: A1's next row, written after the column was back, parked behind A1's bad row: %q", dead[a1[3].id].Reason)
	t.Logf("column back, extra column tenant added: A2 v3, v4 and A4 v1, v2 published (no tenant header); %d rows in Kafka, %d in the dead-letter table, %d written",
		rep.Delivered, len(dead), len(b.rows))
	counts := parkedByReason(t, metrics)
	if counts["bad_row"] != 4 || counts["blocked"] != 1 {
		t.Errorf("walrelay_parked_messages_total %v; want bad_row 4, blocked 1", counts)
	}
	t.Logf("bad row: walrelay_parked_messages_total %v", counts)

	// The operator discards the undecodable rows with a reason; A1's
	// blocked message can then be retried, and A1's next row follows it.
	discardReasons := map[*outRow]string{nullID: "null aggregate id: the order service re-emitted the event",
		emptyID: "empty aggregate id: test row", a3: "written while the type column was missing", a1[2]: "written while the type column was missing"}
	for row, reason := range discardReasons {
		args := []string{"--message-id", row.id, "--reason", reason}
		if row == nullID {
			args = []string{"--position", dead[row.id].Position, "--reason", reason}
		}
		if stdout, stderr, code := runDLQ(t, f, "discard", args...); code != 0 || !strings.Contains(stdout, "discarded 1 parked message") {
			t.Errorf("dlq discard %v: exit %d, stdout %q, stderr %q; want one discarded", args, code, stdout, stderr)
		}
	}
	dead = deadLetters(t, f)
	for row, reason := range discardReasons {
		d := dead[row.id]
		if d.Status != "discarded" || d.DiscardReason == nil || *d.DiscardReason != reason || d.DiscardedAt == nil || len(d.RowData) == 0 {
			t.Errorf("%s after discard: status %s, discard_reason %v, discarded_at %v, row_data %v; want discarded, %q, a time, the row kept",
				row.id, d.Status, d.DiscardReason, d.DiscardedAt, d.RowData, reason)
		}
	}
	t.Logf("discard: 4 undecodable rows discarded; audit: status=discarded, discard_reason and discarded_at set, row_data kept, e.g. %q at %s",
		*dead[a3.id].DiscardReason, dead[a3.id].DiscardedAt.Format(time.RFC3339))
	retryAggregate(t, f, "order/A1", 0, a1[3:], nil)
	a1 = append(a1, b.next("order", "A1"))
	f.WaitConfirmed(r, b.commit(a1[4]), time.Minute)
	got := b.idsInKafka("A1")
	want := []string{a1[0].id, a1[1].id, a1[3].id, a1[4].id}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("A1 in Kafka: %v; want v1, v2, v4 (retried), v5 (new): %v", got, want)
	}
	if left := parkedOnly(deadLetters(t, f)); len(left) != 0 {
		t.Errorf("after discarding and retrying: %d rows still parked; want none", len(left))
	}
	t.Logf("discard: with its blocker discarded, dlq retry --aggregate order/A1 published v4; the relay then published the new v5 after it: A1 in Kafka is v1, v2, v4, v5")
	if code := r.Stop(); code != 0 {
		t.Errorf("walrelay exit code after SIGTERM = %d; want 0", code)
	}
}

// TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed: under halt, a
// record the topic refuses stops the relay before it, with the exact
// error, without a crash, without confirming past it and without a dead
// letter; once the topic's limit is raised, the relay delivers everything
// by itself, in order.
func TestHaltStopsBeforeARefusedRecordUntilTheTopicIsFixed(t *testing.T) {
	f := harness.New(t, "customer")
	orderTopic := f.Topic("order")
	f.CreateTopicWith(orderTopic, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: smallRecordLimit})
	metrics := harness.FreePort(t)
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

// rowType is the type column of every row the tests write with one.
const rowType = "order.changed.v1"

// outRow is one outbox row a test writes, with the columns the bad-input
// tests vary.
type outRow struct {
	id, aggType, aggID string
	nullID             bool // aggregate_id is null
	version            int64
	payload            string
	topic              *string
	noType             bool    // written while the type column is dropped
	tenant             *string // a column walrelay does not know
	seq                int     // place in commit order, from 1
}

func (r *outRow) withPayload(p string) *outRow { r.payload = p; return r }
func (r *outRow) withTopic(t string) *outRow   { r.topic = &t; return r }
func (r *outRow) withNullID() *outRow          { r.nullID = true; return r }
func (r *outRow) withoutType() *outRow         { r.noType = true; return r }
func (r *outRow) withTenant(t string) *outRow  { r.tenant = &t; return r }

// insert is the statement and arguments that write r.
func (r *outRow) insert(table string) (string, []any) {
	cols := []string{"message_id", "aggregate_type", "aggregate_id", "aggregate_version", "payload"}
	var aggID any = r.aggID
	if r.nullID {
		aggID = nil
	}
	args := []any{r.id, r.aggType, aggID, r.version, r.payload}
	if !r.noType {
		cols, args = append(cols, "type"), append(args, rowType)
	}
	if r.topic != nil {
		cols, args = append(cols, "topic"), append(args, *r.topic)
	}
	if r.tenant != nil {
		cols, args = append(cols, "tenant"), append(args, *r.tenant)
	}
	marks := make([]string, len(cols))
	for i := range cols {
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	return "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")", args
}

// book writes rows and remembers them, in commit order.
type book struct {
	t        *testing.T
	f        *harness.Fixture
	rows     []*outRow
	byID     map[string]*outRow
	versions map[string]int64
}

func newBook(t *testing.T, f *harness.Fixture) *book {
	return &book{t: t, f: f, byID: map[string]*outRow{}, versions: map[string]int64{}}
}

// next is the next row of aggregate typ/id (versions 1, 2, ... per
// aggregate), with a small payload; commit writes it.
func (b *book) next(typ, id string) *outRow {
	b.versions[typ+"/"+id]++
	v := b.versions[typ+"/"+id]
	return &outRow{id: harness.NewUUID(), aggType: typ, aggID: id, version: v,
		payload: fmt.Sprintf(`{"aggregate": %q, "v": %d}`, id, v)}
}

// commit writes rows in one transaction and returns the WAL position
// after its commit.
func (b *book) commit(rows ...*outRow) pglogrepl.LSN {
	b.t.Helper()
	b.write(rows)
	return b.f.CurrentLSN()
}

// write commits rows in one transaction and returns its transaction id
// (the 32-bit xid, as logical decoding shows it).
func (b *book) write(rows []*outRow) string {
	b.t.Helper()
	ctx := context.Background()
	tx, err := b.f.DB.Begin(ctx)
	harness.Must(b.t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var xid string
	harness.Must(b.t, tx.QueryRow(ctx, "SELECT (txid_current() % 4294967296)::text").Scan(&xid), "read the transaction id")
	for _, r := range rows {
		sql, args := r.insert(b.f.Table)
		_, err := tx.Exec(ctx, sql, args...)
		harness.Must(b.t, err, "insert %s/%s v%d", r.aggType, r.aggID, r.version)
	}
	harness.Must(b.t, tx.Commit(ctx), "commit")
	for _, r := range rows {
		r.seq = len(b.rows) + 1
		b.rows = append(b.rows, r)
		b.byID[r.id] = r
	}
	return xid
}

// commitEnd writes rows in one transaction, like commit, and returns the
// exact end of its commit record, as logical decoding reports it (the
// position a relay confirms after the transaction): a temporary
// test_decoding slot watches the transaction.
func (b *book) commitEnd(rows ...*outRow) pglogrepl.LSN {
	b.t.Helper()
	ctx := context.Background()
	conn, err := b.f.DB.Acquire(ctx)
	harness.Must(b.t, err, "acquire a connection")
	defer conn.Release()
	watch := "watch_" + b.f.ID
	_, err = conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding', true)", watch)
	harness.Must(b.t, err, "create temporary slot %s", watch)
	defer conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", watch) //nolint:errcheck // temporary anyway
	xid := b.write(rows)
	var end string
	harness.Must(b.t, conn.QueryRow(ctx, `SELECT max(lsn)::text FROM pg_logical_slot_peek_changes($1, NULL, NULL)
		WHERE xid::text = $2 AND data LIKE 'COMMIT%'`, watch, xid).Scan(&end), "read the commit's end from %s", watch)
	lsn, err := pglogrepl.ParseLSN(end)
	harness.Must(b.t, err, "parse %s", end)
	return lsn
}

// except is every row written but those given.
func (b *book) except(rows ...*outRow) []*outRow {
	skip := map[*outRow]bool{}
	for _, r := range rows {
		skip[r] = true
	}
	var out []*outRow
	for _, r := range b.rows {
		if !skip[r] {
			out = append(out, r)
		}
	}
	return out
}

// harnessRows reads rows back from the outbox table, as the verifier
// wants them. The type comes from the book: a type column dropped and
// added back is null in the rows written before.
func (b *book) harnessRows(rows []*outRow) []harness.Row {
	b.t.Helper()
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	res, err := b.f.DB.Query(context.Background(), `SELECT message_id::text, aggregate_type, aggregate_id, aggregate_version,
		'', payload::text, headers::text, occurred_at, topic FROM `+b.f.Table+` WHERE message_id = ANY($1::uuid[])`, ids)
	harness.Must(b.t, err, "read outbox rows")
	defer res.Close()
	var out []harness.Row
	for res.Next() {
		var r harness.Row
		var headers *string
		harness.Must(b.t, res.Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.Version, &r.Type, &r.Payload, &headers, &r.OccurredAt, &r.Topic), "scan outbox row")
		if headers != nil {
			harness.Must(b.t, json.Unmarshal([]byte(*headers), &r.Headers), "headers of %s", r.ID)
		}
		r.Type = rowType
		out = append(out, r)
	}
	harness.Must(b.t, res.Err(), "read outbox rows")
	if len(out) != len(rows) {
		b.t.Fatalf("read %d outbox rows back; want %d", len(out), len(rows))
	}
	return out
}

// checkCommitOrder reads topics and checks that, within each partition,
// records are in the commit order of their rows; it returns how many
// records it checked.
func (b *book) checkCommitOrder(topics ...string) int {
	b.t.Helper()
	n := 0
	for _, topic := range topics {
		last := map[int32]*outRow{}
		for _, rec := range sortedRecords(b.f.ReadTopic(topic)) {
			r := b.byID[rec.Headers["ce_id"]]
			if r == nil {
				b.t.Errorf("%s/%d@%d: ce_id %q is no row the test wrote", topic, rec.Partition, rec.Offset, rec.Headers["ce_id"])
				continue
			}
			if prev := last[rec.Partition]; prev != nil && prev.seq >= r.seq {
				b.t.Errorf("%s partition %d: %s/%s v%d (row %d) at offset %d after %s/%s v%d (row %d); want commit order",
					topic, rec.Partition, r.aggType, r.aggID, r.version, r.seq, rec.Offset, prev.aggType, prev.aggID, prev.version, prev.seq)
			}
			last[rec.Partition] = r
			n++
		}
	}
	return n
}

// idsInKafka is the message ids of aggregate id's records, in offset order
// (the aggregate lives in one partition of its topic, or one topic).
func (b *book) idsInKafka(aggID string) []string {
	b.t.Helper()
	var typ string
	var topic *string
	for _, r := range b.rows {
		if r.aggID == aggID {
			typ, topic = r.aggType, r.topic
		}
	}
	name := b.f.Topic(typ)
	if topic != nil {
		name = *topic
	}
	var ids []string
	for _, rec := range sortedRecords(b.f.ReadTopic(name)) {
		if rec.Key != nil && *rec.Key == aggID {
			ids = append(ids, rec.Headers["ce_id"])
		}
	}
	return ids
}

// versionsInKafka is aggregate id's versions in Kafka, in offset order.
func (b *book) versionsInKafka(aggID string) []int64 {
	var vs []int64
	for _, id := range b.idsInKafka(aggID) {
		if r := b.byID[id]; r != nil {
			vs = append(vs, r.version)
		}
	}
	return vs
}

func sortedRecords(recs []kafkatest.Record) []kafkatest.Record {
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	return recs
}

// deadRow is one row of the dead-letter table.
type deadRow struct {
	Position      string
	MessageID     *string
	AggregateID   *string
	Reason        string
	BlockedBy     *string
	Status        string
	TargetTopic   *string
	PayloadBytes  *int
	RowData       map[string]*string
	RowDataText   string // row_data as the table holds it, for the log
	Retries       int
	LastError     string
	DiscardReason *string
	DiscardedAt   *time.Time
}

// deadLetters reads the fixture's dead-letter table, keyed by message id.
func deadLetters(t *testing.T, f *harness.Fixture) map[string]deadRow {
	t.Helper()
	rows, err := f.DB.Query(context.Background(), `SELECT commit_lsn::text || '#' || seq, message_id::text, aggregate_id, reason,
		blocked_by::text, status, target_topic, octet_length(payload), row_data::text, retries, coalesce(last_error, ''),
		discard_reason, discarded_at FROM `+f.Table+`_dead_letters ORDER BY commit_lsn, seq`)
	harness.Must(t, err, "read the dead-letter table")
	defer rows.Close()
	out := map[string]deadRow{}
	for rows.Next() {
		var d deadRow
		var rowData *string
		harness.Must(t, rows.Scan(&d.Position, &d.MessageID, &d.AggregateID, &d.Reason, &d.BlockedBy, &d.Status, &d.TargetTopic,
			&d.PayloadBytes, &rowData, &d.Retries, &d.LastError, &d.DiscardReason, &d.DiscardedAt), "scan a dead letter")
		if rowData != nil {
			d.RowDataText = *rowData
			harness.Must(t, json.Unmarshal([]byte(*rowData), &d.RowData), "row_data of %s", d.Position)
		}
		if d.MessageID == nil {
			t.Fatalf("dead letter at %s has no message_id; every row these tests write has one", d.Position)
		}
		out[*d.MessageID] = d
	}
	harness.Must(t, rows.Err(), "read the dead-letter table")
	return out
}

func parkedOnly(dead map[string]deadRow) map[string]deadRow {
	out := map[string]deadRow{}
	for id, d := range dead {
		if d.Status == "parked" {
			out[id] = d
		}
	}
	return out
}

func reasons(dead map[string]deadRow) []string {
	var out []string
	for _, d := range dead {
		out = append(out, d.Reason)
	}
	return out
}

// expectDeadSet: the dead-letter table holds exactly rows.
func expectDeadSet(t *testing.T, dead map[string]deadRow, rows ...*outRow) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range rows {
		want[r.id] = true
		if _, ok := dead[r.id]; !ok {
			t.Errorf("%s/%s v%d (%s) is not in the dead-letter table; want it parked", r.aggType, r.aggID, r.version, r.id)
		}
	}
	for id, d := range dead {
		if !want[id] {
			t.Errorf("dead-letter table holds %s (%s); want it published", id, d.Reason)
		}
	}
}

// expectParked: r is parked first of its aggregate for reason (a part of
// it), headed for topic (when given), with its payload kept.
func expectParked(t *testing.T, dead map[string]deadRow, r *outRow, reason, topic string) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return // expectDeadSet said so
	}
	if !strings.Contains(d.Reason, reason) || d.BlockedBy != nil || d.Status != "parked" {
		t.Errorf("%s/%s v%d: reason %q, blocked_by %v, status %s; want a reason with %q, no blocker, parked",
			r.aggType, r.aggID, r.version, d.Reason, d.BlockedBy, d.Status, reason)
	}
	if topic != "" && (d.TargetTopic == nil || *d.TargetTopic != topic) {
		t.Errorf("%s/%s v%d: target_topic %v; want %s", r.aggType, r.aggID, r.version, d.TargetTopic, topic)
	}
	if d.PayloadBytes == nil || *d.PayloadBytes != len(r.payload) {
		t.Errorf("%s/%s v%d: payload of %v bytes kept; want the payload's %d", r.aggType, r.aggID, r.version, d.PayloadBytes, len(r.payload))
	}
}

// expectBlocked: r is parked behind blocker.
func expectBlocked(t *testing.T, dead map[string]deadRow, r, blocker *outRow) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return
	}
	if d.Reason != "blocked by "+blocker.id || d.BlockedBy == nil || *d.BlockedBy != blocker.id || d.Status != "parked" {
		t.Errorf("%s/%s v%d: reason %q, blocked_by %v, status %s; want \"blocked by %s\", blocked_by %s, parked",
			r.aggType, r.aggID, r.version, d.Reason, d.BlockedBy, d.Status, blocker.id, blocker.id)
	}
}

// expectUndecodable: r is parked as a row the decoder could not decode,
// with its columns in row_data (column col holding want) and no blocker.
func expectUndecodable(t *testing.T, dead map[string]deadRow, r *outRow, reason, col string, want *string) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return
	}
	if !strings.Contains(d.Reason, reason) || d.BlockedBy != nil || d.Status != "parked" || d.PayloadBytes != nil {
		t.Errorf("%s: reason %q, blocked_by %v, status %s, payload %v bytes; want a reason with %q, no blocker, parked, no payload (undecodable)",
			r.id, d.Reason, d.BlockedBy, d.Status, d.PayloadBytes, reason)
	}
	got, has := d.RowData[col]
	if !has || (got == nil) != (want == nil) || got != nil && *got != *want {
		t.Errorf("%s: row_data[%q] = %v (present %v); want %v", r.id, col, deref(got), has, deref(want))
	}
	if id := d.RowData["message_id"]; id == nil || *id != r.id {
		t.Errorf("%s: row_data[message_id] = %v; want the row's id", r.id, deref(id))
	}
	if p := d.RowData["payload"]; p == nil || !strings.Contains(*p, fmt.Sprintf(`"v": %d`, r.version)) {
		t.Errorf("%s: row_data[payload] = %v; want the row's payload", r.id, deref(p))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strconv.Quote(*s)
}

// retryAggregate runs `walrelay dlq retry --aggregate agg` and checks its
// exit code and that it published published, in order, and left left.
func retryAggregate(t *testing.T, f *harness.Fixture, agg string, wantCode int, published, left []*outRow, extra ...string) string {
	t.Helper()
	start := time.Now()
	stdout, stderr, code := runDLQ(t, f, "retry", append([]string{"--aggregate", agg}, extra...)...)
	t.Logf("dlq retry --aggregate %s %s: exit %d after %s:\n%s", agg, strings.Join(extra, " "), code,
		time.Since(start).Round(time.Millisecond), stdout)
	if code != wantCode {
		t.Fatalf("dlq retry --aggregate %s: exit %d; want %d\nstdout:\n%s\nstderr:\n%s", agg, code, wantCode, stdout, stderr)
	}
	var pub, lft []string
	for _, line := range strings.Split(stdout, "\n") {
		fs := strings.Fields(line)
		switch {
		case len(fs) > 2 && fs[0] == "published":
			pub = append(pub, fs[2])
		case len(fs) > 2 && fs[0] == "left":
			lft = append(lft, fs[2])
		}
	}
	if got, want := strings.Join(pub, ","), idList(published); got != want {
		t.Errorf("dlq retry --aggregate %s published %s; want, in order, %s", agg, got, want)
	}
	if got, want := strings.Join(lft, ","), idList(left); got != want {
		t.Errorf("dlq retry --aggregate %s left %s; want %s", agg, got, want)
	}
	return stdout
}

func idList(rows []*outRow) string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return strings.Join(ids, ",")
}

// dropAggregateIDConstraints lets the test table take null and empty
// aggregate ids, as a table made without `walrelay schema` might.
func dropAggregateIDConstraints(t *testing.T, f *harness.Fixture) {
	t.Helper()
	ctx := context.Background()
	var check string
	harness.Must(t, f.DB.QueryRow(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'
		AND pg_get_constraintdef(oid) LIKE '%aggregate_id%'`, f.Table).Scan(&check), "find the CHECK on aggregate_id")
	alter(t, f, `DROP CONSTRAINT "`+check+`"`)
	alter(t, f, "ALTER COLUMN aggregate_id DROP NOT NULL")
}

func alter(t *testing.T, f *harness.Fixture, change string) {
	t.Helper()
	_, err := f.DB.Exec(context.Background(), "ALTER TABLE "+f.Table+" "+change)
	harness.Must(t, err, "alter table %s %s", f.Table, change)
}

// parkedByReason reads walrelay_parked_messages_total by reason from the
// relay's /metrics.
func parkedByReason(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	re := regexp.MustCompile(`^walrelay_parked_messages_total\{reason="([a-z_]+)"\} (\S+)$`)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(scrape(t, addr)))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			harness.Must(t, err, "parse %q", sc.Text())
			if v != 0 {
				out[m[1]] = v
			}
		}
	}
	return out
}

// logLines is the relay's log lines that contain what and one of any.
func logLines(r *harness.Relay, what string, any ...string) []string {
	var out []string
	for _, line := range strings.Split(r.Stderr.String(), "\n") {
		if !strings.Contains(line, what) {
			continue
		}
		for _, a := range any {
			if strings.Contains(line, a) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

func firstOf(lines []string) string {
	if len(lines) == 0 {
		return "<none>"
	}
	return lines[0]
}

// uuids is every message id in line.
func uuids(line string) []string {
	return regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).FindAllString(line, -1)
}

// describe names the rows of ids: "id (O1 v1)".
func (b *book) describe(ids []string) string {
	var out []string
	for _, id := range ids {
		if r := b.byID[id]; r != nil {
			id = fmt.Sprintf("%s (%s v%d)", id, r.aggID, r.version)
		}
		out = append(out, id)
	}
	return strings.Join(out, ", ")
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
	harness.Must(t, err, "GET /readyz")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	harness.Must(t, err, "read /readyz")
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
