package relay

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/checkpoint"
	"github.com/walrelay/walrelay/slot"
)

// commits keeps the commit time of each received transaction the tracker
// still holds, indexed by id - base, for the commit-to-ack latency and the
// oldest unpublished message's age. It follows the tracker: entries before
// the oldest pending transaction are dropped, so its size is the number of
// pending transactions.
type commits struct {
	base  checkpoint.TxnID // id of times[0]
	times []time.Time
}

// begin records the commit time of transaction id, the next one begun.
func (c *commits) begin(id checkpoint.TxnID, t time.Time) {
	if len(c.times) == 0 {
		c.base = id
	}
	c.times = append(c.times, t)
}

// at returns the commit time of transaction id, if it is still kept.
func (c *commits) at(id checkpoint.TxnID) (time.Time, bool) {
	if id < c.base || id-c.base >= checkpoint.TxnID(len(c.times)) {
		return time.Time{}, false
	}
	return c.times[id-c.base], true
}

// follow drops what the tracker no longer holds.
func (c *commits) follow(tr *checkpoint.Tracker) {
	oldest, ok := tr.OldestPending()
	if !ok {
		c.times = c.times[:0]
		return
	}
	if n := oldest - c.base; n > 0 {
		c.times = c.times[min(int(n), len(c.times)):]
		c.base = oldest
	}
}

// replay is what one session left acknowledged, so that the next session
// of the process can recognise the transactions it publishes again.
type replay struct {
	safe  pglogrepl.LSN              // every transaction ending at or below it was done
	ahead map[pglogrepl.LSN]struct{} // ends of done transactions above safe
	// server is the server the session streamed from; zero before the
	// first session that reached replication.
	server slot.Server
	// confirmedAt is when the safe position last moved in this process;
	// zero when it never did.
	confirmedAt time.Time
}

// known reports whether the transaction ending at end was already
// published in full before.
func (r replay) known(end pglogrepl.LSN) bool {
	if end <= r.safe {
		return true
	}
	_, ok := r.ahead[end]
	return ok
}
