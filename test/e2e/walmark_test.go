package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/test/harness"
)

// Every record walrelay run publishes names its stream (the server's system
// identifier, the database and the slot) and its place in it (timeline,
// commit LSN, place in the transaction, partition count): issue 38. In
// each partition the positions rise with the offsets, and the rows of one
// transaction share its commit LSN with places 0, 1, ... each once.
func TestRecordsCarryTheirWALPosition(t *testing.T) {
	t.Parallel()
	f := harness.New(t, "order")
	r := f.Start()
	ctx := context.Background()
	n, err := f.Write(ctx, harness.Load{Writers: 2, Rows: 600, MaxTxRows: 5, AggregatesPerWriter: 7, Types: []string{"order"}})
	testkit.Must(t, err, "write outbox rows")
	f.WaitConfirmed(r, f.CurrentLSN(), 2*time.Minute)
	if code := r.Stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, r.Stderr.String())
	}

	var sysid, db string
	var timeline int32
	testkit.Must(t, f.DB.QueryRow(ctx, `SELECT s.system_identifier::text, current_database(), c.timeline_id
		FROM pg_control_system() s, pg_control_checkpoint() c`).Scan(&sysid, &db, &timeline), "read the system identifier")
	wantSource := schema.WALSource(sysid, db, f.Slot)

	var recs []kafkatest.Record
	topics := map[string]bool{}
	for _, row := range f.OutboxRows() {
		if topic := f.ExpectedTopic(row); !topics[topic] {
			topics[topic] = true
			recs = append(recs, f.ReadTopic(topic)...)
		}
	}
	if len(recs) != n {
		t.Fatalf("%d records on the topic; %d rows committed (one run, no restart: no duplicate expected)", len(recs), n)
	}
	type partition struct {
		topic string
		id    int32
	}
	last := map[partition]schema.Position{}
	places := map[schema.Position]bool{}
	seqs := map[uint64]uint32{} // commit LSN -> places seen
	for _, rec := range recs {
		if got := rec.Headers[schema.HeaderWALSource]; got != wantSource {
			t.Fatalf("record %d/%d: walrelay_source %q; want %q", rec.Partition, rec.Offset, got, wantSource)
		}
		mark, err := schema.ParseWALMark(rec.Headers[schema.HeaderWALPosition])
		testkit.Must(t, err, "record %d/%d", rec.Partition, rec.Offset)
		if mark.Timeline != timeline || mark.Partitions != harness.Partitions {
			t.Errorf("record %d/%d: %+v; want timeline %d and %d partitions", rec.Partition, rec.Offset, mark, timeline, harness.Partitions)
		}
		if prev, ok := last[partition{rec.Topic, rec.Partition}]; ok && !prev.Less(mark.Pos) {
			t.Errorf("partition %d offset %d: position %s after %s; want them rising", rec.Partition, rec.Offset, mark.Pos, prev)
		}
		last[partition{rec.Topic, rec.Partition}] = mark.Pos
		if places[mark.Pos] {
			t.Errorf("position %s twice", mark.Pos)
		}
		places[mark.Pos] = true
		seqs[uint64(mark.Pos.CommitLSN)]++
	}
	for lsn, k := range seqs {
		for seq := range k {
			if p := (schema.Position{CommitLSN: pglogrepl.LSN(lsn), Seq: seq}); !places[p] {
				t.Errorf("transaction at %s: %d rows, but no row at place %d", p.CommitLSN, k, seq)
			}
		}
	}
	if len(seqs) < n/5 {
		t.Errorf("%d transactions for %d rows of at most 5 a transaction", len(seqs), n)
	}
	t.Logf("%d records in %d transactions, every one marked", n, len(seqs))
}
