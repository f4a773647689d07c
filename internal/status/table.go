package status

import (
	"fmt"
	"io"
	"strings"

	"github.com/walrelay/walrelay/internal/bytesize"
	"github.com/walrelay/walrelay/internal/texttable"
)

// WriteTable writes the reading for people, one aligned `key  value` line
// each; "-" marks what is unknown.
func (r Reading) WriteTable(w io.Writer) error {
	rows := append(append(append([][]string{
		{"read at", r.at.UTC().Format(readAtLayout)},
		{"server WAL", r.st.CurrentWAL.String()},
		{"provider", r.providerText()},
	}, r.slotRows()...), r.publicationRows()...), []string{"leader", r.leaderText()}, []string{"recovery", r.recoveryText()})
	return texttable.Write(w, rows)
}

// providerText is who runs the server, with the signal that showed it.
func (r Reading) providerText() string {
	if r.st.ProviderEvidence == "" {
		return orDashString(r.st.Provider)
	}
	return r.st.Provider + " (" + r.st.ProviderEvidence + ")"
}

func orDashString(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// slotRows are the slot's lines: its fix when it is missing.
func (r Reading) slotRows() [][]string {
	s := r.slotJSON()
	rows := [][]string{{"slot", r.slot}, {"slot state", s.State}}
	if !r.st.Exists {
		return append(rows, []string{"slot fix", "run `walrelay init` to create it; if walrelay streamed from this database before, `walrelay recover --since TIME` instead"})
	}
	return append(rows,
		[]string{"active pid", orDash(s.ActivePID, func(p int32) string { return fmt.Sprint(p) })},
		[]string{"confirmed LSN", orDash(s.ConfirmedFlushLSN, func(v string) string { return v })},
		[]string{"lag", orDash(s.LagBytes, bytesText)},
		[]string{"retained WAL", orDash(s.RetainedWALBytes, bytesText)},
		[]string{"wal_status", orDash(s.WALStatus, func(v string) string { return v })},
		[]string{"safe_wal_size", r.safeWALSizeText()},
		[]string{"failover", r.failoverText()},
		[]string{"invalidation", orDash(s.InvalidationReason, func(v string) string { return v })},
		[]string{"idle timeout", orDash(s.IdleTimeout, idleTimeoutText)},
	)
}

// failoverText says whether the slot survives a failover: a failover slot
// (and, on a standby, a synced copy) or not.
func (r Reading) failoverText() string {
	switch {
	case r.st.Synced:
		return "yes (a synced copy of the primary's failover slot)"
	case r.st.Failover:
		return "yes (failover slot)"
	}
	return "no"
}

// idleTimeoutText says what idle_replication_slot_timeout does to the slot.
func idleTimeoutText(v string) string {
	if v == "0" {
		return "0 (off)"
	}
	return v + " (an idle slot is invalidated after this)"
}

// safeWALSizeText is how much more WAL the slot may retain before it is
// lost: a size, unlimited, or "-" once lost.
func (r Reading) safeWALSizeText() string {
	switch {
	case r.st.SafeWALSize != nil:
		return bytesize.Format(*r.st.SafeWALSize) + fmt.Sprintf(" (%d bytes)", *r.st.SafeWALSize)
	case r.st.WALStatus == "lost":
		return "- (the slot is lost)"
	}
	return "unlimited"
}

// publicationRows are the publication's lines: its fix when it is missing.
func (r Reading) publicationRows() [][]string {
	p := r.publicationJSON()
	rows := [][]string{{"publication", p.Name}}
	if !p.Exists {
		return append(rows, []string{"publication state", "missing (run `walrelay init` to create it)"})
	}
	tables := strings.Join(p.Tables, ", ")
	switch {
	case tables == "":
		tables = "none"
	case !p.CoversTable:
		tables += " (not the outbox table " + p.Table + ")"
	}
	publishes := strings.Join(p.Operations, ", ")
	if p.InsertsOnly {
		publishes += " (inserts only)"
	}
	return append(rows,
		[]string{"publication state", "present"},
		[]string{"tables", tables},
		[]string{"publishes", publishes},
	)
}

// leaderText is who holds the slot's advisory lock, or nobody.
func (r Reading) leaderText() string {
	if !r.led {
		return "nobody"
	}
	h := r.holder
	return fmt.Sprintf("pid %d, application %s, client %s", h.PID, dashIfEmpty(h.ApplicationName), dashIfEmpty(h.ClientAddr))
}

// bytesText is "1.5 MiB (1572864 bytes)", or "72 B" where that says it all.
func bytesText(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%s (%d bytes)", bytesize.Format(int64(min(n, 1<<63-1))), n)
}

// orDash is text(*p), or "-" when p is nil (unknown).
func orDash[T any](p *T, text func(T) string) string {
	if p == nil {
		return "-"
	}
	return text(*p)
}

// dashIfEmpty is s, or "-" when s is empty.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// recoveryText is the last recovery in one line: pending (run recover
// again), or finished with its figures.
func (r Reading) recoveryText() string {
	switch {
	case r.recoveryErr != nil:
		return "cannot read: " + r.recoveryErr.Error()
	case !r.recovered:
		return "none"
	case r.recovery.Pending():
		return "PENDING: a " + r.recovery.String() + "; run `walrelay recover` again to finish it (walrelay run refuses until then)"
	}
	v := r.recovery
	return fmt.Sprintf("last finished at %s: %d published, %d parked", v.FinishedAt.UTC().Format(readAtLayout), v.Published, v.Parked)
}
