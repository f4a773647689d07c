package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/test/harness"
)

// deadRow is one row of the dead-letter table.
type deadRow struct {
	Position      string
	MessageID     *string
	AggregateID   *string
	Reason        string
	BlockedBy     *string
	Status        string
	TargetTopic   *string
	PayloadBytes  *int
	RowData       map[string]*string
	RowDataText   string // row_data as the table holds it, for the log
	Retries       int
	LastError     string
	DiscardReason *string
	DiscardedAt   *time.Time
}

// deadLetters reads the fixture's dead-letter table, keyed by message id.
func deadLetters(t *testing.T, f *harness.Fixture) map[string]deadRow {
	t.Helper()
	rows, err := f.DB.Query(context.Background(), `SELECT commit_lsn::text || '#' || seq, message_id::text, aggregate_id, reason,
		blocked_by::text, status, target_topic, octet_length(payload), row_data::text, retries, coalesce(last_error, ''),
		discard_reason, discarded_at FROM `+f.Table+`_dead_letters ORDER BY commit_lsn, seq`)
	testkit.Must(t, err, "read the dead-letter table")
	defer rows.Close()
	out := map[string]deadRow{}
	for rows.Next() {
		var d deadRow
		var rowData *string
		testkit.Must(t, rows.Scan(&d.Position, &d.MessageID, &d.AggregateID, &d.Reason, &d.BlockedBy, &d.Status, &d.TargetTopic,
			&d.PayloadBytes, &rowData, &d.Retries, &d.LastError, &d.DiscardReason, &d.DiscardedAt), "scan a dead letter")
		if rowData != nil {
			d.RowDataText = *rowData
			testkit.Must(t, json.Unmarshal([]byte(*rowData), &d.RowData), "row_data of %s", d.Position)
		}
		if d.MessageID == nil {
			t.Fatalf("dead letter at %s has no message_id; every row these tests write has one", d.Position)
		}
		out[*d.MessageID] = d
	}
	testkit.Must(t, rows.Err(), "read the dead-letter table")
	return out
}

func parkedOnly(dead map[string]deadRow) map[string]deadRow {
	out := map[string]deadRow{}
	for id, d := range dead {
		if d.Status == "parked" {
			out[id] = d
		}
	}
	return out
}

func reasons(dead map[string]deadRow) []string {
	var out []string
	for _, d := range dead {
		out = append(out, d.Reason)
	}
	return out
}

// expectDeadSet: the dead-letter table holds exactly rows.
func expectDeadSet(t *testing.T, dead map[string]deadRow, rows ...*outRow) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range rows {
		want[r.id] = true
		if _, ok := dead[r.id]; !ok {
			t.Errorf("%s/%s v%d (%s) is not in the dead-letter table; want it parked", r.aggType, r.aggID, r.version, r.id)
		}
	}
	for id, d := range dead {
		if !want[id] {
			t.Errorf("dead-letter table holds %s (%s); want it published", id, d.Reason)
		}
	}
}

// expectParked: r is parked first of its aggregate for reason (a part of
// it), headed for topic (when given), with its payload kept.
func expectParked(t *testing.T, dead map[string]deadRow, r *outRow, reason, topic string) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return // expectDeadSet said so
	}
	if !strings.Contains(d.Reason, reason) || d.BlockedBy != nil || d.Status != "parked" {
		t.Errorf("%s/%s v%d: reason %q, blocked_by %v, status %s; want a reason with %q, no blocker, parked",
			r.aggType, r.aggID, r.version, d.Reason, d.BlockedBy, d.Status, reason)
	}
	if topic != "" && (d.TargetTopic == nil || *d.TargetTopic != topic) {
		t.Errorf("%s/%s v%d: target_topic %v; want %s", r.aggType, r.aggID, r.version, d.TargetTopic, topic)
	}
	if d.PayloadBytes == nil || *d.PayloadBytes != len(r.payload) {
		t.Errorf("%s/%s v%d: payload of %v bytes kept; want the payload's %d", r.aggType, r.aggID, r.version, d.PayloadBytes, len(r.payload))
	}
}

// expectBlocked: r is parked behind blocker.
func expectBlocked(t *testing.T, dead map[string]deadRow, r, blocker *outRow) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return
	}
	if d.Reason != "blocked by "+blocker.id || d.BlockedBy == nil || *d.BlockedBy != blocker.id || d.Status != "parked" {
		t.Errorf("%s/%s v%d: reason %q, blocked_by %v, status %s; want \"blocked by %s\", blocked_by %s, parked",
			r.aggType, r.aggID, r.version, d.Reason, d.BlockedBy, d.Status, blocker.id, blocker.id)
	}
}

// expectUndecodable: r is parked as a row the decoder could not decode,
// with its columns in row_data (column col holding want) and no blocker.
func expectUndecodable(t *testing.T, dead map[string]deadRow, r *outRow, reason, col string, want *string) {
	t.Helper()
	d, ok := dead[r.id]
	if !ok {
		return
	}
	if !strings.Contains(d.Reason, reason) || d.BlockedBy != nil || d.Status != "parked" || d.PayloadBytes != nil {
		t.Errorf("%s: reason %q, blocked_by %v, status %s, payload %v bytes; want a reason with %q, no blocker, parked, no payload (undecodable)",
			r.id, d.Reason, d.BlockedBy, d.Status, d.PayloadBytes, reason)
	}
	got, has := d.RowData[col]
	if !has || (got == nil) != (want == nil) || got != nil && *got != *want {
		t.Errorf("%s: row_data[%q] = %v (present %v); want %v", r.id, col, deref(got), has, deref(want))
	}
	if id := d.RowData["message_id"]; id == nil || *id != r.id {
		t.Errorf("%s: row_data[message_id] = %v; want the row's id", r.id, deref(id))
	}
	if p := d.RowData["payload"]; p == nil || !strings.Contains(*p, fmt.Sprintf(`"v": %d`, r.version)) {
		t.Errorf("%s: row_data[payload] = %v; want the row's payload", r.id, deref(p))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strconv.Quote(*s)
}

// logLines is the relay's log lines that contain what and one of any.
func logLines(r *harness.Relay, what string, any ...string) []string {
	var out []string
	for _, line := range strings.Split(r.Stderr.String(), "\n") {
		if !strings.Contains(line, what) {
			continue
		}
		for _, a := range any {
			if strings.Contains(line, a) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

func firstOf(lines []string) string {
	if len(lines) == 0 {
		return "<none>"
	}
	return lines[0]
}

// uuids is every message id in line.
func uuids(line string) []string {
	return regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).FindAllString(line, -1)
}
