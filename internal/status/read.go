package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// timeout bounds the whole reading, connection included: status is run
// when things are wrong, and must answer rather than hang.
const timeout = 30 * time.Second

// Reading is everything status prints, read over one connection. The zero
// value is not a reading; Read makes one.
type Reading struct {
	slot, publication string
	table             schema.Table
	at                time.Time
	st                slot.Status
	holder            leader.Holder
	led               bool // holder is set
	// recovery is the slot's last recovery (recovered is false when there
	// was none); recoveryErr says why it could not be read, which status
	// reports rather than fails on.
	recovery    slot.Recovery
	recovered   bool
	recoveryErr error
}

// Read connects as cfg says and reads the slot, the publication, the
// leader and the last recovery, within 30 seconds in all. An error means
// the server could not be read; what it says about walrelay (a slot
// missing, say) is in the Reading.
func Read(ctx context.Context, cfg slot.Config) (Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := slot.Connect(ctx, cfg)
	if err != nil {
		return Reading{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r := Reading{slot: cfg.Slot, publication: cfg.Publication, table: cfg.Table}
	if r.st, err = slot.ReadStatus(ctx, conn, cfg.Slot, cfg.Publication); err != nil {
		return Reading{}, err
	}
	r.at = time.Now()
	if r.holder, r.led, err = leader.FindHolder(ctx, conn, cfg.Slot); err != nil {
		return Reading{}, err
	}
	r.recovery, r.recovered, r.recoveryErr = slot.ReadRecovery(ctx, conn, cfg.Recoveries, cfg.Slot)
	return r, nil
}

// Problem is why walrelay run could not stream as the reading has it: a
// slot missing or invalidated, a publication missing, a recovery pending;
// nil when it could. `walrelay status` exits 1 on it, after printing the
// reading.
func (r Reading) Problem() error {
	var p []string
	switch state := r.slotState(); state {
	case "missing", "invalidated":
		p = append(p, fmt.Sprintf("slot %q is %s", r.slot, state))
	}
	if !r.st.Publication.Exists {
		p = append(p, fmt.Sprintf("publication %q is missing", r.publication))
	}
	if r.recovered && r.recovery.Pending() {
		p = append(p, "a recovery is pending")
	}
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, ", ") + ": walrelay run cannot stream")
}

// slotState is missing, invalidated (it decodes no more), active (a
// process streams from it) or inactive.
func (r Reading) slotState() string {
	switch {
	case !r.st.Exists:
		return "missing"
	case r.st.InvalidationReason != "" || r.st.Conflicting || r.st.WALStatus == "lost":
		return "invalidated"
	case r.st.Active:
		return "active"
	}
	return "inactive"
}
