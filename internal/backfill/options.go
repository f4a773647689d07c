package backfill

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/sink"
)

// Options are what the operator said `walrelay recover` and `walrelay
// replay` should read, as given on the command line: each field is the
// flag of its name, and the errors about them name those flags, since
// nothing else sets them.
type Options struct {
	// Since and Until are RFC 3339 times, or durations meaning that long
	// before the run started (ParseWhen). Until is replay's only.
	Since, Until string
	// SinceMessageID (recover) reads from the occurred_at of that row.
	SinceMessageID string
	// All (recover) reads every row.
	All bool
	// Margin (recover) is how far before Since the read starts, for the
	// transactions that started before it and committed after. Must not
	// be negative.
	Margin time.Duration
	// Force (recover) is the reason to replace a slot that is usable.
	Force string
	// AggregateType, AggregateID and Type (replay) narrow the selection.
	AggregateType, AggregateID, Type string
	// ToTopic (replay) sends every message to this topic.
	ToTopic string
	// DryRun (replay) counts the rows per topic and publishes nothing.
	DryRun bool
}

// Publishing is what recover and replay share besides their options: how
// a row becomes a message and where it goes.
type Publishing struct {
	// Decoder says how a row becomes a message, as for the stream.
	Decoder decoder.Config
	// More are the slot's further outbox tables (Config.More); recover
	// reads them all, since the new slot replaces the old for all of
	// them.
	More []decoder.Config
	// Sink publishes the messages.
	Sink sink.Config
	// NoPing skips the check that Kafka answers before anything is read:
	// the discarding build has no broker to ask.
	NoPing bool
	// Progress receives a progress line now and then while rows are
	// published; nil prints none.
	Progress io.Writer
}

// ping checks that Kafka answers, unless told not to.
func (p Publishing) ping(ctx context.Context) error {
	if p.NoPing {
		return nil
	}
	return sink.Ping(ctx, p.Sink)
}

// ParseWhen reads an RFC 3339 time, or a duration meaning that long before
// now; an error names flag.
func ParseWhen(flag, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%s is %q: want an RFC 3339 time (2026-12-04T08:00:00Z) or a duration ago (90m)", flag, s)
	}
	return now.Add(-d), nil
}
