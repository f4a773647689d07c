package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/bytesize"

	"github.com/walrelay/walrelay/internal/leader"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/slot"
)

// statusTimeout bounds the whole reading, connection included: status is
// run when things are wrong, and must answer rather than hang.
const statusTimeout = 30 * time.Second

// runStatus prints the slot, its lag, the publication and the leader, as a
// table or as JSON. A missing slot or publication is a reading (exit 0); a
// server it cannot read is an error (exit 1).
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, ok, err := parseConfig("status", args, stdout, stderr)
	if !ok {
		return err
	}
	r, err := readStatus(ctx, c.Slot)
	if err != nil {
		return oneLine(err)
	}
	if c.JSON {
		err = writeStatusJSON(stdout, r)
	} else {
		err = writeStatusTable(stdout, r)
	}
	if err != nil {
		return err
	}
	return r.problem()
}

// problem is why walrelay run could not stream as status reads it (exit
// 1, after the reading): a slot missing or invalidated, a publication
// missing, a recovery pending. nil when it could.
func (r reading) problem() error {
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
	return fmt.Errorf("status: %s: walrelay run cannot stream", strings.Join(p, ", "))
}

// reading is everything status prints, read over one connection.
type reading struct {
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

func readStatus(ctx context.Context, cfg slot.Config) (reading, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	conn, err := slot.Connect(ctx, cfg)
	if err != nil {
		return reading{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r := reading{slot: cfg.Slot, publication: cfg.Publication, table: cfg.Table}
	if r.st, err = slot.ReadStatus(ctx, conn, cfg.Slot, cfg.Publication); err != nil {
		return reading{}, err
	}
	r.at = time.Now()
	if r.holder, r.led, err = leader.FindHolder(ctx, conn, cfg.Slot); err != nil {
		return reading{}, err
	}
	r.recovery, r.recovered, r.recoveryErr = slot.ReadRecovery(ctx, conn, cfg.Recoveries, cfg.Slot)
	return r, nil
}

// oneLine folds a multi-line error (pgconn lists one line per address it
// tried) into the single line main prints.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	var b strings.Builder
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), ":") {
			b.WriteString(";")
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(line)
	}
	return fmt.Errorf("%s", b.String())
}

// slotState is missing, invalidated (it decodes no more), active (a
// process streams from it) or inactive.
func (r reading) slotState() string {
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

func tableNames(ts []schema.Table) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return names
}

// The JSON form is for scripts: its keys are stable snake_case, LSNs are
// strings like "0/16B3748", byte counts are integers, and what is unknown
// (a missing slot's figures) or unlimited (safe_wal_size) is null.
type statusJSON struct {
	ReadAt        string          `json:"read_at"`
	CurrentWALLSN string          `json:"current_wal_lsn"`
	Slot          slotJSON        `json:"slot"`
	Publication   publicationJSON `json:"publication"`
	Leader        *leaderJSON     `json:"leader"`
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

func (r reading) jsonForm() statusJSON {
	j := statusJSON{
		ReadAt:        r.at.UTC().Format(readAtLayout),
		CurrentWALLSN: r.st.CurrentWAL.String(),
		Slot:          r.slotJSON(),
		Publication:   r.publicationJSON(),
		Leader:        r.leaderJSON(),
		Recovery:      r.recoveryJSON(),
	}
	if r.recoveryErr != nil {
		j.RecoveryError = ptr(r.recoveryErr.Error())
	}
	return j
}

func (r reading) recoveryJSON() *recoveryJSON {
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

// recoveryText is the last recovery in one line: pending (run recover
// again), or finished with its figures.
func (r reading) recoveryText() string {
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

func (r reading) slotJSON() slotJSON {
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

func (r reading) publicationJSON() publicationJSON {
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

func (r reading) leaderJSON() *leaderJSON {
	if !r.led {
		return nil
	}
	h := r.holder
	return &leaderJSON{PID: h.PID, ApplicationName: h.ApplicationName, ClientAddr: h.ClientAddr}
}

func ptr[T any](v T) *T { return &v }

func writeStatusJSON(w io.Writer, r reading) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.jsonForm())
}

// writeStatusTable prints the same reading for people, one aligned
// `key  value` line each; "-" marks what is unknown.
func writeStatusTable(w io.Writer, r reading) error {
	rows := append(append(append([][2]string{
		{"read at", r.at.UTC().Format(readAtLayout)},
		{"server WAL", r.st.CurrentWAL.String()},
	}, r.slotRows()...), r.publicationRows()...), [2]string{"leader", r.leaderText()}, [2]string{"recovery", r.recoveryText()})
	width := 0
	for _, row := range rows {
		width = max(width, len(row[0]))
	}
	var b strings.Builder
	for _, row := range rows {
		fmt.Fprintf(&b, "%-*s  %s\n", width, row[0], row[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r reading) slotRows() [][2]string {
	s := r.slotJSON()
	rows := [][2]string{{"slot", r.slot}, {"slot state", s.State}}
	if !r.st.Exists {
		return append(rows, [2]string{"slot fix", "run `walrelay init` to create it; if walrelay streamed from this database before, `walrelay recover --since TIME` instead"})
	}
	return append(rows,
		[2]string{"active pid", orDash(s.ActivePID, func(p int32) string { return fmt.Sprint(p) })},
		[2]string{"confirmed LSN", orDash(s.ConfirmedFlushLSN, func(v string) string { return v })},
		[2]string{"lag", orDash(s.LagBytes, bytesText)},
		[2]string{"retained WAL", orDash(s.RetainedWALBytes, bytesText)},
		[2]string{"wal_status", orDash(s.WALStatus, func(v string) string { return v })},
		[2]string{"safe_wal_size", r.safeWALSizeText()},
		[2]string{"failover", r.failoverText()},
		[2]string{"invalidation", orDash(s.InvalidationReason, func(v string) string { return v })},
		[2]string{"idle timeout", orDash(s.IdleTimeout, idleTimeoutText)},
	)
}

// failoverText says whether the slot survives a failover: a failover slot
// (and, on a standby, a synced copy) or not.
func (r reading) failoverText() string {
	switch {
	case r.st.Synced:
		return "yes (a synced copy of the primary's failover slot)"
	case r.st.Failover:
		return "yes (failover slot)"
	}
	return "no"
}

func idleTimeoutText(v string) string {
	if v == "0" {
		return "0 (off)"
	}
	return v + " (an idle slot is invalidated after this)"
}

func (r reading) safeWALSizeText() string {
	switch {
	case r.st.SafeWALSize != nil:
		return bytesize.Format(*r.st.SafeWALSize) + fmt.Sprintf(" (%d bytes)", *r.st.SafeWALSize)
	case r.st.WALStatus == "lost":
		return "- (the slot is lost)"
	}
	return "unlimited"
}

func (r reading) publicationRows() [][2]string {
	p := r.publicationJSON()
	rows := [][2]string{{"publication", p.Name}}
	if !p.Exists {
		return append(rows, [2]string{"publication state", "missing (run `walrelay init` to create it)"})
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
		[2]string{"publication state", "present"},
		[2]string{"tables", tables},
		[2]string{"publishes", publishes},
	)
}

func (r reading) leaderText() string {
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

func orDash[T any](p *T, text func(T) string) string {
	if p == nil {
		return "-"
	}
	return text(*p)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
