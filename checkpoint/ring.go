package checkpoint

import "github.com/jackc/pglogrepl"

// txn is what the Tracker keeps per received transaction: two numbers and a
// flag. Messages are counted, never stored, so a transaction of a million rows
// costs as much as one of a single row.
type txn struct {
	end       pglogrepl.LSN // Commit's TransactionEndLSN; zero until committed
	unacked   uint64        // messages added but not yet acknowledged
	committed bool
}

// done reports whether the transaction may count towards the safe LSN.
func (x *txn) done() bool { return x.committed && x.unacked == 0 }

const (
	// minRing is the smallest ring capacity; a power of two.
	minRing = 16
	// keepRing is the capacity (32 KiB of txns) a ring keeps however empty
	// it gets, so a lag that comes and goes does not reallocate every time.
	keepRing = 1024
)

// ring is a FIFO of txns whose capacity is a power of two, so that element i
// (counted from the front) lives at buf[(head+i)&(len(buf)-1)]. The Tracker
// indexes it with id - headID, which makes Ack O(1) without a map. It doubles
// when full and, above keepRing, halves when less than a quarter full, so
// memory follows the number of pending transactions.
type ring struct {
	buf  []txn
	head int // index in buf of the front element
	n    int // number of elements
}

func (r *ring) len() int { return r.n }

// at returns element i counted from the front; 0 <= i < r.n.
func (r *ring) at(i int) *txn { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// push appends a zero txn at the back and returns it.
func (r *ring) push() *txn {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.n++
	x := r.at(r.n - 1)
	*x = txn{}
	return x
}

// pop drops the front element.
func (r *ring) pop() {
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > keepRing && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// resize moves the elements, in order, to a new buffer of capacity c >= r.n.
func (r *ring) resize(c int) {
	buf := make([]txn, c)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}
