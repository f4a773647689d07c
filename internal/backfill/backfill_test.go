package backfill_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/backfill"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// fixture is an outbox table of the default contract, a publication for
// it and a slot name, all the test's own.
type fixture struct {
	t       *testing.T
	db      *pgtest.DB
	sc      schema.Config
	slot    slot.Config
	brokers string
	prefix  string // of the topics: PREFIX.{aggregate_type}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t, "wrbf_")
	sc := schema.Config{Table: schema.Table{Schema: "public", Name: db.Name}, Publication: db.Name, Columns: schema.DefaultColumns()}
	ddl, err := schema.DDL(sc)
	if err != nil {
		t.Fatal(err)
	}
	db.DropSlot(db.Name)
	db.DropPublication(db.Name)
	db.DropTable(sc.Table.Quoted(), sc.DeadLetterTable().Quoted(), schema.Table{Schema: "public", Name: db.Name + "_recoveries"}.Quoted())
	db.Exec(ddl)
	f := &fixture{t: t, db: db, sc: sc, brokers: rig.KafkaBrokers(t), prefix: db.Name}
	f.slot = slot.Config{ConnString: db.URL, Slot: db.Name, Publication: db.Name, Table: sc.Table}
	return f
}

// insert writes n rows of aggregate agg with versions from..from+n-1, in
// one transaction each, in the order of vers.
func (f *fixture) insert(agg string, vers ...int) {
	for _, v := range vers {
		f.db.Exec("INSERT INTO "+f.sc.Table.Quoted()+` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload)
			VALUES (gen_random_uuid(), 'order', $1, $2::bigint, 'order.changed', jsonb_build_object('v', $2::bigint))`, agg, v)
	}
}

func (f *fixture) sinkConfig() sink.Config {
	return sink.Config{Brokers: strings.Split(f.brokers, ","), TopicTemplate: f.prefix + ".{aggregate_type}"}
}

// versionsByKey reads topic and returns the aggregate_version headers per
// key, in offset order (one partition per key).
func versionsByKey(t *testing.T, brokers, topic string) (map[string][]int, map[string]int) {
	recs := kafkatest.Read(t, brokers, topic)
	byKey, ids := map[string][]int{}, map[string]int{}
	for _, r := range recs {
		v, err := strconv.Atoi(r.Headers[schema.HeaderAggregateVersion])
		if err != nil || r.Key == nil {
			t.Fatalf("record %+v: want a key and an aggregate_version header", r)
		}
		byKey[*r.Key] = append(byKey[*r.Key], v)
		ids[r.Headers[schema.HeaderID]]++
	}
	return byKey, ids
}

// The snapshot of a new slot is the seam: the rows committed before the
// slot are read and published, in version order per aggregate although
// written out of it, and none committed after, which the slot streams.
func TestRunPublishesTheSnapshotInVersionOrder(t *testing.T) {
	f := newFixture(t)
	f.insert("a", 10, 9, 2) // as text, 10 would sort before 2 and 9
	f.insert("b", 2, 1)
	snap, err := slot.CreateWithSnapshot(context.Background(), f.slot, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("CreateWithSnapshot = %v", err)
	}
	defer snap.Close(context.Background())
	f.insert("a", 11) // after the consistent point: the slot's, not the snapshot's

	cfg := backfill.Config{Decoder: decoder.Config{Table: f.sc.Table, Columns: f.sc.Columns}, Snapshot: snap.Name, Position: snap.ConsistentPoint - 1, Sink: f.sinkConfig(), Verb: "test"}
	res, err := backfill.Run(context.Background(), f.db.Conn(), cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("Run = %v (%+v)", err, res)
	}
	if res.Selected != 5 || res.Published != 5 || res.Parked != 0 {
		t.Errorf("Run = %+v; want 5 selected and published", res)
	}
	if !strings.HasPrefix(res.Order, "aggregate_version, then ") {
		t.Errorf("Order = %q; want aggregate_version first", res.Order)
	}
	byKey, ids := versionsByKey(t, f.brokers, f.prefix+".order")
	if got := fmt.Sprint(byKey["a"], byKey["b"]); got != "[2 9 10] [1 2]" {
		t.Errorf("versions per key in Kafka: a, b = %s; want [2 9 10] [1 2]", got)
	}
	if len(ids) != 5 {
		t.Errorf("distinct ce_id: %d; want 5", len(ids))
	}
	var confirmed string
	f.db.Pool.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.slot.Slot).Scan(&confirmed) //nolint:errcheck // compared below
	if confirmed != snap.ConsistentPoint.String() {
		t.Errorf("slot confirmed_flush_lsn %q; want the consistent point %s", confirmed, snap.ConsistentPoint)
	}
}

// A row the decoder refuses is handed to the sink's park path at the
// position the run gives, and counted; the others go on.
func TestRunParksABadRow(t *testing.T) {
	f := newFixture(t)
	f.insert("a", 1)
	f.db.Exec("INSERT INTO " + f.sc.Table.Quoted() + ` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload, headers)
		VALUES (gen_random_uuid(), 'order', 'bad', 1, 'order.changed', '{}', '["not", "an", "object"]')`) // headers that are not an object
	f.insert("c", 1)
	var mu sync.Mutex
	var parked []schema.DeadLetter
	sc := f.sinkConfig()
	sc.Park = func(_ context.Context, dl schema.DeadLetter) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		parked = append(parked, dl)
		return true, nil
	}
	cfg := backfill.Config{Decoder: decoder.Config{Table: f.sc.Table, Columns: f.sc.Columns}, Position: 0x1001, Sink: sc}
	res, err := backfill.Run(context.Background(), f.db.Conn(), cfg, zaptest.NewLogger(t))
	if err != nil || res.Published != 2 || res.Parked != 1 {
		t.Fatalf("Run = %+v, %v; want 2 published, 1 parked", res, err)
	}
	if len(parked) != 1 || parked[0].Aggregate.ID != "bad" || parked[0].Position != (schema.Position{CommitLSN: 0x1001, Seq: 1}) {
		t.Errorf("parked %+v; want the row of aggregate bad at commit LSN 0/1001", parked)
	}
}

// Count reads what Run would publish, per topic, after the rewrite, and
// publishes nothing; a selection narrows it.
func TestCountPerTopic(t *testing.T) {
	f := newFixture(t)
	f.insert("a", 1, 2)
	f.insert("b", 1)
	cfg := backfill.Config{Decoder: decoder.Config{Table: f.sc.Table, Columns: f.sc.Columns}, Sink: f.sinkConfig(),
		Select:  backfill.Selection{AggregateID: "a"},
		Rewrite: func(m *schema.Message) { m.Topic = "elsewhere" }}
	res, err := backfill.Count(context.Background(), f.db.Conn(), cfg)
	if err != nil || res.Selected != 2 || fmt.Sprint(res.ByTopic) != "map[elsewhere:2]" {
		t.Fatalf("Count = %+v, %v; want 2 rows, all to elsewhere", res, err)
	}
	cfg.Rewrite = nil
	if res, err := backfill.Count(context.Background(), f.db.Conn(), cfg); err != nil || fmt.Sprint(res.ByTopic) != "map["+f.prefix+".order:2]" {
		t.Errorf("Count without the rewrite = %+v, %v; want 2 rows to %s.order", res, err, f.prefix)
	}
	if kafkatest.TopicExists(t, f.brokers, f.prefix+".order") {
		t.Errorf("topic %s.order exists after counting: Count published", f.prefix)
	}
	since := time.Now().Add(time.Hour)
	cfg.Select = backfill.Selection{Since: &since}
	if res, err := backfill.Count(context.Background(), f.db.Conn(), cfg); err != nil || res.Selected != 0 {
		t.Errorf("Count(since an hour ahead) = %+v, %v; want none", res, err)
	}
}

// Rows read as text keep NULL apart from empty: with NullPayload tombstone a
// NULL payload is published as a record with a null value, with the
// content type given, and an empty text payload as an empty value.
func TestRunPublishesANullPayloadAsATombstone(t *testing.T) {
	f := newFixture(t)
	f.db.Exec("ALTER TABLE " + f.sc.Table.Quoted() + " ALTER COLUMN payload DROP NOT NULL, ALTER COLUMN payload TYPE text USING payload::text")
	f.db.Exec("INSERT INTO " + f.sc.Table.Quoted() + ` (message_id, aggregate_type, aggregate_id, aggregate_version, type, payload)
		VALUES (gen_random_uuid(), 'order', 'a', 1, 'order.changed', '{"v": 1}'),
		       (gen_random_uuid(), 'order', 'a', 2, 'order.deleted', NULL),
		       (gen_random_uuid(), 'order', 'a', 3, 'order.changed', '')`)
	dc := decoder.Config{Table: f.sc.Table, Columns: f.sc.Columns, NullPayload: decoder.NullPayloadTombstone, ContentType: "application/json"}
	res, err := backfill.Run(context.Background(), f.db.Conn(), backfill.Config{Decoder: dc, Position: 0x1001, Sink: f.sinkConfig()}, zaptest.NewLogger(t))
	if err != nil || res.Published != 3 {
		t.Fatalf("Run = %+v, %v; want 3 published", res, err)
	}
	recs := kafkatest.Read(t, f.brokers, f.prefix+".order")
	if len(recs) != 3 {
		t.Fatalf("%d records; want 3", len(recs))
	}
	for i, want := range []*string{ptr(`{"v": 1}`), nil, ptr("")} {
		r := recs[i]
		if (r.Payload == nil) != (want == nil) || want != nil && *r.Payload != *want {
			t.Errorf("record %d: value %v; want %v", i, show(r.Payload), show(want))
		}
		ct, ok := r.Headers[schema.HeaderContentType]
		if want == nil && ok || want != nil && ct != "application/json" {
			t.Errorf("record %d: content-type %q (present %v); want application/json, none on the tombstone", i, ct, ok)
		}
	}
}

func ptr(s string) *string { return &s }

func show(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}
