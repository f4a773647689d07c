package dlq

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/texttable"
	"github.com/walrelay/walrelay/schema"
)

// maxReason is how much of a reason the table shows.
const maxReason = 60

// timeLayout is RFC 3339 in UTC with milliseconds, as `walrelay status`
// writes its times.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// WriteTable writes entries for people, one aligned row each under a
// header, with their ages as of now and each reason shortened to one line;
// "no dead letters" when there are none. Payloads are never shown.
func WriteTable(w io.Writer, es []Entry, now time.Time) error {
	if len(es) == 0 {
		_, err := io.WriteString(w, "no dead letters\n")
		return err
	}
	rows := [][]string{{"POSITION", "MESSAGE_ID", "AGGREGATE", "TYPE", "PARKED", "REASON", "BLOCKED_BY"}}
	for _, e := range es {
		rows = append(rows, []string{e.Position.String(), idText(e.MessageID), aggregateText(e.Aggregate),
			dashIfEmpty(e.Type), age(now.Sub(e.ParkedAt)) + " ago", shorten(e.Reason, maxReason), idText(e.BlockedBy)})
	}
	return texttable.Write(w, rows)
}

// Report prints what a Retry of sel did (WriteText, or "no parked
// messages" when sel matched none) and returns the retry's verdict: an
// error when sel named one message that matched none (nothing is printed
// then) or when messages were left parked (the lines printed say why).
// An error writing to w, the terminal, is not the retry's, and is dropped.
func (r Result) Report(w io.Writer, sel Selection) error {
	if n := len(r.Published) + len(r.Left); n == 0 {
		if err := sel.Missed(n); err != nil {
			return err
		}
		fmt.Fprintf(w, "no parked messages (%s)\n", sel)
		return nil
	}
	r.WriteText(w) //nolint:errcheck // the terminal; the error says what was left
	if n := len(r.Left); n > 0 {
		return fmt.Errorf("%d %s left parked", n, messages(n))
	}
	return nil
}

// WriteDiscarded writes what a Discard of sel for reason did, n rows given
// up, or returns the error of a selection of one message that matched none.
// As with Report, an error writing to w, the terminal, is dropped.
func WriteDiscarded(w io.Writer, sel Selection, n int, reason string) error {
	if err := sel.Missed(n); err != nil {
		return err
	}
	fmt.Fprintf(w, "discarded %d parked %s (%s), reason: %s\n", n, messages(n), sel, reason)
	return nil
}

// messages is the noun for n messages.
func messages(n int) string {
	if n == 1 {
		return "message"
	}
	return "messages"
}

// WriteText writes what a Retry did for people: a line per message
// published, then one per message left parked with why, then the counts.
func (r Result) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, it := range r.Published {
		fmt.Fprintf(&b, "published  %s  %s  %s  %s\n", it.Position, idText(it.MessageID), aggregateText(it.Aggregate), dashIfEmpty(it.Type))
	}
	for _, it := range r.Left {
		fmt.Fprintf(&b, "left       %s  %s  %s  %s: %s\n", it.Position, idText(it.MessageID), aggregateText(it.Aggregate),
			dashIfEmpty(it.Type), it.Why)
	}
	fmt.Fprintf(&b, "%d published and removed, %d left parked\n", len(r.Published), len(r.Left))
	_, err := io.WriteString(w, b.String())
	return err
}

// idText is a message id, or "-" for none.
func idText(id *schema.MessageID) string {
	if id == nil {
		return "-"
	}
	return id.String()
}

// aggregateText is TYPE/ID, "-" standing for either when unknown.
func aggregateText(a schema.Aggregate) string {
	if a.ID == "" {
		return dashIfEmpty(a.Type) + "/-"
	}
	return dashIfEmpty(a.Type) + "/" + a.ID
}

// dashIfEmpty is s, or "-" when s is empty.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shorten cuts s to n runes on one line, marking the cut.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}

// age is a duration for people: "45s", "12m", "3h05m", "2d04h".
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// entryJSON is one row for scripts: stable snake_case keys, times in
// RFC 3339, null for what is unknown; the payload's size, never the payload.
type entryJSON struct {
	Position         string  `json:"position"`
	CommitLSN        string  `json:"commit_lsn"`
	Seq              uint32  `json:"seq"`
	MessageID        *string `json:"message_id"`
	AggregateType    *string `json:"aggregate_type"`
	AggregateID      *string `json:"aggregate_id"`
	AggregateVersion *int64  `json:"aggregate_version"`
	Type             *string `json:"type"`
	Topic            *string `json:"topic"`
	TargetTopic      *string `json:"target_topic"`
	PayloadBytes     *int    `json:"payload_bytes"`
	ContentType      *string `json:"content_type"`
	Undecodable      bool    `json:"undecodable"`
	OccurredAt       *string `json:"occurred_at"`
	CommittedAt      *string `json:"committed_at"`
	Reason           string  `json:"reason"`
	BlockedBy        *string `json:"blocked_by"`
	Status           string  `json:"status"`
	ParkedAt         string  `json:"parked_at"`
	Retries          int     `json:"retries"`
	LastError        *string `json:"last_error"`
	DiscardedAt      *string `json:"discarded_at"`
	DiscardReason    *string `json:"discard_reason"`
}

// WriteJSON writes entries for scripts as one indented JSON array (see
// entryJSON for its keys); [] when there are none.
func WriteJSON(w io.Writer, es []Entry) error {
	out := make([]entryJSON, len(es))
	for i, e := range es {
		out[i] = jsonOf(e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func jsonOf(e Entry) entryJSON {
	return entryJSON{
		Position:         e.Position.String(),
		CommitLSN:        e.Position.CommitLSN.String(),
		Seq:              e.Position.Seq,
		MessageID:        idJSON(e.MessageID),
		AggregateType:    textJSON(e.Aggregate.Type),
		AggregateID:      textJSON(e.Aggregate.ID),
		AggregateVersion: e.AggregateVersion,
		Type:             textJSON(e.Type),
		Topic:            textJSON(e.Topic),
		TargetTopic:      textJSON(e.TargetTopic),
		PayloadBytes:     e.PayloadBytes,
		ContentType:      textJSON(e.ContentType),
		Undecodable:      e.Undecodable,
		OccurredAt:       timeJSON(e.OccurredAt),
		CommittedAt:      timeJSON(e.CommittedAt),
		Reason:           e.Reason,
		BlockedBy:        idJSON(e.BlockedBy),
		Status:           string(e.Status),
		ParkedAt:         e.ParkedAt.UTC().Format(timeLayout),
		Retries:          e.Retries,
		LastError:        textJSON(e.LastError),
		DiscardedAt:      timeJSON(e.DiscardedAt),
		DiscardReason:    textJSON(e.DiscardReason),
	}
}

func idJSON(id *schema.MessageID) *string {
	if id == nil {
		return nil
	}
	s := id.String()
	return &s
}

// textJSON is s, or null when empty (unknown).
func textJSON(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// timeJSON is t in timeLayout, or null when zero (unknown).
func timeJSON(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeLayout)
	return &s
}
