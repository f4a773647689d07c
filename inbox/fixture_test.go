package inbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/inbox"
	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/schema"
)

// fixture is one test's database: its own inbox, versions and effects
// tables, dropped in t.Cleanup.
type fixture struct {
	t        *testing.T
	db       *pgxpool.Pool
	table    schema.Table
	versions schema.Table
	// effects is the handlers' business table: one row per applied effect,
	// with no uniqueness of its own, so that a second effect shows.
	effects string
	reg     *prometheus.Registry
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := pgtest.New(t, "")
	s := pg.Name
	f := &fixture{
		t:        t,
		db:       pg.Pool,
		table:    schema.Table{Schema: "public", Name: "inbox_test_" + s},
		versions: schema.Table{Schema: "public", Name: "inbox_test_versions_" + s},
		effects:  `"public"."inbox_test_effects_` + s + `"`,
		reg:      prometheus.NewRegistry(),
	}
	pg.DropTable(f.table.Quoted(), f.versions.Quoted(), f.effects)
	f.exec(`CREATE TABLE ` + f.effects + ` (consumer text NOT NULL, message_id uuid NOT NULL, version bigint)`)
	return f
}

// exec runs sql outside any inbox transaction.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// count is the single number sql selects.
func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	var n int64
	if err := f.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// inboxRows is the number of inbox rows of consumer.
func (f *fixture) inboxRows(consumer string) int64 {
	f.t.Helper()
	return f.count(`SELECT count(*) FROM `+f.table.Quoted()+` WHERE consumer_id = $1`, consumer)
}

// effectRows is the number of effects consumer applied for id.
func (f *fixture) effectRows(consumer string, id schema.MessageID) int64 {
	f.t.Helper()
	return f.count(`SELECT count(*) FROM `+f.effects+` WHERE consumer = $1 AND message_id = $2`, consumer, id.String())
}

// newInbox returns an inbox of consumer over the fixture's tables and
// registry, its DDL applied (twice: it must be safe to).
func (f *fixture) newInbox(consumer string, opts ...func(*inbox.Config)) *inbox.Inbox {
	f.t.Helper()
	c := inbox.Config{
		ConsumerID:      consumer,
		Table:           f.table,
		Versions:        f.versions,
		RetryBackoffMin: 10 * time.Millisecond,
		RetryBackoffMax: 40 * time.Millisecond,
		Logger:          zaptest.NewLogger(f.t, zaptest.Level(zap.InfoLevel)),
		Registerer:      f.reg,
	}
	for _, o := range opts {
		o(&c)
	}
	in, err := inbox.New(c)
	if err != nil {
		f.t.Fatalf("inbox.New: %v", err)
	}
	f.exec(in.DDL())
	f.exec(in.DDL())
	return in
}

// effect is a handler that records one effect of m for consumer.
func (f *fixture) effect(consumer string) inbox.Handler {
	return func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		var v *int64
		if m.HasVersion {
			v = &m.AggregateVersion
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+f.effects+` (consumer, message_id, version) VALUES ($1, $2, $3)`,
			consumer, m.ID.String(), v)
		return err
	}
}

// messages is the value of walrelay_inbox_messages_total{consumer,result}.
func (f *fixture) messages(consumer, result string) float64 {
	f.t.Helper()
	m := f.metric("walrelay_inbox_messages_total", map[string]string{"consumer": consumer, "result": result})
	if m == nil {
		f.t.Fatalf("walrelay_inbox_messages_total{consumer=%q,result=%q} is not registered", consumer, result)
	}
	return m.GetCounter().GetValue()
}

// handled is the sample count of walrelay_inbox_handle_seconds{consumer}.
func (f *fixture) handled(consumer string) uint64 {
	f.t.Helper()
	m := f.metric("walrelay_inbox_handle_seconds", map[string]string{"consumer": consumer})
	if m == nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// metric finds the series of name with exactly labels in the registry.
func (f *fixture) metric(name string, labels map[string]string) *dto.Metric {
	f.t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return m
			}
		}
	}
	return nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// id is a message id made from n.
func id(n int) schema.MessageID {
	return schema.MessageID(fmt.Sprintf("%04x0000-0000-4000-8000-000000000042", n&0xffff))
}

// message is the n-th test message, version n of aggregate order-<n%5>.
func message(n int) inbox.Message {
	return inbox.Message{
		ID:               id(n),
		Type:             "order.submitted.v1",
		AggregateType:    "order",
		AggregateID:      fmt.Sprintf("order-%d", n%5),
		AggregateVersion: int64(n),
		HasVersion:       true,
		Payload:          []byte(fmt.Sprintf(`{"n":%d}`, n)),
		Topic:            "outbox.order",
		Offset:           int64(n),
	}
}

// inboxTable is public.name.
func inboxTable(name string) schema.Table { return schema.Table{Schema: "public", Name: name} }
