package slot_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/testkit/pgtest"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// fixture is one test's own outbox table, publication and slot names, and a
// plain SQL connection used from the test goroutine only. Everything it
// names is dropped in t.Cleanup.
type fixture struct {
	t     *testing.T
	db    *pgtest.DB
	url   string
	conn  *pgx.Conn
	table schema.Table
	pub   string
	slot  string
}

// newFixture creates the test's outbox table; the publication and slot are
// only named, for Init or the test to create.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := pgtest.New(t, "wrslot_")
	base := db.Name
	f := &fixture{
		t:     t,
		db:    db,
		url:   db.URL,
		conn:  db.Conn(),
		table: schema.Table{Schema: "public", Name: base + "_outbox"},
		pub:   base + "_pub",
		slot:  base,
	}
	db.DropSlot(f.slot)
	db.DropPublication(f.pub)
	db.DropTable(f.table.Quoted(), f.other().Quoted(), f.recoveries().Quoted())
	// The outbox columns make the table pass the "table columns" rule;
	// the tests write and read the note.
	f.exec("CREATE TABLE " + f.table.Quoted() + " (id bigserial PRIMARY KEY, note text NOT NULL," +
		" message_id uuid, aggregate_type text, aggregate_id text, type text, payload jsonb)")
	return f
}

// config is a stream configuration for the fixture's objects.
func (f *fixture) config() slot.Config {
	return slot.Config{
		ConnString:     f.url,
		Slot:           f.slot,
		Publication:    f.pub,
		Table:          f.table,
		StatusInterval: 150 * time.Millisecond,
		ConnectTimeout: 5 * time.Second,
		ActiveRetryMin: 100 * time.Millisecond,
		ActiveRetryMax: 300 * time.Millisecond,
	}
}

// other is a second table of the fixture, outside the publication.
func (f *fixture) other() schema.Table {
	return schema.Table{Schema: f.table.Schema, Name: f.slot + "_other"}
}

// recoveries is the fixture's recoveries table, where slot.Config puts it
// by default; it exists only once a test creates it.
func (f *fixture) recoveries() schema.Table {
	return schema.Table{Schema: f.table.Schema, Name: f.table.Name + "_recoveries"}
}

// schemaConfig is the outbox contract of the fixture's names.
func (f *fixture) schemaConfig() schema.Config {
	return schema.Config{Table: f.table, Publication: f.pub, Columns: schema.DefaultColumns()}
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.conn.Exec(ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: got %v; want nil", sql, err)
	}
}

func (f *fixture) queryLSN(sql string, args ...any) pglogrepl.LSN {
	f.t.Helper()
	return f.db.LSN(sql, args...)
}

// insert writes one outbox row with note in its own committed transaction.
func (f *fixture) insert(note string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, f.conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+f.table.Quoted()+" (note) VALUES ($1)", note)
		return err
	})
	if err != nil {
		f.t.Fatalf("insert %q into %s: got %v; want nil", note, f.table, err)
	}
}

// slotInfo reads the slot's row of pg_replication_slots.
func (f *fixture) slotInfo() slot.Info {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := slot.ReadSlot(ctx, f.conn, f.slot)
	if err != nil {
		f.t.Fatalf("read slot %q: got %v; want nil", f.slot, err)
	}
	return info
}

// initSlot runs Init and fails the test on an error.
func (f *fixture) initSlot() slot.Info {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := slot.Init(ctx, f.config(), zaptest.NewLogger(f.t))
	if err != nil {
		f.t.Fatalf("Init: got %v; want nil", err)
	}
	return info
}

// replyStat is what pg_stat_replication says of the walsender serving the
// slot: the flush position of the last standby status update and its
// client time.
type replyStat struct {
	flush pglogrepl.LSN
	reply time.Time
	ok    bool
}

func (f *fixture) replyStat() replyStat {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		flush *string
		reply *time.Time
	)
	err := f.conn.QueryRow(ctx, `SELECT r.flush_lsn::text, r.reply_time FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, f.slot).Scan(&flush, &reply)
	if errors.Is(err, pgx.ErrNoRows) {
		return replyStat{}
	}
	if err != nil {
		f.t.Fatalf("read pg_stat_replication of slot %q: got %v; want a row", f.slot, err)
	}
	st := replyStat{ok: true}
	if flush != nil {
		if st.flush, err = pglogrepl.ParseLSN(*flush); err != nil {
			f.t.Fatalf("parse flush_lsn %q: got %v; want nil", *flush, err)
		}
	}
	if reply != nil {
		st.reply = *reply
	}
	return st
}

// waitReplies waits until the walsender has received n standby status
// updates with a client time after since. It returns the last one seen.
func (f *fixture) waitReplies(since time.Time, n int, within time.Duration) replyStat {
	f.t.Helper()
	var last replyStat
	seen := 0
	poll.EventuallyEvery(f.t, within, 10*time.Millisecond, fmt.Sprintf("%d status updates on slot %q after %s", n, f.slot, since.Format(time.RFC3339Nano)), func() (string, bool) {
		st := f.replyStat()
		if st.ok && st.reply.After(since) && !st.reply.Equal(last.reply) {
			seen++
			last = st
		}
		return fmt.Sprintf("%d", seen), seen >= n
	})
	return last
}

// waitConfirmed polls pg_replication_slots until confirmed_flush_lsn is
// want, and returns how long that took.
func (f *fixture) waitConfirmed(want pglogrepl.LSN, within time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	poll.EventuallyEvery(f.t, within, 10*time.Millisecond, fmt.Sprintf("confirmed_flush_lsn of slot %q %s", f.slot, want), func() (string, bool) {
		got := f.slotInfo().ConfirmedFlush
		return got.String(), got == want
	})
	return time.Since(start)
}

// run is one Stream.Run in its own goroutine, with a buffered out channel
// and a position backed by an atomic.
type run struct {
	t       *testing.T
	cancel  context.CancelFunc
	events  chan slot.Event
	drained chan struct{}
	done    chan error
	pos     atomic.Uint64
	stopped sync.Once
}

// startRun starts cfg's stream; t.Cleanup stops it if the test did not.
func startRun(t *testing.T, cfg slot.Config, buffer int) *run {
	t.Helper()
	st, err := slot.New(cfg, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatalf("slot.New: got %v; want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{
		t:       t,
		cancel:  cancel,
		events:  make(chan slot.Event, buffer),
		drained: make(chan struct{}),
		done:    make(chan error, 1),
	}
	pos := func() pglogrepl.LSN { return pglogrepl.LSN(r.pos.Load()) }
	go func() { r.done <- st.Run(ctx, r.events, pos, r.drained) }()
	t.Cleanup(func() {
		r.cancel()
		r.drain(10 * time.Second)
		r.closeDrained()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Errorf("cleanup: Run did not return within 10s after cancel and drained")
		}
	})
	return r
}

func (r *run) setPos(lsn pglogrepl.LSN) { r.pos.Store(uint64(lsn)) }

func (r *run) closeDrained() { r.stopped.Do(func() { close(r.drained) }) }

// drain discards events until out is closed; it reports whether it was.
func (r *run) drain(within time.Duration) bool {
	timeout := time.After(within)
	for {
		select {
		case _, ok := <-r.events:
			if !ok {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// next returns the next event that is not a keepalive.
func (r *run) next(within time.Duration) slot.Event {
	r.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				r.t.Fatalf("out: got closed (Run returned %v); want an event", r.result(time.Second))
			}
			if ev.Kind != slot.KindKeepalive {
				return ev
			}
		case <-timeout:
			r.t.Fatalf("next event: got none within %s; want one", within)
		}
	}
}

// result waits for Run's error.
func (r *run) result(within time.Duration) error {
	select {
	case err := <-r.done:
		r.done <- err // keep it for the cleanup
		return err
	case <-time.After(within):
		return fmt.Errorf("Run still running after %s", within)
	}
}

// start expects KindStart and returns its position.
func (r *run) start(within time.Duration) pglogrepl.LSN {
	r.t.Helper()
	ev := r.next(within)
	if ev.Kind != slot.KindStart {
		r.t.Fatalf("first event: got kind %d; want KindStart (%d)", ev.Kind, slot.KindStart)
	}
	return ev.Pos
}

// txn is one decoded transaction as delivered: its message types in order,
// its data events, and the end LSN of its Commit.
type txn struct {
	types  string
	events []slot.Event
	end    pglogrepl.LSN
}

// nextTxn collects Data events from a Begin up to and including its Commit.
func (r *run) nextTxn(within time.Duration) txn {
	r.t.Helper()
	var tx txn
	deadline := time.Now().Add(within)
	for {
		ev := r.next(time.Until(deadline))
		if ev.Kind != slot.KindData || len(ev.Data) == 0 {
			r.t.Fatalf("event in a transaction: got kind %d with %d bytes; want KindData", ev.Kind, len(ev.Data))
		}
		if ev.Data[0] == 'M' && tx.types == "" {
			// A logical message outside any transaction reaches every
			// slot of the database: another test's heartbeat.
			continue
		}
		tx.types += string(ev.Data[0])
		tx.events = append(tx.events, ev)
		if ev.Data[0] == 'C' {
			tx.end = commitEndLSN(r.t, ev.Data)
			return tx
		}
	}
}

// commitEndLSN reads a pgoutput Commit: 'C', flags(1), commit LSN(8), end
// LSN(8), commit time(8).
func commitEndLSN(t *testing.T, data []byte) pglogrepl.LSN {
	t.Helper()
	if len(data) != 26 || data[0] != 'C' {
		t.Fatalf("commit message: got %q (%d bytes); want 'C' and 26 bytes", data[:min(len(data), 1)], len(data))
	}
	return pglogrepl.LSN(binary.BigEndian.Uint64(data[10:18]))
}

// insertedNote returns the note column of a pgoutput Insert message.
func insertedNote(t *testing.T, data []byte) string {
	t.Helper()
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		t.Fatalf("parse pgoutput message %q: got %v; want nil", data[:1], err)
	}
	ins, ok := msg.(*pglogrepl.InsertMessage)
	if !ok || ins.Tuple == nil || len(ins.Tuple.Columns) < 2 {
		t.Fatalf("insert message: got %T %+v; want an insert of (id, note, ...)", msg, msg)
	}
	return string(ins.Tuple.Columns[1].Data)
}

// firstInsert returns the note of tx's first Insert.
func (tx txn) firstInsert(t *testing.T) string {
	t.Helper()
	for _, ev := range tx.events {
		if ev.Data[0] == 'I' {
			return insertedNote(t, ev.Data)
		}
	}
	t.Fatalf("transaction %q: got no Insert; want one", tx.types)
	return ""
}
