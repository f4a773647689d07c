package e2e

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
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
//
// Each test has its file (badinput_park, _undecodable, _halt); the rows
// they write and read back are badinput_book_test.go's, what they expect
// of the dead-letter table badinput_deadletters_test.go's.

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
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "customer", "blob")
	orderTopic, blobTopic := f.Topic("order"), f.Topic("blob")
	ghostTopic := f.Topic("ghost")        // the template's topic for aggregate type ghost: not created
	nowhere := f.TopicPrefix + ".nowhere" // a row's own topic: not created
	f.CreateTopicWith(orderTopic, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: smallRecordLimit})
	metrics := testkit.FreePort(t)
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
	expectParked(t, dead, b1[1], "payload of 5242892 bytes is over the limit of 921600 bytes (the maximum payload size)", "")
	expectParked(t, dead, g1[0], fmt.Sprintf("topic %q does not exist and topic creation is off", ghostTopic), ghostTopic)
	expectParked(t, dead, i1[0], fmt.Sprintf("topic %q does not exist and topic creation is off", nowhere), nowhere)
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
			testkit.Must(t, err, "parse %q", sc.Text())
			if v != 0 {
				out[m[1]] = v
			}
		}
	}
	return out
}
