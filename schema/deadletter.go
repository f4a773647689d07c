package schema

import "time"

// Aggregate names one aggregate: the unit whose messages keep their order.
type Aggregate struct {
	Type string
	ID   string
}

// Known reports whether the aggregate can order anything: a row without an
// aggregate id stands alone.
func (a Aggregate) Known() bool { return a.ID != "" }

// DeadLetter is one row of the dead-letter table: an outbox row walrelay
// did not publish, and why.
type DeadLetter struct {
	// Position is the row's place in the WAL, the table's key.
	Position Position
	// Table is the index of the row's outbox table (Message.Table): whose
	// dead-letter table it goes to.
	Table int
	// Message is the decoded row; nil for a row that could not be decoded,
	// which Row then holds.
	Message *Message
	// Row is a row that could not be decoded: every column as text, nil for
	// null.
	Row map[string]*string
	// MessageID is the row's message id; nil when it had none that parsed.
	MessageID *MessageID
	// Aggregate is the row's aggregate, as far as it is known.
	Aggregate Aggregate
	// Topic is where the message was headed, when that is known.
	Topic string
	// CommitTime is the commit time of the row's transaction.
	CommitTime time.Time
	// Reason says why the row was parked, in one line.
	Reason string
	// BlockedBy is set when the row itself was fine but waits behind an
	// earlier parked message of its aggregate.
	BlockedBy *Blocker
}

// Blocker is the first parked message of an aggregate: every later message
// of the aggregate is parked behind it until an operator retries or
// discards the messages ahead.
type Blocker struct {
	// Table is the index of the aggregate's outbox table (Message.Table):
	// an aggregate of one table never blocks another table's.
	Table     int
	Aggregate Aggregate
	Position  Position
	// MessageID is nil when the blocking row had no message id that parsed.
	MessageID *MessageID
}
