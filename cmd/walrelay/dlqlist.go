package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/schema"
)

// dlqList prints the dead letters the flags select, by aggregate then
// position: a table for people or JSON for scripts. Payloads are never
// printed; JSON gives their size.
func dlqList(ctx context.Context, c config, st *dlq.Store, stdout, stderr io.Writer) error {
	f, err := c.DLQ.filter()
	if err != nil {
		return err
	}
	limit := f.Limit
	if limit > 0 {
		f.Limit++ // one more tells whether the limit cut the list
	}
	es, err := st.List(ctx, f)
	if err != nil {
		return err
	}
	if limit > 0 && len(es) > limit {
		es = es[:limit]
		fmt.Fprintf(stderr, "walrelay dlq list: more than %d rows; showing the first %d (narrow the filters or raise --limit)\n", limit, limit)
	}
	if c.JSON {
		return writeDeadLettersJSON(stdout, es)
	}
	return writeDeadLettersTable(stdout, es, time.Now())
}

func (d dlqOptions) filter() (dlq.Filter, error) {
	f := dlq.Filter{
		AggregateType: d.AggregateType,
		Type:          d.Type,
		Reason:        d.Reason,
		OlderThan:     d.OlderThan,
		NewerThan:     d.NewerThan,
		Status:        dlq.Status(d.Status),
		Limit:         d.Limit,
	}
	if d.Aggregate != "" {
		agg, err := parseAggregate(d.Aggregate)
		if err != nil {
			return dlq.Filter{}, err
		}
		f.AggregateType, f.AggregateID = agg.Type, agg.ID
	}
	if f.Status != dlq.Parked && f.Status != dlq.Discarded {
		return dlq.Filter{}, fmt.Errorf("--status is %q; want parked or discarded", d.Status)
	}
	if f.Limit < 0 || f.OlderThan < 0 || f.NewerThan < 0 {
		return dlq.Filter{}, fmt.Errorf("--limit, --older-than and --newer-than must not be negative")
	}
	return f, nil
}

// maxReason is how much of a reason the table shows.
const maxReason = 60

func writeDeadLettersTable(w io.Writer, es []dlq.Entry, now time.Time) error {
	if len(es) == 0 {
		_, err := io.WriteString(w, "no dead letters\n")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tMESSAGE_ID\tAGGREGATE\tTYPE\tPARKED\tREASON\tBLOCKED_BY")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Position, idText(e.MessageID), aggregateText(e.Aggregate),
			dashIfEmpty(e.Type), age(now.Sub(e.ParkedAt))+" ago", shorten(e.Reason, maxReason), idText(e.BlockedBy))
	}
	return tw.Flush()
}

func idText(id *schema.MessageID) string {
	if id == nil {
		return "-"
	}
	return id.String()
}

func aggregateText(a schema.Aggregate) string {
	if a.ID == "" {
		return dashIfEmpty(a.Type) + "/-"
	}
	return dashIfEmpty(a.Type) + "/" + a.ID
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

// deadLetterJSON is one row for scripts: stable snake_case keys, times in
// RFC 3339, null for what is unknown; the payload's size, never the payload.
type deadLetterJSON struct {
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

func writeDeadLettersJSON(w io.Writer, es []dlq.Entry) error {
	out := make([]deadLetterJSON, len(es))
	for i, e := range es {
		out[i] = deadLetterJSONOf(e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func deadLetterJSONOf(e dlq.Entry) deadLetterJSON {
	return deadLetterJSON{
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
		ParkedAt:         e.ParkedAt.UTC().Format(readAtLayout),
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
	return ptr(id.String())
}

func textJSON(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeJSON(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return ptr(t.UTC().Format(readAtLayout))
}

// readAtLayout is RFC 3339 in UTC with milliseconds.
const readAtLayout = "2006-01-02T15:04:05.000Z07:00"

func ptr[T any](v T) *T { return &v }

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
