package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/schema"
)

// Every payload column type of the contract, on connections in every
// query exec mode of pgx: the payload arrives byte for byte (jsonb: as
// PostgreSQL normalizes it), backslashes and all.
func TestEveryPayloadColumnTypeInEveryQueryExecMode(t *testing.T) {
	const raw = `{"path":"C:\\temp\\x","q":"\"hi\"","u":"\u00e9 é","n":"a\nb","oct":"\\123"}`
	modes := []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol}
	for _, c := range []struct{ typ, using, read string }{
		{"jsonb", "payload", "payload::text"},
		{"json", "payload::json", "payload::text"},
		{"text", "payload::text", "payload"},
		{"bytea", "convert_to(payload::text, 'UTF8')", "convert_from(payload, 'UTF8')"},
	} {
		t.Run(c.typ, func(t *testing.T) {
			tb := newTable(t, schema.DefaultColumns())
			ctx := context.Background()
			_, err := tb.db.Exec(ctx, "ALTER TABLE "+tb.cfg.Table.Quoted()+" ALTER COLUMN payload TYPE "+c.typ+" USING "+c.using)
			testkit.Must(t, err, "make the payload column %s", c.typ)
			want := raw
			if c.typ == "jsonb" {
				testkit.Must(t, tb.db.QueryRow(ctx, "SELECT $1::jsonb::text", raw).Scan(&want), "normalize")
			}
			w := tb.writer(t)
			for _, mode := range modes {
				id := writeInMode(t, tb, w, mode, json.RawMessage(raw))
				var got string
				testkit.Must(t, tb.db.QueryRow(ctx, "SELECT "+c.read+" FROM "+tb.cfg.Table.Quoted()+" WHERE message_id = $1", id.String()).Scan(&got),
					"read the payload written in mode %v", mode)
				if got != want {
					t.Errorf("mode %v: payload %s; want %s", mode, got, want)
				}
			}
		})
	}
}

// writeInMode writes one message on a connection of its own whose default
// query exec mode is mode, and commits.
func writeInMode(t *testing.T, tb *table, w *outbox.Writer, mode pgx.QueryExecMode, payload any) schema.MessageID {
	t.Helper()
	ctx := outbox.WithCorrelationID(context.Background(), "req-1")
	cfg, err := pgx.ParseConfig(rig.PGURL(t))
	testkit.Must(t, err, "parse postgres url")
	cfg.DefaultQueryExecMode = mode
	conn, err := pgx.ConnectConfig(ctx, cfg)
	testkit.Must(t, err, "connect")
	defer conn.Close(ctx)
	msg := &outbox.Message{AggregateType: "order", AggregateID: "o-1", AggregateVersion: 3, HasVersion: true,
		Type: "t.v1", Payload: payload, Headers: map[string]string{"k": `v\"`}}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return w.Write(ctx, tx, msg) })
	testkit.Must(t, err, "write in mode %v", mode)
	return msg.ID
}
