package slot

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// TimelineEnd is where an ancestor of the server's timeline ended: the
// WAL before End is the same on that timeline and on the server's, the
// WAL from End on is the server's own (a promoted standby's switch point).
type TimelineEnd struct {
	Timeline int32
	End      pglogrepl.LSN
}

// timelineHistory asks the server, on its replication connection, for the
// history of its timeline tli (TIMELINE_HISTORY): timeline 1 has none.
func timelineHistory(ctx context.Context, conn *pgconn.PgConn, tli int32) ([]TimelineEnd, error) {
	if tli <= 1 {
		return nil, nil
	}
	res, err := pglogrepl.TimelineHistory(ctx, conn, tli)
	if err != nil {
		return nil, fmt.Errorf("TIMELINE_HISTORY %d: %w", tli, err)
	}
	return parseTimelineHistory(res.Content, tli)
}

// parseTimelineHistory reads a timeline history file of timeline tli
// (PostgreSQL's src/backend/access/transam/timeline.c): one line per
// ancestor, "<parent timeline>\t<switch point>\t<reason>", oldest first;
// lines starting with # and blank lines are ignored. The ancestors must
// rise and stay below tli, their switch points must not fall: anything
// else is an error, so that a history walrelay cannot read vouches for
// nothing.
func parseTimelineHistory(content []byte, tli int32) ([]TimelineEnd, error) {
	var out []TimelineEnd
	for n, line := range bytes.Split(content, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("timeline %d history line %d %q: want a timeline and a switch point", tli, n+1, line)
		}
		parent, err := strconv.ParseInt(string(fields[0]), 10, 32)
		if err != nil || parent <= 0 {
			return nil, fmt.Errorf("timeline %d history line %d: timeline %q is not a positive number", tli, n+1, fields[0])
		}
		end, err := pglogrepl.ParseLSN(string(fields[1]))
		if err != nil {
			return nil, fmt.Errorf("timeline %d history line %d: switch point %q: %w", tli, n+1, fields[1], err)
		}
		if int32(parent) >= tli {
			return nil, fmt.Errorf("timeline %d history line %d: ancestor timeline %d is not below it", tli, n+1, parent)
		}
		if k := len(out); k > 0 && (int32(parent) <= out[k-1].Timeline || end < out[k-1].End) {
			return nil, fmt.Errorf("timeline %d history line %d: timeline %d at %s after timeline %d at %s: out of order",
				tli, n+1, parent, end, out[k-1].Timeline, out[k-1].End)
		}
		out = append(out, TimelineEnd{Timeline: int32(parent), End: end})
	}
	return out, nil
}
