package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestMisuse checks that every call breaking the protocol returns the right
// error and leaves the Tracker as it was.
func TestMisuse(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, tr *Tracker) // drives tr to the state under test
		call  func(tr *Tracker) error
		want  error
	}{
		{"begin while open", opened(0), func(tr *Tracker) error { _, err := tr.Begin(); return err }, ErrTxnOpen},
		{"add with no txn", nil, func(tr *Tracker) error { return tr.Add(1) }, ErrNotOpen},
		{"add to other id", opened(0), func(tr *Tracker) error { return tr.Add(2) }, ErrNotOpen},
		{"add to zero id", opened(0), func(tr *Tracker) error { return tr.Add(0) }, ErrNotOpen},
		{"add after commit", committed(1), func(tr *Tracker) error { return tr.Add(1) }, ErrNotOpen},
		{"commit with no txn", nil, func(tr *Tracker) error { return tr.Commit(1, 0x200) }, ErrNotOpen},
		{"commit twice", committed(1), func(tr *Tracker) error { return tr.Commit(1, 0x300) }, ErrNotOpen},
		{"commit end backwards", reopened(0x200), func(tr *Tracker) error { return tr.Commit(2, 0x1ff) }, ErrEndBackwards},
		{"ack never begun", nil, func(tr *Tracker) error { return tr.Ack(1) }, ErrUnknownTxn},
		{"ack future id", opened(1), func(tr *Tracker) error { return tr.Ack(2) }, ErrUnknownTxn},
		{"ack zero id", opened(1), func(tr *Tracker) error { return tr.Ack(0) }, ErrUnknownTxn},
		{"ack open txn without adds", opened(0), func(tr *Tracker) error { return tr.Ack(1) }, ErrExtraAck},
		{"ack more than adds", ackedOnce, func(tr *Tracker) error { return tr.Ack(1) }, ErrExtraAck},
		{"ack done txn behind pending", doneBehindPending, func(tr *Tracker) error { return tr.Ack(2) }, ErrExtraAck},
		{"ack forgotten txn", committed(0), func(tr *Tracker) error { return tr.Ack(1) }, ErrUnknownTxn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(0x100)
			if tc.setup != nil {
				tc.setup(t, tr)
			}
			before := snapshot(tr)
			err := tc.call(tr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v; want %v", err, tc.want)
			}
			if after := snapshot(tr); after != before {
				t.Errorf("state changed: got %+v; want %+v", after, before)
			}
		})
	}
}

// opened begins txn 1 and adds n messages.
func opened(n int) func(*testing.T, *Tracker) {
	return func(t *testing.T, tr *Tracker) {
		t.Helper()
		must(t, beginErr(tr))
		for range n {
			must(t, tr.Add(1))
		}
	}
}

// committed is opened(n) followed by a Commit at 0/200.
func committed(n int) func(*testing.T, *Tracker) {
	return func(t *testing.T, tr *Tracker) {
		t.Helper()
		opened(n)(t, tr)
		must(t, tr.Commit(1, 0x200))
	}
}

// reopened commits an empty txn 1 at end, then opens txn 2.
func reopened(end pglogrepl.LSN) func(*testing.T, *Tracker) {
	return func(t *testing.T, tr *Tracker) {
		t.Helper()
		opened(0)(t, tr)
		must(t, tr.Commit(1, end))
		must(t, beginErr(tr))
	}
}

// ackedOnce leaves txn 1 open with its one message acknowledged.
func ackedOnce(t *testing.T, tr *Tracker) {
	t.Helper()
	opened(1)(t, tr)
	must(t, tr.Ack(1))
}

// doneBehindPending leaves txn 1 pending and txn 2 done behind it.
func doneBehindPending(t *testing.T, tr *Tracker) {
	t.Helper()
	committed(1)(t, tr)
	must(t, beginErr(tr))
	must(t, tr.Commit(2, 0x300))
}

func beginErr(tr *Tracker) error { _, err := tr.Begin(); return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSafe runs short scenarios and checks Safe after each one.
func TestSafe(t *testing.T) {
	tests := []struct {
		name  string
		start pglogrepl.LSN
		steps string // space-separated: b=begin, a=add to open, c<hex>=commit open at end, k<hex>=keepalive, <id>=ack txn id
		want  pglogrepl.LSN
	}{
		{"start position", 0x100, "", 0x100},
		{"empty txn done at commit", 0x100, "b c200", 0x200},
		{"unacked txn holds safe", 0x100, "b a c200", 0x100},
		{"acks before commit", 0x100, "b a a 1 1 c200", 0x200},
		{"acked but not committed", 0x100, "b a 1", 0x100},
		{"later txn done first", 0x100, "b a c200 b a c300 2", 0x100},
		{"gap filled", 0x100, "b a c200 b a c300 2 1", 0x300},
		{"prefix stops at pending", 0x100, "b a c200 b a c300 b a c400 1 3", 0x200},
		{"keepalive idle", 0x100, "k500", 0x500},
		{"keepalive behind", 0x100, "k50", 0x100},
		{"keepalive open txn", 0x100, "b k500", 0x100},
		{"keepalive unacked", 0x100, "b a c200 k500", 0x100},
		{"keepalive after done", 0x100, "b a c200 1 k500", 0x500},
		{"replay below safe", 0x500, "b a c200 1 b c300", 0x500},
		{"commit after keepalive", 0x100, "k500 b c600", 0x600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.start)
			var open TxnID
			for _, s := range strings.Fields(tc.steps) {
				open = apply(t, tr, open, s)
			}
			if got := tr.Safe(); got != tc.want {
				t.Errorf("got safe %s; want %s", got, tc.want)
			}
		})
	}
}

// apply runs one step of TestSafe's notation and returns the open txn id.
func apply(t *testing.T, tr *Tracker, open TxnID, s string) TxnID {
	t.Helper()
	var n uint64
	switch s[0] {
	case 'b':
		id, err := tr.Begin()
		must(t, err)
		return id
	case 'a':
		must(t, tr.Add(open))
	case 'c':
		_, err := fmt.Sscanf(s[1:], "%x", &n)
		must(t, err)
		must(t, tr.Commit(open, pglogrepl.LSN(n)))
	case 'k':
		_, err := fmt.Sscanf(s[1:], "%x", &n)
		must(t, err)
		tr.Keepalive(pglogrepl.LSN(n))
	default:
		_, err := fmt.Sscanf(s, "%d", &n)
		must(t, err)
		must(t, tr.Ack(TxnID(n)))
	}
	return open
}

// TestLargeTxnConstantMemory: a million-message transaction allocates
// nothing, because messages are counted, not stored.
func TestLargeTxnConstantMemory(t *testing.T) {
	const n = 1_000_000
	tr := New(0)
	end := pglogrepl.LSN(0)
	allocs := testing.AllocsPerRun(3, func() {
		id, _ := tr.Begin()
		for range n {
			_ = tr.Add(id)
		}
		end += 0x1000
		_ = tr.Commit(id, end)
		for range n {
			_ = tr.Ack(id)
		}
	})
	if !tr.Idle() || tr.Safe() != end {
		t.Fatalf("got safe %s idle=%v; want %s idle", tr.Safe(), tr.Idle(), end)
	}
	if allocs != 0 {
		t.Errorf("got %v allocations for %d messages; want 0", allocs, n)
	}
	if got := len(tr.q.buf); got > minRing {
		t.Errorf("ring capacity %d; want <= %d", got, minRing)
	}
}

// TestRingFollowsPending: memory grows with pending transactions and shrinks
// back once they are done, and ids still index the right transaction after
// the ring wraps and resizes.
func TestRingFollowsPending(t *testing.T) {
	tr := New(0)
	const n = 10_000
	for i := range n {
		id, err := tr.Begin()
		must(t, err)
		must(t, tr.Add(id))
		must(t, tr.Commit(id, pglogrepl.LSN(i+1)))
	}
	if got := len(tr.q.buf); got < n {
		t.Fatalf("ring capacity %d; want >= %d", got, n)
	}
	for id := TxnID(n); id >= 2; id-- { // acks from the back: nothing done in front
		must(t, tr.Ack(id))
	}
	if got := tr.Safe(); got != 0 {
		t.Fatalf("got safe %s before txn 1 is acked; want 0/0", got)
	}
	must(t, tr.Ack(1))
	if got, idle := tr.Safe(), tr.Idle(); got != n || !idle {
		t.Fatalf("got safe %s idle=%v; want %s idle", got, idle, pglogrepl.LSN(n))
	}
	if got := len(tr.q.buf); got > keepRing {
		t.Errorf("ring capacity %d after draining; want <= %d", got, keepRing)
	}
}

// TestSteadyStateNoAllocs: Begin, Add, Commit and Ack allocate nothing once
// the ring has its working size.
func TestSteadyStateNoAllocs(t *testing.T) {
	tr := New(0)
	end := pglogrepl.LSN(0)
	allocs := testing.AllocsPerRun(1000, func() {
		id, _ := tr.Begin()
		_ = tr.Add(id)
		_ = tr.Add(id)
		end += 0x100
		_ = tr.Commit(id, end)
		_ = tr.Ack(id)
		_ = tr.Ack(id)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per transaction; want 0", allocs)
	}
}

func ExampleTracker() {
	tr := New(0x100) // the slot's confirmed_flush_lsn
	id, _ := tr.Begin()
	_ = tr.Add(id) // row handed to Kafka before the Commit arrives
	fmt.Println(tr.Keepalive(0x300), tr.Safe())
	_ = tr.Commit(id, 0x200) // Commit's TransactionEndLSN
	fmt.Println(tr.Safe())
	_ = tr.Ack(id) // Kafka acknowledged the row
	fmt.Println(tr.Safe())
	fmt.Println(tr.Keepalive(0x300), tr.Safe())
	// Output:
	// false 0/100
	// 0/100
	// 0/200
	// true 0/300
}

// DoneAhead lists the done transactions Safe cannot pass yet, in order, and
// forgets them once Safe passes them.
func TestDoneAhead(t *testing.T) {
	tr := New(0x100)
	ends := []pglogrepl.LSN{0x200, 0x300, 0x400, 0x500}
	ids := make([]TxnID, len(ends))
	for i, end := range ends {
		id, err := tr.Begin()
		must(t, err)
		must(t, tr.Add(id))
		must(t, tr.Commit(id, end))
		ids[i] = id
	}
	must(t, tr.Ack(ids[1]))
	must(t, tr.Ack(ids[3]))
	if got, want := fmt.Sprint(tr.DoneAhead(nil)), fmt.Sprint([]pglogrepl.LSN{0x300, 0x500}); got != want || tr.Safe() != 0x100 {
		t.Fatalf("DoneAhead: got %s with Safe %s; want %s with Safe 0/100", got, tr.Safe(), want)
	}
	must(t, tr.Ack(ids[0]))
	if got, want := fmt.Sprint(tr.DoneAhead(nil)), fmt.Sprint([]pglogrepl.LSN{0x500}); got != want || tr.Safe() != 0x300 {
		t.Fatalf("after acking the head: got %s with Safe %s; want %s with Safe 0/300", got, tr.Safe(), want)
	}
}
