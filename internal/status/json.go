package status

import (
	"encoding/json"
	"io"

	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// The JSON form is for scripts: its keys are stable snake_case, LSNs are
// strings like "0/16B3748", byte counts are integers, and what is unknown
// (a missing slot's figures) or unlimited (safe_wal_size) is null.
type statusJSON struct {
	ReadAt        string `json:"read_at"`
	CurrentWALLSN string `json:"current_wal_lsn"`
	// Provider is who runs the server: "self-managed", "Amazon RDS", ...
	Provider         string          `json:"provider"`
	ProviderEvidence string          `json:"provider_evidence"`
	Slot             slotJSON        `json:"slot"`
	Publication      publicationJSON `json:"publication"`
	Leader           *leaderJSON     `json:"leader"`
	// Recovery is the slot's last `walrelay recover`; null when there was
	// none (or its table cannot be read: see recovery_error).
	Recovery      *recoveryJSON `json:"recovery"`
	RecoveryError *string       `json:"recovery_error,omitempty"`
}

type recoveryJSON struct {
	Pending       bool    `json:"pending"`
	Since         *string `json:"since"` // null: every row
	StartedAt     string  `json:"started_at"`
	StartedBy     string  `json:"started_by"`
	ForceReason   *string `json:"force_reason"`
	ConsistentLSN *string `json:"consistent_lsn"`
	FinishedAt    *string `json:"finished_at"`
	Published     int64   `json:"published"`
	Parked        int64   `json:"parked"`
}

type slotJSON struct {
	Name              string  `json:"name"`
	State             string  `json:"state"`
	Active            bool    `json:"active"`
	ActivePID         *int32  `json:"active_pid"`
	Plugin            *string `json:"plugin"`
	Database          *string `json:"database"`
	ConfirmedFlushLSN *string `json:"confirmed_flush_lsn"`
	RestartLSN        *string `json:"restart_lsn"`
	LagBytes          *uint64 `json:"lag_bytes"`
	RetainedWALBytes  *uint64 `json:"retained_wal_bytes"`
	WALStatus         *string `json:"wal_status"`
	SafeWALSizeBytes  *int64  `json:"safe_wal_size_bytes"`
	// From PostgreSQL 17 on; false and null before.
	Failover           bool    `json:"failover"`
	Synced             bool    `json:"synced"`
	InvalidationReason *string `json:"invalidation_reason"`
	InactiveSince      *string `json:"inactive_since"`
	// The server's idle_replication_slot_timeout (18 and later).
	IdleTimeout *string `json:"idle_replication_slot_timeout"`
}

type publicationJSON struct {
	Name        string   `json:"name"`
	Exists      bool     `json:"exists"`
	Operations  []string `json:"operations"`
	InsertsOnly bool     `json:"inserts_only"`
	AllTables   bool     `json:"all_tables"`
	Tables      []string `json:"tables"`
	Table       string   `json:"table"`
	CoversTable bool     `json:"covers_table"`
}

type leaderJSON struct {
	PID             uint32 `json:"pid"`
	ApplicationName string `json:"application_name"`
	ClientAddr      string `json:"client_addr"`
}

// readAtLayout is RFC 3339 in UTC with milliseconds.
const readAtLayout = "2006-01-02T15:04:05.000Z07:00"

// jsonForm is the reading as WriteJSON writes it.
func (r Reading) jsonForm() statusJSON {
	j := statusJSON{
		ReadAt:           r.at.UTC().Format(readAtLayout),
		CurrentWALLSN:    r.st.CurrentWAL.String(),
		Provider:         r.st.Provider,
		ProviderEvidence: r.st.ProviderEvidence,
		Slot:             r.slotJSON(),
		Publication:      r.publicationJSON(),
		Leader:           r.leaderJSON(),
		Recovery:         r.recoveryJSON(),
	}
	if r.recoveryErr != nil {
		j.RecoveryError = ptr(r.recoveryErr.Error())
	}
	return j
}

func (r Reading) recoveryJSON() *recoveryJSON {
	if !r.recovered {
		return nil
	}
	v := r.recovery
	j := &recoveryJSON{Pending: v.Pending(), StartedAt: v.StartedAt.UTC().Format(readAtLayout), StartedBy: v.StartedBy,
		Published: v.Published, Parked: v.Parked}
	if v.Since != nil {
		j.Since = ptr(v.Since.UTC().Format(readAtLayout))
	}
	if v.ForceReason != "" {
		j.ForceReason = &v.ForceReason
	}
	if v.ConsistentLSN != 0 {
		j.ConsistentLSN = ptr(v.ConsistentLSN.String())
	}
	if v.FinishedAt != nil {
		j.FinishedAt = ptr(v.FinishedAt.UTC().Format(readAtLayout))
	}
	return j
}

func (r Reading) slotJSON() slotJSON {
	s := slotJSON{Name: r.slot, State: r.slotState(), Active: r.st.Active}
	if !r.st.Exists {
		return s
	}
	if r.st.Active {
		s.ActivePID = &r.st.ActivePID
	}
	s.Plugin, s.Database = &r.st.Plugin, &r.st.Database
	if r.st.ConfirmedFlush != 0 {
		s.ConfirmedFlushLSN = ptr(r.st.ConfirmedFlush.String())
		s.LagBytes = ptr(r.st.LagBytes())
	}
	if r.st.RestartLSN != 0 {
		s.RestartLSN = ptr(r.st.RestartLSN.String())
		s.RetainedWALBytes = ptr(r.st.RetainedBytes())
	}
	if r.st.WALStatus != "" {
		s.WALStatus = &r.st.WALStatus
	}
	s.SafeWALSizeBytes = r.st.SafeWALSize
	s.Failover, s.Synced, s.IdleTimeout = r.st.Failover, r.st.Synced, r.st.IdleTimeout
	if r.st.InvalidationReason != "" {
		s.InvalidationReason = &r.st.InvalidationReason
	}
	if !r.st.InactiveSince.IsZero() {
		s.InactiveSince = ptr(r.st.InactiveSince.Format(readAtLayout))
	}
	return s
}

func (r Reading) publicationJSON() publicationJSON {
	p := r.st.Publication
	return publicationJSON{
		Name:        r.publication,
		Exists:      p.Exists,
		Operations:  operations(p),
		InsertsOnly: p.InsertsOnly(),
		AllTables:   p.AllTables,
		Tables:      tableNames(p.Tables),
		Table:       r.table.String(),
		CoversTable: p.Covers(r.table),
	}
}

func (r Reading) leaderJSON() *leaderJSON {
	if !r.led {
		return nil
	}
	h := r.holder
	return &leaderJSON{PID: h.PID, ApplicationName: h.ApplicationName, ClientAddr: h.ClientAddr}
}

// ptr is v's address, for the JSON form's optional values.
func ptr[T any](v T) *T { return &v }

// WriteJSON writes the reading as one indented JSON object for scripts
// (see statusJSON for its keys).
func (r Reading) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.jsonForm())
}

// operations lists what the publication publishes, in PostgreSQL's order.
func operations(p slot.PublicationStatus) []string {
	ops := []string{}
	for _, op := range []struct {
		on   bool
		name string
	}{{p.Insert, "insert"}, {p.Update, "update"}, {p.Delete, "delete"}, {p.Truncate, "truncate"}} {
		if op.on {
			ops = append(ops, op.name)
		}
	}
	return ops
}

// tableNames are the tables as schema.Table writes them.
func tableNames(ts []schema.Table) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return names
}
