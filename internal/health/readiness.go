package health

import (
	"fmt"
	"strings"

	"github.com/walrelay/walrelay/sink"
)

// Readiness is /readyz's rule: a standby is ready (it waits for
// leadership, as it should); the leader is ready while its replication
// session streams, no topic is held and the watchdog sees no stall; nobody
// is ready who cannot read the slot. Its fields are what the process's
// parts report; all are required.
type Readiness struct {
	// Reached reports whether the slot was read from PostgreSQL
	// (slot.Monitor.Reached).
	Reached func() bool
	// Leader is nil while this process leads (leader.Elector.Check).
	Leader func() error
	// Streaming reports a replication session streaming now
	// (relay.Relay.Streaming).
	Streaming func() bool
	// Halted says why the last session halted on a message it cannot
	// publish, or "" (relay.Relay.Halted), in the words the reason is to
	// be shown in.
	Halted func() string
	// Held are the topics publishing is held on (sink.Metrics.Held).
	Held func() []sink.HeldTopic
	// Stalled reports a replication stall (slot.Monitor.Stalled).
	Stalled func() bool
}

// Check returns "" when ready, else the reason.
func (r Readiness) Check() string {
	switch {
	case !r.Reached():
		return "cannot read the slot from PostgreSQL"
	case r.Leader() != nil:
		return ""
	case !r.Streaming() && r.Halted() != "":
		return "halted on a message walrelay cannot publish (--on-bad-message halt): " + r.Halted()
	case !r.Streaming():
		return "leader without a streaming replication session"
	}
	if held := r.Held(); len(held) > 0 {
		return heldText(held) // the cause of the stall that follows
	}
	if r.Stalled() {
		return "replication stalled"
	}
	return ""
}

// heldText says which topics are held and what releases them.
func heldText(held []sink.HeldTopic) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = fmt.Sprintf("%s (recorded %d partitions, Kafka has %d; walrelay topics accept --topic %s)", h.Topic, h.Recorded, h.Kafka, h.Topic)
	}
	return "publishing nothing to a topic whose partition count changed: " + strings.Join(parts, ", ")
}
