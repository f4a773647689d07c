package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/test/harness"
)

// A topic grown from 3 to 6 partitions under a running relay, under load:
// walrelay says so in one line naming the topic and both counts, publishes
// nothing more to the topic and confirms nothing past it, and `walrelay
// topics list` shows it held. Once `walrelay topics accept` records the
// new count, the rest goes by 6. No key lands on a new partition before
// the accept, nothing is lost, and each aggregate's records on the old
// layout all come before those on the new.
func TestGrownTopicIsHeldUntilAccepted(t *testing.T) {
	t.Parallel() // its own fixture: see the package doc
	f := harness.New(t, "order")
	topic := f.Topic("order")
	metrics := testkit.FreePort(t)
	r := f.Start("--partition-check-interval", "1s", "--metrics-addr", metrics)
	ctx := context.Background()

	wrote := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = f.Write(ctx, harness.Load{Writers: 2, Rows: 8000, MaxTxRows: 5, AggregatesPerWriter: 100,
			Types: []string{"order"}, Pause: 5 * time.Millisecond})
		wrote <- err
	}()
	before := f.ConfirmedLSN()
	poll.EventuallyEvery(t, time.Minute, 50*time.Millisecond, "the relay confirming while the writers run", func() (string, bool) {
		r.Running()
		return "", f.ConfirmedLSN() != before
	})
	kafkatest.GrowTopic(t, f.Brokers, topic, 6)
	grown := time.Now()
	line := r.WaitLine(`"topic's partition count changed`, 30*time.Second)
	t.Logf("held %v after the growth: %s", time.Since(grown).Round(time.Millisecond), line)
	for _, want := range []string{`"topic":"` + topic + `"`, `"recorded_partitions":3`, `"kafka_partitions":6`, "walrelay topics accept --topic " + topic} {
		if !strings.Contains(line, want) {
			t.Errorf("the line lacks %s", want)
		}
	}
	testkit.Must(t, <-wrote, "write outbox rows")
	end := f.CurrentLSN()

	// Held: the writers are done, and the relay neither confirms their
	// end nor puts a key on a new partition (given a few check rounds).
	time.Sleep(5 * time.Second)
	r.Running()
	if got := f.ConfirmedLSN(); got >= end {
		t.Fatalf("the relay confirmed %s, the end of the writes, while the topic was held", got)
	}
	old, grownTo := partitioner(3), partitioner(6)
	held := f.ReadTopic(topic)
	for _, rec := range held {
		if key := *rec.Key; rec.Partition != old(key) {
			t.Errorf("record %s (key %s) on partition %d before the accept; want %d, its partition of 3", rec.Headers["ce_id"], key, rec.Partition, old(key))
		}
	}
	wantReady := fmt.Sprintf("503 not ready: publishing nothing to a topic whose partition count changed: %s (recorded 3 partitions, Kafka has 6; walrelay topics accept --topic %s)", topic, topic)
	if got := readyz(t, metrics); got != wantReady {
		t.Errorf("/readyz while %s is held: %q; want %q", topic, got, wantReady)
	}
	list := f.WalrelayOK("topics", "list")
	t.Logf("walrelay topics list:\n%s", list)
	if !strings.Contains(list, "held: run walrelay topics accept --topic "+topic) {
		t.Errorf("topics list does not show %s held", topic)
	}

	_, report := runCheck(t, f)
	if got := report.status("topic partitions"); got != "fail" {
		t.Errorf("check's topic partitions line while %s is held: %s; want fail", topic, got)
	}

	out := f.WalrelayOK("topics", "accept", "--topic", topic, "--reason", "grown by the test")
	t.Logf("walrelay topics accept: %s", out)
	if want := "recorded 6 partitions, was 3"; !strings.Contains(out, want) {
		t.Errorf("accept said %q; want %q", out, want)
	}
	f.WaitConfirmed(r, end, 2*time.Minute)
	r.WaitLine(`"topic's partition count change accepted`, time.Second)
	if got := readyz(t, metrics); got != "200 ready" {
		t.Errorf("/readyz after the accept: %q; want 200 ready", got)
	}
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code %d; want 0", code)
	}

	// Every row arrived, on its topic, each aggregate first on its old
	// partition and then, from some version on, on its new one.
	rows := f.OutboxRows()
	if len(rows) != n {
		t.Fatalf("outbox holds %d rows; the writers committed %d", len(rows), n)
	}
	type placed struct {
		version int64
		moved   bool
	}
	byAggregate := map[string][]placed{}
	seen := map[string]bool{}
	want := map[string]harness.Row{}
	for _, row := range rows {
		want[row.ID] = row
	}
	var onOld, onNew, moved int
	for _, tp := range []string{topic, f.Topic("special")} {
		for _, rec := range f.ReadTopic(tp) {
			id := rec.Headers["ce_id"]
			row, ok := want[id]
			if !ok || seen[id] || f.ExpectedTopic(row) != tp {
				t.Errorf("record %s in %s/%d: unexpected, repeated or on the wrong topic", id, tp, rec.Partition)
				continue
			}
			seen[id] = true
			if tp != topic {
				continue
			}
			key := row.AggregateID
			p := placed{version: *row.Version}
			switch {
			case rec.Partition == old(key):
				onOld++
			case rec.Partition == grownTo(key):
				p.moved = true
				onNew++
			default:
				t.Errorf("record %s (key %s) on partition %d; want %d (of 3) or %d (of 6)", id, key, rec.Partition, old(key), grownTo(key))
			}
			byAggregate[key] = append(byAggregate[key], p)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("lost: %s", id)
		}
	}
	for key, ps := range byAggregate {
		sort.Slice(ps, func(i, j int) bool { return ps[i].version < ps[j].version })
		for i := 1; i < len(ps); i++ {
			if ps[i-1].moved && !ps[i].moved {
				t.Errorf("aggregate %s: version %d on the new layout before version %d on the old", key, ps[i-1].version, ps[i].version)
			}
		}
		if ps[0].moved != ps[len(ps)-1].moved && old(key) != grownTo(key) {
			moved++
		}
	}
	t.Logf("%d rows: %d records of %s by 3 partitions, then %d by 6 (%d of %d aggregates moved partition at the accept)",
		len(rows), onOld, topic, onNew, moved, len(byAggregate))
	if onNew == 0 || onOld == 0 {
		t.Errorf("records by 3: %d, by 6: %d; want both (the growth came in the middle of the load)", onOld, onNew)
	}
}

// partitioner is Java's default partitioner over n partitions.
func partitioner(n int) func(key string) int32 {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	var b kafka.Murmur2Balancer
	return func(key string) int32 { return int32(b.Balance(kafka.Message{Key: []byte(key)}, parts...)) }
}
