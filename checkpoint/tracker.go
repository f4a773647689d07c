package checkpoint

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// TxnID identifies a transaction inside one Tracker, assigned in Begin order
// (monotonic). The first Begin returns 1; 0 is never a valid id.
type TxnID uint64

// Errors returned for calls that break the protocol. Each one means the caller
// has a bug (or fed the Tracker a stream PostgreSQL cannot produce); the call
// changes nothing, and the caller should stop rather than confirm anything more.
var (
	// ErrTxnOpen: Begin while another transaction is still open.
	ErrTxnOpen = errors.New("a transaction is already open")
	// ErrNotOpen: Add or Commit for an id that is not the open transaction.
	ErrNotOpen = errors.New("not the open transaction")
	// ErrUnknownTxn: Ack for an id never begun, or already done and forgotten.
	ErrUnknownTxn = errors.New("unknown or finished transaction")
	// ErrExtraAck: Ack beyond the number of messages added to the transaction.
	ErrExtraAck = errors.New("more acks than messages")
	// ErrEndBackwards: Commit with an end LSN below an earlier Commit's end.
	ErrEndBackwards = errors.New("commit end lsn goes backwards")
)

// Tracker is the confirm rule as a pure state machine. Not safe for
// concurrent use (the caller holds a mutex).
//
// It keeps one small record per received transaction that is not done, plus
// the done ones queued behind it, in a ring indexed by id - headID. Done
// transactions at the front are dropped at once, so memory is
// O(pending transactions) and independent of their message counts.
type Tracker struct {
	safe    pglogrepl.LSN // never decreases
	lastEnd pglogrepl.LSN // highest Commit end seen; ends must not go backwards
	headID  TxnID         // id of q.at(0)
	open    bool          // the last element of q is open (Begin without Commit)
	q       ring
	pending int // transactions in q that are not done
	msgs    int // messages added and not yet acknowledged, over all transactions
}

// New starts from the slot's confirmed position (confirmed_flush_lsn read at
// start); Safe() never goes below it.
func New(confirmed pglogrepl.LSN) *Tracker {
	return &Tracker{safe: confirmed, headID: 1}
}

// nextID is the id the next Begin will return.
func (t *Tracker) nextID() TxnID { return t.headID + TxnID(t.q.len()) }

// Begin opens a transaction (pgoutput Begin); error if one is already open.
func (t *Tracker) Begin() (TxnID, error) {
	if t.open {
		return 0, fmt.Errorf("begin txn %d: %w", t.nextID(), ErrTxnOpen)
	}
	id := t.nextID()
	t.q.push()
	t.open = true
	t.pending++
	return id, nil
}

// openTxn returns the open transaction if id names it.
func (t *Tracker) openTxn(id TxnID) (*txn, bool) {
	if !t.open || id != t.nextID()-1 {
		return nil, false
	}
	return t.q.at(t.q.len() - 1), true
}

// Add records one more message of the open transaction handed to the sink;
// error if id is not the open transaction.
func (t *Tracker) Add(id TxnID) error {
	x, ok := t.openTxn(id)
	if !ok {
		return fmt.Errorf("add to txn %d: %w", id, ErrNotOpen)
	}
	x.unacked++
	t.msgs++
	return nil
}

// Commit closes the open transaction with pgoutput Commit's
// TransactionEndLSN; error if id is not the open transaction, or if end is
// below an earlier Commit's end. An end below Safe (a replayed transaction) is
// accepted and never lowers Safe.
func (t *Tracker) Commit(id TxnID, end pglogrepl.LSN) error {
	x, ok := t.openTxn(id)
	if !ok {
		return fmt.Errorf("commit txn %d: %w", id, ErrNotOpen)
	}
	if end < t.lastEnd {
		return fmt.Errorf("commit txn %d at %s after %s: %w", id, end, t.lastEnd, ErrEndBackwards)
	}
	x.end, x.committed = end, true
	t.lastEnd = end
	t.open = false
	t.settle(x)
	return nil
}

// Ack records that Kafka acknowledged one message of transaction id. Acks may
// come before the transaction's Commit and in any order across transactions.
// Error if id is unknown or already done, or if it has no unacknowledged
// message left.
func (t *Tracker) Ack(id TxnID) error {
	if id < t.headID || id >= t.nextID() {
		return fmt.Errorf("ack txn %d: %w", id, ErrUnknownTxn)
	}
	x := t.q.at(int(id - t.headID))
	if x.unacked == 0 {
		return fmt.Errorf("ack txn %d: %w", id, ErrExtraAck)
	}
	x.unacked--
	t.msgs--
	t.settle(x)
	return nil
}

// settle is called after x changed: if x just became done, count it and
// advance the done prefix.
func (t *Tracker) settle(x *txn) {
	if !x.done() {
		return
	}
	t.pending--
	t.advance()
}

// advance drops done transactions from the front, raising safe to the end of
// the last one dropped.
func (t *Tracker) advance() {
	for t.q.len() > 0 && t.q.at(0).done() {
		t.safe = max(t.safe, t.q.at(0).end)
		t.q.pop()
		t.headID++
	}
}

// Keepalive offers walEnd: a server keepalive's ServerWALEnd, or the end of
// a non-transactional WAL message. It is confirmed ONLY when the Tracker is
// Idle and walEnd is above Safe; it returns whether it was taken. With
// anything in flight it is ignored, because the server's WAL end is already
// past the rows still waiting for Kafka (see the package doc).
func (t *Tracker) Keepalive(walEnd pglogrepl.LSN) bool {
	if !t.Idle() || walEnd <= t.safe {
		return false
	}
	t.safe = walEnd
	return true
}

// Safe is the LSN safe to send as write, flush and apply in standby status
// updates. It never decreases.
func (t *Tracker) Safe() pglogrepl.LSN { return t.safe }

// Idle reports that no transaction is open and every received one is done.
func (t *Tracker) Idle() bool { return t.q.len() == 0 }

// InFlight returns the transactions received but not done (including the
// open one) and the messages added but not acknowledged.
func (t *Tracker) InFlight() (txns, msgs int) { return t.pending, t.msgs }

// OldestPending returns the first transaction that is not done, for metrics
// and logs; false when Idle. Safe stays below its end until it is done.
func (t *Tracker) OldestPending() (TxnID, bool) {
	if t.q.len() == 0 {
		return 0, false
	}
	return t.headID, true
}

// DoneAhead appends to dst the end LSNs of the transactions that are done
// but queued behind one that is not: Kafka has every message of theirs, yet
// Safe stays below them, so a new session replays them in full. The relay
// uses it to count those replays as known duplicates.
func (t *Tracker) DoneAhead(dst []pglogrepl.LSN) []pglogrepl.LSN {
	for i := range t.q.len() {
		if x := t.q.at(i); x.done() {
			dst = append(dst, x.end)
		}
	}
	return dst
}
