package slot

import (
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// Kind tells what an Event carries.
type Kind uint8

const (
	// KindStart is the first event of a stream: Pos is the slot's
	// confirmed_flush_lsn, where the server resumes.
	KindStart Kind = iota + 1
	// KindData carries one pgoutput message: Pos is the XLogData's WALStart
	// and Data its WALData, copied out of the receive buffer and owned by
	// the receiver from then on.
	KindData
	// KindKeepalive carries a primary keepalive's ServerWALEnd in Pos.
	KindKeepalive
)

// Event is one item of the replication stream, delivered in WAL order.
type Event struct {
	Kind Kind
	Pos  pglogrepl.LSN
	Data []byte
	// Server is the server the stream replicates from; KindStart only.
	Server *Server
}

// Server is what IDENTIFY_SYSTEM says of the server a stream replicates
// from. A failover shows as the same SystemID on a new Timeline; another
// SystemID is another database cluster altogether.
type Server struct {
	SystemID string
	Timeline int32
	// Database is the database the slot decodes, Slot the slot's name.
	Database, Slot string
	// Addr is the address the replication connection reached (host:port):
	// with several hosts in the connection string, the one that is primary.
	Addr string
	// History is where each ancestor of Timeline ended, oldest first
	// (TIMELINE_HISTORY); nil on timeline 1, or when the server would not
	// tell (HistoryErr says why).
	History    []TimelineEnd
	HistoryErr error
}

// IsSlotMissing reports whether err is, or wraps, the preflight's verdict
// that the slot does not exist.
func IsSlotMissing(err error) bool {
	var e *ConfigError
	return errors.As(err, &e) && e.Result.Name == slotRuleName
}

// IsSlotGone reports a preflight's refusal of a slot that cannot be
// streamed again: missing, lost (wal_status), or invalidated.
func IsSlotGone(err error) bool {
	var e *ConfigError
	if !errors.As(err, &e) {
		return false
	}
	switch e.Result.Name {
	case slotRuleName, walStatusRuleName, invalidatedRuleName:
		return true
	}
	return false
}

// Position returns the LSN that is safe to confirm right now. Stream calls
// it from its own goroutine whenever it sends a status update.
type Position func() pglogrepl.LSN

// TooLargeError is a replication message over Config.MaxMessageBytes: one
// outbox row (or another table's, if the publication covers more) that
// walrelay will not read into memory. Nothing past it is confirmed; raising
// the limit lets the next session read it.
type TooLargeError struct {
	Slot        string
	Size, Limit int
}

// IsTooLarge reports whether err is, or wraps, a *TooLargeError.
func IsTooLarge(err error) bool {
	var e *TooLargeError
	return errors.As(err, &e)
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a replication message of %d bytes on slot %q is over the limit of %d bytes (%s); raise the limit to read that row",
		e.Size, e.Slot, e.Limit, SettingMaxMessageBytes)
}
