package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/test/harness"
)

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
	testkit.Must(b.t, err, "begin")
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	var xid string
	testkit.Must(b.t, tx.QueryRow(ctx, "SELECT (txid_current() % 4294967296)::text").Scan(&xid), "read the transaction id")
	for _, r := range rows {
		sql, args := r.insert(b.f.Table)
		_, err := tx.Exec(ctx, sql, args...)
		testkit.Must(b.t, err, "insert %s/%s v%d", r.aggType, r.aggID, r.version)
	}
	testkit.Must(b.t, tx.Commit(ctx), "commit")
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
	testkit.Must(b.t, err, "acquire a connection")
	defer conn.Release()
	watch := "watch_" + b.f.ID
	_, err = conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding', true)", watch)
	testkit.Must(b.t, err, "create temporary slot %s", watch)
	defer conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", watch) //nolint:errcheck // temporary anyway
	xid := b.write(rows)
	var end string
	testkit.Must(b.t, conn.QueryRow(ctx, `SELECT max(lsn)::text FROM pg_logical_slot_peek_changes($1, NULL, NULL)
		WHERE xid::text = $2 AND data LIKE 'COMMIT%'`, watch, xid).Scan(&end), "read the commit's end from %s", watch)
	lsn, err := pglogrepl.ParseLSN(end)
	testkit.Must(b.t, err, "parse %s", end)
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
	testkit.Must(b.t, err, "read outbox rows")
	defer res.Close()
	var out []harness.Row
	for res.Next() {
		var r harness.Row
		var headers *string
		testkit.Must(b.t, res.Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.Version, &r.Type, &r.Payload, &headers, &r.OccurredAt, &r.Topic), "scan outbox row")
		if headers != nil {
			testkit.Must(b.t, json.Unmarshal([]byte(*headers), &r.Headers), "headers of %s", r.ID)
		}
		r.Type = rowType
		out = append(out, r)
	}
	testkit.Must(b.t, res.Err(), "read outbox rows")
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

func idList(rows []*outRow) string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return strings.Join(ids, ",")
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
