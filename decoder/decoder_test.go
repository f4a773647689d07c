package decoder

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testkit/pgoutputtest"
	"github.com/walrelay/walrelay/schema"
)

func newDecoder(t testing.TB, cfg Config) *Decoder {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// mustDecode decodes msg and fails unless it yields an event of kind want.
func mustDecode(t testing.TB, d *Decoder, msg []byte, want Kind) Event {
	t.Helper()
	ev, err := d.Decode(msg)
	if err != nil {
		t.Fatalf("Decode(%q): %v", msg, err)
	}
	if ev.Kind != want {
		t.Fatalf("Decode(%q) kind = %v; want %v", msg, ev.Kind, want)
	}
	return ev
}

// primed returns a decoder inside a transaction that knows the outbox
// relation with cols.
func primed(t testing.TB, cols []pgoutputtest.Column) *Decoder {
	t.Helper()
	d := newDecoder(t, Config{})
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", cols), KindSkip)
	return d
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "zero config takes defaults", cfg: Config{}},
		{name: "schema defaults to public", cfg: Config{Table: schema.Table{Name: "events"}}},
		{name: "bad table name", cfg: Config{Table: schema.Table{Schema: "public", Name: "a\x00b"}}, wantErr: "table name"},
		{name: "bad schema name", cfg: Config{Table: schema.Table{Schema: strings.Repeat("s", 64), Name: "t"}}, wantErr: "table schema"},
		{name: "empty column", cfg: Config{Columns: schema.Columns{MessageID: "id"}}, wantErr: "column name is empty"},
		{name: "shared column", cfg: func() Config {
			c := schema.DefaultColumns()
			c.Topic = c.Type
			return Config{Columns: c}
		}(), wantErr: "configured for both"},
		{name: "content type", cfg: Config{ContentType: "application/json; charset=utf-8"}},
		{name: "content type vendor", cfg: Config{ContentType: "application/vnd.acme.order+json"}},
		{name: "content type not a media type", cfg: Config{ContentType: "json"},
			wantErr: `decoder.Config.ContentType "json" is not a media type like application/json`},
		{name: "content type with a bad parameter", cfg: Config{ContentType: "text/plain; charset"},
			wantErr: "decoder.Config.ContentType"},
		{name: "content type structured mode", cfg: Config{ContentType: "application/cloudevents+json"},
			wantErr: "structured-mode"},
		{name: "null payload park", cfg: Config{NullPayload: NullPayloadPark}},
		{name: "null payload tombstone", cfg: Config{NullPayload: NullPayloadTombstone}},
		{name: "null payload other", cfg: Config{NullPayload: "drop"},
			wantErr: `decoder.Config.NullPayload is "drop"; want park or tombstone`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("New: %v; want no error", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("New: %v; want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestTransaction(t *testing.T) {
	d := newDecoder(t, Config{})
	ev := mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	if ev.XID != xid || ev.FinalLSN != finalLSN || !ev.CommitTime.Equal(commitTime) {
		t.Fatalf("begin = %+v; want xid %d, final lsn %s, time %v", ev, xid, finalLSN, commitTime)
	}
	mustDecode(t, d, outboxRelation(), KindSkip)
	ev = mustDecode(t, d, outboxInsert(), KindMessage)
	if ev.XID != xid || ev.FinalLSN != finalLSN || ev.Message == nil {
		t.Fatalf("message event = %+v; want xid %d, final lsn %s and a message", ev, xid, finalLSN)
	}
	if ev.Message.CommitLSN != finalLSN || !ev.Message.CommitTime.Equal(commitTime) {
		t.Fatalf("message commit = %s %v; want %s %v", ev.Message.CommitLSN, ev.Message.CommitTime, finalLSN, commitTime)
	}
	ev = mustDecode(t, d, pgoutputtest.Commit(finalLSN, endLSN, commitTime), KindCommit)
	if ev.XID != xid || ev.CommitLSN != finalLSN || ev.EndLSN != endLSN || !ev.CommitTime.Equal(commitTime) {
		t.Fatalf("commit = %+v; want xid %d, commit lsn %s, end lsn %s, time %v", ev, xid, finalLSN, endLSN, commitTime)
	}
	if ev.CommitTime.Location() != time.UTC {
		t.Fatalf("commit time location = %v; want UTC", ev.CommitTime.Location())
	}
	// The next transaction may begin, and the relation is still known.
	mustDecode(t, d, pgoutputtest.Begin(endLSN+0x100, commitTime, xid+1), KindBegin)
	mustDecode(t, d, outboxInsert(), KindMessage)
}

func TestSkipped(t *testing.T) {
	others := []pgoutputtest.Column{{Name: "id", OID: oidInt8}, {Name: "name", OID: oidText}}
	tests := []struct {
		name string
		msg  []byte
	}{
		{"relation", outboxRelation()},
		{"relation of another table", pgoutputtest.Relation(otherRel, "public", "accounts", others)},
		{"row of another table", pgoutputtest.Insert(otherRel, []pgoutputtest.Cell{text("1"), text("x")})},
		{"garbage row of another table", append(binary32('I', otherRel), 'N', 0xFF)},
		{"type", []byte("Y\x00\x00\x40\x00public\x00mood\x00")},
		{"origin", []byte("O\x00\x00\x00\x00\x01\x6B\x37\x48node\x00")},
		{"update", []byte("U\x00\x00\x40\x06N\x00\x00")},
		{"delete", []byte("D\x00\x00\x40\x06K\x00\x00")},
		{"truncate", []byte("T\x00\x00\x00\x01\x00\x00\x00\x00\x40\x06")},
		{"logical message", []byte("M\x00\x00\x00\x00\x00\x01\x6B\x37\x48walrelay\x00\x00\x00\x00\x00")},
		{"transactional heartbeat", pgoutputtest.Message(true, endLSN, schema.HeartbeatPrefix, "s")},
		{"message with a longer prefix", pgoutputtest.Message(false, endLSN, schema.HeartbeatPrefix+"x", "s")},
		{"unknown type", []byte("Z")},
		{"stream start", []byte("S\x00\x00\x00\x01\x01")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := primed(t, outboxColumns())
			mustDecode(t, d, pgoutputtest.Relation(otherRel, "public", "accounts", others), KindSkip)
			ev := mustDecode(t, d, tt.msg, KindSkip)
			if ev != (Event{}) {
				t.Fatalf("skip event = %+v; want the zero Event", ev)
			}
		})
	}
}

// A heartbeat written outside a transaction yields its position; the
// decoder's state is untouched, so an open transaction stays open.
func TestHeartbeat(t *testing.T) {
	d := newDecoder(t, Config{})
	ev := mustDecode(t, d, pgoutputtest.Message(false, endLSN, schema.HeartbeatPrefix, "walrelay"), KindHeartbeat)
	if want := (Event{Kind: KindHeartbeat, EndLSN: endLSN}); ev != want {
		t.Fatalf("heartbeat: got %+v; want %+v", ev, want)
	}
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	mustDecode(t, d, pgoutputtest.Message(false, endLSN+8, schema.HeartbeatPrefix, ""), KindHeartbeat)
	if ev := mustDecode(t, d, pgoutputtest.Commit(finalLSN, endLSN, commitTime), KindCommit); ev.XID != xid {
		t.Fatalf("commit after a heartbeat: got xid %d; want %d", ev.XID, xid)
	}
	if _, err := d.Decode(append(pgoutputtest.Message(false, endLSN, schema.HeartbeatPrefix, "ab"), 'x')); err == nil {
		t.Fatal("heartbeat with a trailing byte decoded; want an error")
	}
}

func binary32(kind byte, v uint32) []byte {
	return []byte{kind, byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func TestOtherSchemaSameName(t *testing.T) {
	d := newDecoder(t, Config{})
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "audit", "outbox_messages", outboxColumns()), KindSkip)
	mustDecode(t, d, outboxInsert(), KindSkip)
}

func TestCustomTableAndColumns(t *testing.T) {
	cols := schema.DefaultColumns()
	cols.MessageID, cols.Payload = "id", "body"
	d := newDecoder(t, Config{Table: schema.Table{Schema: "app", Name: "Outbox"}, Columns: cols})
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
	layout := outboxColumns()
	layout[0].Name, layout[5].Name = "id", "body"
	row := outboxRow()
	row["id"], row["body"] = row["message_id"], row["payload"]
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "app", "Outbox", layout), KindSkip)
	ev := mustDecode(t, d, pgoutputtest.Insert(outboxRel, rowFor(layout, row)), KindMessage)
	if got := string(ev.Message.Payload); got != `{"total": 10}` {
		t.Fatalf("payload = %q; want %q", got, `{"total": 10}`)
	}
	// A missing column is reported under its configured name.
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "app", "Outbox", outboxColumns()), KindSkip)
	_, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(outboxColumns(), outboxRow())))
	var bad *BadRowError
	if !errors.As(err, &bad) || bad.Field != schema.FieldMessageID || bad.Column != "id" {
		t.Fatalf("err = %v; want a bad row for column id (message_id)", err)
	}
	want := `bad outbox row aggregate_id="42" in transaction 0/16B3748: column "id" (message_id): missing from the table`
	if err.Error() != want {
		t.Fatalf("err = %q; want %q", err, want)
	}
}

func TestProtocolErrors(t *testing.T) {
	withBinary := rowFor(outboxColumns(), outboxRow())
	withBinary[5] = pgoutputtest.Binary("\x01{}")
	tests := []struct {
		name    string
		msgs    [][]byte // all but the last must succeed
		wantErr string
	}{
		{"empty message", [][]byte{{}}, "empty message"},
		{"begin inside a transaction", [][]byte{pgoutputtest.Begin(1, commitTime, 1), pgoutputtest.Begin(2, commitTime, 2)}, "transaction 1 (final lsn 0/1) has not committed"},
		{"commit outside a transaction", [][]byte{pgoutputtest.Commit(1, 2, commitTime)}, "no transaction is open"},
		{"insert outside a transaction", [][]byte{outboxRelation(), outboxInsert()}, "no transaction is open"},
		{"insert outside a transaction after commit", [][]byte{
			pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), pgoutputtest.Commit(1, 2, commitTime), outboxInsert(),
		}, "no transaction is open"},
		{"insert for unknown relation", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxInsert()}, "relation 16390 was never announced"},
		{"binary value", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), pgoutputtest.Insert(outboxRel, withBinary)}, "binary column values are not supported"},
		{"too few columns", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), pgoutputtest.Insert(outboxRel, rowFor(outboxColumns(), outboxRow())[:8])}, "row has 8 columns, relation has 9"},
		{"unknown value kind", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), pgoutputtest.Insert(outboxRel, []pgoutputtest.Cell{{Kind: 'x'}})}, `unknown kind 'x'`},
		{"not a new tuple", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), append(binary32('I', outboxRel), 'K', 0, 0)}, "tuple kind 'K'"},
		{"trailing bytes after begin", [][]byte{append(pgoutputtest.Begin(1, commitTime, 1), 0)}, "1 unexpected bytes"},
		{"trailing bytes after insert", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), append(outboxInsert(), 0, 0)}, "2 unexpected bytes"},
		{"trailing bytes after relation", [][]byte{append(outboxRelation(), 0)}, "1 unexpected bytes"},
		{"huge value length", [][]byte{pgoutputtest.Begin(1, commitTime, 1), outboxRelation(), append(binary32('I', outboxRel), 'N', 0, 1, 't', 0xFF, 0xFF, 0xFF, 0xFF)}, "truncated"},
		{"huge column count", [][]byte{append(binary32('R', 1), 'p', 0, 't', 0, 'd', 0xFF, 0xFF)}, "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder(t, Config{})
			last := len(tt.msgs) - 1
			for _, m := range tt.msgs[:last] {
				if _, err := d.Decode(m); err != nil {
					t.Fatalf("Decode(%q): %v", m, err)
				}
			}
			_, err := d.Decode(tt.msgs[last])
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v; want error containing %q", err, tt.wantErr)
			}
			if IsBadRow(err) {
				t.Fatalf("err = %v is a bad row; want a protocol error", err)
			}
		})
	}
}

// TestTruncated feeds every proper prefix of each valid message to a decoder
// in the state that accepts the whole message: each must be an error.
func TestTruncated(t *testing.T) {
	msgs := map[string][]byte{
		"begin":    pgoutputtest.Begin(finalLSN, commitTime, xid),
		"commit":   pgoutputtest.Commit(finalLSN, endLSN, commitTime),
		"relation": outboxRelation(),
		"insert":   outboxInsert(),
		"message":  pgoutputtest.Message(false, endLSN, schema.HeartbeatPrefix, "walrelay"),
	}
	for name, msg := range msgs {
		t.Run(name, func(t *testing.T) {
			for n := 0; n < len(msg); n++ {
				d := newDecoder(t, Config{})
				mustDecode(t, d, outboxRelation(), KindSkip)
				if name != "begin" {
					mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
				}
				prefix := bytes.Clone(msg[:n])
				ev, err := d.Decode(prefix)
				if err == nil {
					t.Fatalf("Decode(%q) = %+v; want an error for a %d-byte prefix", prefix, ev, n)
				}
				if IsBadRow(err) {
					t.Fatalf("Decode(%q): %v is a bad row; want a protocol error", prefix, err)
				}
			}
		})
	}
	// A truncated Begin opens no transaction.
	d := newDecoder(t, Config{})
	if _, err := d.Decode(pgoutputtest.Begin(finalLSN, commitTime, xid)[:10]); err == nil {
		t.Fatal("truncated begin decoded")
	}
	mustDecode(t, d, pgoutputtest.Begin(finalLSN, commitTime, xid), KindBegin)
}

func TestRelationReplaced(t *testing.T) {
	d := primed(t, outboxColumns())
	want := mustDecode(t, d, outboxInsert(), KindMessage).Message

	// Column added and columns reordered.
	added := append([]pgoutputtest.Column{{Name: "tenant", OID: oidText}}, outboxColumns()...)
	added[1], added[9] = added[9], added[1]
	row := outboxRow()
	row["tenant"] = text("acme")
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", added), KindSkip)
	got := mustDecode(t, d, pgoutputtest.Insert(outboxRel, rowFor(added, row)), KindMessage).Message
	want.Seq = 1 // the transaction's second outbox row
	assertMessage(t, got, want)

	// The old layout is gone: a row in it now has the wrong column count.
	if _, err := d.Decode(outboxInsert()); err == nil || !strings.Contains(err.Error(), "row has 9 columns, relation has 10") {
		t.Fatalf("old-layout row: err = %v; want a column count error", err)
	}

	// Optional column dropped.
	dropped := outboxColumns()[:8] // no topic
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", dropped), KindSkip)
	got = mustDecode(t, d, pgoutputtest.Insert(outboxRel, rowFor(dropped, row)), KindMessage).Message
	want.Seq = 2
	assertMessage(t, got, want)

	// Required column dropped: every row is bad, and the stream goes on.
	noPayload := append(outboxColumns()[:5:5], outboxColumns()[6:]...)
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", noPayload), KindSkip)
	_, err := d.Decode(pgoutputtest.Insert(outboxRel, rowFor(noPayload, row)))
	var bad *BadRowError
	if !errors.As(err, &bad) || bad.Field != schema.FieldPayload || !bad.HasID || bad.AggregateID != "42" || bad.Seq != 3 {
		t.Fatalf("err = %#v; want a bad payload row with id, aggregate id and seq 3", err)
	}
	// The bad row keeps every column it had, as text.
	if v := bad.Row["aggregate_id"]; v == nil || *v != "42" || len(bad.Row) != len(noPayload) {
		t.Fatalf("bad row's columns: got %d, aggregate_id %v; want all %d with aggregate_id 42", len(bad.Row), v, len(noPayload))
	}
	// A new transaction counts its rows from 0 again.
	mustDecode(t, d, pgoutputtest.Commit(finalLSN, endLSN, commitTime), KindCommit)
	mustDecode(t, d, pgoutputtest.Begin(finalLSN+0x100, commitTime, xid+1), KindBegin)
	mustDecode(t, d, pgoutputtest.Relation(outboxRel, "public", "outbox_messages", outboxColumns()), KindSkip)
	if got := mustDecode(t, d, outboxInsert(), KindMessage).Message; got.Seq != 0 || got.CommitLSN != finalLSN+0x100 {
		t.Fatalf("first row of the next transaction: got position %s; want %s#0", got.Position(), finalLSN+0x100)
	}
	mustDecode(t, d, pgoutputtest.Commit(finalLSN, endLSN, commitTime), KindCommit)
}

// TestFixturesMatchPglogrepl checks the hand-built fixtures against an
// independent parser of the same wire format.
func TestFixturesMatchPglogrepl(t *testing.T) {
	msg, err := pglogrepl.Parse(pgoutputtest.Begin(finalLSN, commitTime, xid))
	if b, ok := msg.(*pglogrepl.BeginMessage); err != nil || !ok || b.FinalLSN != finalLSN || b.Xid != xid || !b.CommitTime.Equal(commitTime) {
		t.Fatalf("begin fixture parses as %+v, %v", msg, err)
	}
	msg, err = pglogrepl.Parse(pgoutputtest.Commit(finalLSN, endLSN, commitTime))
	if c, ok := msg.(*pglogrepl.CommitMessage); err != nil || !ok || c.CommitLSN != finalLSN || c.TransactionEndLSN != endLSN || !c.CommitTime.Equal(commitTime) {
		t.Fatalf("commit fixture parses as %+v, %v", msg, err)
	}
	msg, err = pglogrepl.Parse(outboxRelation())
	r, ok := msg.(*pglogrepl.RelationMessage)
	if err != nil || !ok || r.RelationID != outboxRel || r.Namespace != "public" || r.RelationName != "outbox_messages" || len(r.Columns) != 9 ||
		r.Columns[8].Name != "topic" || r.Columns[5].DataType != oidJSONB {
		t.Fatalf("relation fixture parses as %+v, %v", msg, err)
	}
	msg, err = pglogrepl.Parse(outboxInsert())
	ins, ok := msg.(*pglogrepl.InsertMessage)
	if err != nil || !ok || ins.RelationID != outboxRel || len(ins.Tuple.Columns) != 9 ||
		string(ins.Tuple.Columns[2].Data) != "42" || ins.Tuple.Columns[8].DataType != 'n' {
		t.Fatalf("insert fixture parses as %+v, %v", msg, err)
	}
}
