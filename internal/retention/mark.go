package retention

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/slot"
)

// Mark is what one prune deletes up to, read in one statement.
type Mark struct {
	// Xmin is the snapshot's xmin (a 64-bit xid8): every transaction below
	// it had ended. Only rows inserted by such transactions are deleted.
	Xmin uint64
	// InsertLSN is the WAL insert position read after the snapshot: the
	// commit record of every transaction below Xmin ends at or before it.
	// The slot must have confirmed it before anything is deleted.
	InsertLSN pglogrepl.LSN
	// Cutoff is the server's now() minus the retention period: rows whose
	// occurred_at is earlier are old enough.
	Cutoff time.Time
	// Database is the current database, where the slot must decode.
	Database string
}

// xid32 is the mark's xmin as a row's xmin holds it: the low 32 bits, in
// the text form the xid type reads.
func (m Mark) xid32() string { return fmt.Sprint(uint32(m.Xmin)) }

// NotConfirmedError says the slot had not confirmed the mark's position by
// the end of the wait: nothing was deleted.
type NotConfirmedError struct {
	Slot      string
	Confirmed pglogrepl.LSN // the slot's confirmed_flush_lsn at the last look
	Want      pglogrepl.LSN // the mark's insert position
	Waited    time.Duration
}

func (e *NotConfirmedError) Error() string {
	return fmt.Sprintf("slot %q confirmed %s, not yet past %s after %s: is walrelay running?",
		e.Slot, e.Confirmed, e.Want, e.Waited.Round(time.Second))
}

// passed decides from one reading of the slot whether it has confirmed
// want: done, not yet (false, nil), or never (an error: a slot that is
// missing, lost, or decodes another database).
func passed(f slot.Figures, name, database string, want pglogrepl.LSN) (bool, error) {
	switch {
	case !f.Exists:
		return false, fmt.Errorf("slot %q does not exist: nothing can be known to be published (run `walrelay init`)", name)
	case f.Type != "" && f.Type != "logical":
		return false, fmt.Errorf("slot %q is a %s slot; want walrelay's logical slot", name, f.Type)
	case f.Database != database:
		return false, fmt.Errorf("slot %q decodes database %q, not %q", name, f.Database, database)
	case f.WALStatus == "lost":
		return false, fmt.Errorf("slot %q is lost (wal_status lost): see the lost-slot procedure in docs/RUNBOOK.md", name)
	}
	return f.ConfirmedFlush >= want, nil
}
