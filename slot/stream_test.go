package slot_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/slot"
)

// oneInsert is the pgoutput shape of a transaction with one outbox insert:
// the Relation message comes first in a session that has not described the
// table yet.
// Leading M: other tests' heartbeats (pg_logical_emit_message, non-transactional, same
// database) reach every slot of the database, since the stream asks for messages.
var oneInsert = regexp.MustCompile(`^M*BR?IC$`)

// running reports whether Run has not returned yet.
func (r *run) running() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return false
	default:
		return true
	}
}

// stop cancels Run, expects out to close, closes drained and expects Run to
// return nil.
func (r *run) stop() {
	r.t.Helper()
	r.cancel()
	if !r.drain(10 * time.Second) {
		r.t.Fatalf("out after cancel: got open after 10s; want closed")
	}
	r.closeDrained()
	if err := r.result(10 * time.Second); err != nil {
		r.t.Fatalf("Run after cancel and drained: got %v; want nil", err)
	}
}

func TestStreamDeliversAndConfirms(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	initial := f.initSlot()
	cfg := f.config()
	r := startRun(t, cfg, 1024)

	if got := r.start(10 * time.Second); got != initial.ConfirmedFlush {
		t.Fatalf("KindStart position: got %s; want the slot's confirmed_flush_lsn %s", got, initial.ConfirmedFlush)
	}

	f.insert("one")
	tx := r.nextTxn(10 * time.Second)
	if !oneInsert.MatchString(tx.types) {
		t.Fatalf("pgoutput messages of one insert: got %q; want %s", tx.types, oneInsert)
	}
	msg, err := pglogrepl.Parse(tx.events[len(tx.events)-1].Data)
	if c, ok := msg.(*pglogrepl.CommitMessage); err != nil || !ok || c.TransactionEndLSN != tx.end {
		t.Fatalf("commit end LSN read by hand: got %s; want pglogrepl's %+v (err %v)", tx.end, msg, err)
	}
	if tx.end <= initial.ConfirmedFlush {
		t.Fatalf("commit end LSN: got %s; want past the start %s", tx.end, initial.ConfirmedFlush)
	}

	r.setPos(tx.end)
	took := f.waitConfirmed(tx.end, 20*cfg.StatusInterval)
	t.Logf("confirmed_flush_lsn reached %s %s after pos did (status interval %s)", tx.end, took, cfg.StatusInterval)

	// Position goes back: the stream keeps sending what it sent before.
	r.setPos(initial.ConfirmedFlush)
	st := f.waitReplies(time.Now(), 2, 20*cfg.StatusInterval)
	if st.flush != tx.end {
		t.Errorf("flush_lsn of a status update after pos went back: got %s; want %s", st.flush, tx.end)
	}
	if got := f.slotInfo().ConfirmedFlush; got != tx.end {
		t.Errorf("confirmed_flush_lsn after pos went back: got %s; want %s", got, tx.end)
	}

	f.insert("two")
	tx2 := r.nextTxn(10 * time.Second)
	if !oneInsert.MatchString(tx2.types) || tx2.end <= tx.end {
		t.Fatalf("second transaction: got %q ending at %s; want %s ending after %s", tx2.types, tx2.end, oneInsert, tx.end)
	}

	r.cancel()
	if !r.drain(10 * time.Second) {
		t.Fatalf("out after cancel: got open after 10s; want closed")
	}
	// Until drained is closed, Run waits and keeps answering the server.
	since := time.Now()
	time.Sleep(2 * cfg.StatusInterval)
	if !r.running() {
		t.Fatalf("Run before drained was closed: got returned (%v); want still running", r.result(0))
	}
	f.waitReplies(since, 2, 20*cfg.StatusInterval)
	r.setPos(tx2.end)
	r.closeDrained()
	if err := r.result(10 * time.Second); err != nil {
		t.Fatalf("Run after cancel and drained: got %v; want nil", err)
	}
	f.waitConfirmed(tx2.end, 5*time.Second)
}

// TestStreamFinalStatusUpdate uses status and confirm intervals longer than
// the test: the only status update that can confirm is the final one.
func TestStreamFinalStatusUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	initial := f.initSlot()
	cfg := f.config()
	cfg.StatusInterval = time.Hour
	cfg.ConfirmInterval = time.Hour
	r := startRun(t, cfg, 1024)
	r.start(10 * time.Second)

	f.insert("one")
	tx := r.nextTxn(10 * time.Second)
	r.setPos(tx.end)
	time.Sleep(300 * time.Millisecond)
	if got := f.slotInfo().ConfirmedFlush; got != initial.ConfirmedFlush {
		t.Fatalf("confirmed_flush_lsn before any status update: got %s; want %s", got, initial.ConfirmedFlush)
	}

	r.stop()
	f.waitConfirmed(tx.end, 5*time.Second)
}

// TestStreamConfirmsWhileConsumerBlocked keeps the consumer of an unbuffered
// out channel away (Kafka down): status updates must still go out and carry
// the position.
func TestStreamConfirmsWhileConsumerBlocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	cfg := f.config()
	r := startRun(t, cfg, 0)
	r.start(10 * time.Second)
	f.insert("one")
	tx := r.nextTxn(10 * time.Second)

	// The stream now blocks handing over the next transaction's Begin.
	f.insert("two")
	time.Sleep(2 * cfg.StatusInterval)
	r.setPos(tx.end)
	f.waitConfirmed(tx.end, 20*cfg.StatusInterval)

	tx2 := r.nextTxn(10 * time.Second)
	if !oneInsert.MatchString(tx2.types) || tx2.firstInsert(t) != "two" {
		t.Errorf("transaction after the blocked consumer came back: got %q; want %s inserting %q", tx2.types, oneInsert, "two")
	}
}

func TestStreamKeepalive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	cfg := f.config()
	r := startRun(t, cfg, 1024)
	r.start(10 * time.Second)

	// WAL that the publication does not cover; the outbox stays idle.
	f.exec("CREATE TABLE " + f.other().Quoted() + " (id int)")
	f.exec("INSERT INTO " + f.other().Quoted() + " SELECT generate_series(1, 100)")
	wal := f.queryLSN("SELECT pg_current_wal_lsn()::text")

	within := 10 * cfg.StatusInterval
	start := time.Now()
	timeout := time.After(within)
	var last pglogrepl.LSN
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				t.Fatalf("out: got closed (Run returned %v); want a keepalive", r.result(time.Second))
			}
			switch {
			case ev.Kind == slot.KindKeepalive && ev.Pos >= wal:
				t.Logf("keepalive at %s >= %s after %s", ev.Pos, wal, time.Since(start))
				return
			case ev.Kind == slot.KindKeepalive:
				last = ev.Pos
			case ev.Kind == slot.KindData && (ev.Data[0] == 'B' || ev.Data[0] == 'C'):
				// An empty transaction: servers before 15 send them.
			case ev.Kind == slot.KindData && ev.Data[0] == 'M':
				// A logical message, which reaches every slot of the
				// database: the heartbeat of a test running beside this one.
			default:
				t.Fatalf("event with an idle outbox: got kind %d %q; want keepalives", ev.Kind, ev.Data)
			}
		case <-timeout:
			t.Fatalf("keepalive within %s: got last at %s; want one at or past %s", within, last, wal)
		}
	}
}

// TestStreamAnswersReplyRequests makes the server ask for a reply every
// second (half of wal_sender_timeout=2s) while the timer would wait an hour:
// three replies take longer than the timeout, so the connection survives
// only if the stream answers the requests.
func TestStreamAnswersReplyRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	cfg := f.config()
	cfg.StatusInterval = time.Hour
	sep := "?"
	if strings.Contains(cfg.ConnString, "?") {
		sep = "&"
	}
	cfg.ConnString += sep + "options=-c%20wal_sender_timeout%3D2s"
	r := startRun(t, cfg, 1024)
	r.start(10 * time.Second)

	f.waitReplies(time.Now(), 3, 8*time.Second)
	if !r.running() {
		t.Fatalf("Run with wal_sender_timeout=2s: got returned (%v); want still running", r.result(0))
	}
	r.stop()
}

func TestStreamWaitsForActiveSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	initial := f.initSlot()
	cfg := f.config()
	a := startRun(t, cfg, 1024)
	a.start(10 * time.Second)

	cfg.ActiveRetryMin, cfg.ActiveRetryMax = 100*time.Millisecond, 300*time.Millisecond
	b := startRun(t, cfg, 1024)
	select {
	case ev, ok := <-b.events:
		t.Fatalf("stream B while A holds the slot: got event %+v (open %t, Run %v); want none", ev, ok, b.result(time.Second))
	case <-time.After(time.Second):
	}

	a.stop()
	stopped := time.Now()
	if got := b.start(5 * time.Second); got != initial.ConfirmedFlush {
		t.Errorf("stream B's KindStart position: got %s; want %s", got, initial.ConfirmedFlush)
	}
	t.Logf("stream B started %s after A stopped", time.Since(stopped))
}

func TestStreamRestartResumesAtConfirmed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		confirm bool
		// want are the notes of the transactions the restarted stream
		// delivers first.
		want []string
	}{
		{name: "confirmed", confirm: true, want: []string{"tx2"}},
		{name: "not confirmed", confirm: false, want: []string{"tx1", "tx2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			resume := f.initSlot().ConfirmedFlush
			cfg := f.config()

			first := startRun(t, cfg, 1024)
			first.start(10 * time.Second)
			f.insert("tx1")
			tx1 := first.nextTxn(10 * time.Second)
			if got := tx1.firstInsert(t); got != "tx1" {
				t.Fatalf("first transaction: got insert %q; want %q", got, "tx1")
			}
			if tc.confirm {
				first.setPos(tx1.end)
				resume = tx1.end
			}
			first.stop()
			f.waitConfirmed(resume, 5*time.Second)
			f.insert("tx2")

			second := startRun(t, cfg, 1024)
			if got := second.start(10 * time.Second); got != resume {
				t.Errorf("KindStart after the restart: got %s; want %s", got, resume)
			}
			for _, want := range tc.want {
				if got := second.nextTxn(10 * time.Second).firstInsert(t); got != want {
					t.Errorf("transaction after the restart: got insert %q; want %q", got, want)
				}
			}
		})
	}
}

// A newly safe position is confirmed within about ConfirmInterval, long
// before the status interval is up.
func TestStreamConfirmsPromptlyWhenThePositionMoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.initSlot()
	cfg := f.config()
	cfg.StatusInterval = time.Hour
	cfg.ConfirmInterval = 100 * time.Millisecond
	r := startRun(t, cfg, 1024)
	r.start(10 * time.Second)

	f.insert("one")
	tx := r.nextTxn(10 * time.Second)
	r.setPos(tx.end)
	took := f.waitConfirmed(tx.end, 5*time.Second)
	t.Logf("confirmed %s after the position moved (status interval 1h, confirm interval 100ms)", took)
	r.stop()
}

// A row larger than MaxMessageBytes fails the stream with a *TooLargeError
// that names the limit; nothing is delivered past the rows before it.
func TestStreamRefusesAMessageOverTheLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	initial := f.initSlot()
	cfg := f.config()
	cfg.MaxMessageBytes = 8 << 10
	r := startRun(t, cfg, 1024)
	r.start(10 * time.Second)

	f.insert("small")
	if tx := r.nextTxn(10 * time.Second); tx.end <= initial.ConfirmedFlush {
		t.Fatalf("the small row's transaction: got end %s; want past %s", tx.end, initial.ConfirmedFlush)
	}
	f.insert(strings.Repeat("x", 64<<10))
	err := r.result(10 * time.Second)
	var big *slot.TooLargeError
	if !errors.As(err, &big) || big.Limit != 8<<10 || big.Size < 64<<10 || !strings.Contains(err.Error(), slot.SettingMaxMessageBytes) {
		t.Fatalf("Run after a 64 KiB row with an 8 KiB limit: got %v; want a *TooLargeError naming the limit", err)
	}
	r.closeDrained()
}
