package retention

import (
	"fmt"
	"strings"
	"time"
)

// UsageProblem is what makes cfg, as `walrelay prune`'s flags set it, a
// command line prune must not run with, in the words of those flags; ""
// when there is none. It is asked before connecting, so that a missing
// --retention is a usage error (exit 2). On the command line a zero Pause
// or Wait means none, so a negative one is a mistake there, unlike in a
// Config given to New.
func UsageProblem(cfg Config) string {
	switch {
	case cfg.Retention <= 0:
		return "--retention is required: how long to keep outbox rows, e.g. 168h"
	case cfg.Retention < MinRetention:
		return fmt.Sprintf("--retention %s is under %s", cfg.Retention, MinRetention)
	case cfg.Batch < 1:
		return fmt.Sprintf("--prune-batch %d: want at least 1", cfg.Batch)
	case cfg.Wait < 0 || cfg.Pause < 0:
		return "--prune-wait and --prune-pause must not be negative"
	}
	return ""
}

// Summary is the line `walrelay prune` prints after a run of cfg: what
// went, from where, up to which mark, how long it took, and what a
// pending recovery kept.
func Summary(cfg Config, r Result) string {
	verb := "pruned"
	if r.DryRun {
		verb = "dry run: would prune"
	}
	line := fmt.Sprintf("%s %s from %s in %s (%s before %s, inserted before xid %d); slot %q confirmed %s, mark %s; took %s",
		verb, count(r.Deleted, "row", "rows"), cfg.Table, count(int64(r.Batches), "batch", "batches"), cfg.OccurredAt, r.Mark.Cutoff.UTC().Format(time.RFC3339), r.Mark.Xmin,
		cfg.Slot, r.Confirmed, r.Mark.InsertLSN, r.Took.Round(time.Millisecond))
	if n := len(r.Partitions); n > 0 {
		names := make([]string, n)
		for i, pt := range r.Partitions {
			names[i] = pt.Table.String()
		}
		verb := "dropped"
		if r.DryRun {
			verb = "would drop" // their rows are among those counted
		}
		line += fmt.Sprintf("; %s %s whose range is older: %s", verb, count(int64(n), "partition", "partitions"), strings.Join(names, ", "))
	}
	if k := r.KeptForRecovery; k != nil {
		line += "; kept the rows a pending " + k.String() + " needs"
	}
	return line
}

// count is "1 row" or "2 rows".
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
