package relay

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/slot"
)

// follow compares the server a new stream replicates from with the one the
// previous session did. The same system on a new timeline is a failover
// (a standby was promoted; with several hosts in the connection string,
// walrelay reached the new primary): it is logged and counted, and the
// stream resumes from the slot's confirmed position there, which the
// primary's failover slot carried over. Another system is refused: slot
// positions of one database cluster mean nothing in another.
func (s *session) follow(ev slot.Event) error {
	if ev.Server == nil {
		return nil
	}
	now, prev := *ev.Server, s.prev.server
	if prev.SystemID != "" && prev.SystemID != now.SystemID {
		return errorf("replication reached another database system at %s (system identifier %s; walrelay streamed from system %s at %s before): "+
			"slot positions of one system mean nothing in another; point the connection string only at one primary and its standbys",
			now.Addr, now.SystemID, prev.SystemID, prev.Addr)
	}
	if prev.SystemID != "" && prev.Timeline != now.Timeline {
		s.m.failovers.Inc()
		s.log.Warn("PostgreSQL failed over: streaming from the new primary, from the slot's confirmed position there",
			zap.String("old_server", prev.Addr), zap.Int32("old_timeline", prev.Timeline),
			zap.String("server", now.Addr), zap.Int32("timeline", now.Timeline),
			zap.Stringer("confirmed_before", s.prev.safe), zap.Stringer("slot_confirmed_lsn", ev.Pos))
	}
	s.m.timeline.Set(float64(now.Timeline))
	s.mu.Lock()
	s.server = now
	s.mu.Unlock()
	return nil
}

// slotGoneError is a slot met missing or invalidated after the process
// had streamed from it: dropped, lost (its WAL removed), or absent on a
// standby promoted without it. Creating a new slot would skip what was
// committed since the last confirmed position, so walrelay stops and says
// where the gap starts and which command closes it.
type slotGoneError struct {
	err  error // the preflight's verdict
	last replay
}

func (e *slotGoneError) Unwrap() error { return e.err }

func (e *slotGoneError) Error() string {
	since := "TIME"
	at := ""
	if !e.last.confirmedAt.IsZero() {
		since = e.last.confirmedAt.UTC().Format(time.RFC3339)
		at = " at " + since
	}
	found := e.err.Error()
	var ce *slot.ConfigError
	if errors.As(e.err, &ce) {
		found = ce.Result.Found
	}
	return fmt.Sprintf("the replication slot can no longer be streamed (%s); walrelay streamed from %s (system %s, timeline %d) and confirmed up to %s%s: "+
		"a new slot would start at the server's current position and skip every message committed after %s. "+
		"Publish that gap and make the new slot with: walrelay recover --since %s (with the same settings; it also reads --margin, 1h, before that time), then start walrelay run again",
		found, e.last.server.Addr, e.last.server.SystemID, e.last.server.Timeline, e.last.safe, at, e.last.safe, since)
}
