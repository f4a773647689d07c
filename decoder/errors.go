package decoder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/schema"
)

// BadRowError is an outbox row that cannot become a Message. The stream is
// intact: the caller may park the row and go on decoding, or halt.
type BadRowError struct {
	// Field is the contract field at fault.
	Field schema.Field
	// Column is the configured column name of Field, or of the content
	// type when ContentType is set.
	Column string
	// ContentType is true when the fault is in the row's content type
	// (Config.ContentTypeColumn), the media type of Field's, the payload's,
	// value.
	ContentType bool
	// Table is the index of the row's outbox table (Message.Table).
	Table int
	// Reason says what is wrong, in a few lowercase words (with the offending
	// value quoted and shortened where it helps; never a payload or header).
	Reason string
	// MessageID is valid only when HasID is true: the row's message_id
	// parsed before the fault was found.
	MessageID schema.MessageID
	HasID     bool
	// AggregateType and AggregateID are the row's, when present (text as
	// the columns held it; possibly empty).
	AggregateType string
	AggregateID   string
	// CommitLSN is the final LSN of the row's transaction (from its Begin),
	// CommitTime its commit time, and Seq the row's place among the
	// transaction's outbox rows: CommitLSN and Seq are its Position. Of a
	// row read by SQL, they are the position and time RowDecoder.Decode was
	// given.
	CommitLSN  pglogrepl.LSN
	CommitTime time.Time
	Seq        uint32
	// Row is every column of the row as text, nil for null: what a
	// dead-letter entry keeps of a row that could not be decoded.
	Row map[string]*string
}

// Position is the row's place in the WAL.
func (e *BadRowError) Position() schema.Position {
	return schema.Position{CommitLSN: e.CommitLSN, Seq: e.Seq}
}

// Error is one line: the row's identity, the column and the reason.
func (e *BadRowError) Error() string {
	var b strings.Builder
	b.WriteString("bad outbox row")
	if e.HasID {
		b.WriteString(" message_id=")
		b.WriteString(idText(e.MessageID))
	}
	if e.AggregateID != "" {
		b.WriteString(" aggregate_id=")
		b.WriteString(quote([]byte(e.AggregateID)))
	}
	fmt.Fprintf(&b, " in transaction %s: %s: ", e.CommitLSN, columnLabel(e.Column, e.Field, e.ContentType))
	b.WriteString(strings.ReplaceAll(e.Reason, "\n", `\n`))
	return b.String()
}

// DeadLetter is the row as the dead-letter table keeps it: its position,
// every column as text, its message id and aggregate where they were
// readable, and the error as the reason.
func (e *BadRowError) DeadLetter() schema.DeadLetter {
	dl := schema.DeadLetter{
		Position:   e.Position(),
		Table:      e.Table,
		Row:        e.Row,
		Aggregate:  schema.Aggregate{Type: e.AggregateType, ID: e.AggregateID},
		CommitTime: e.CommitTime,
		Reason:     e.Error(),
	}
	if e.HasID {
		id := e.MessageID
		dl.MessageID = &id
	}
	return dl
}

// IsBadRow reports whether err is, or wraps, a *BadRowError.
func IsBadRow(err error) bool {
	_, ok := AsBadRow(err)
	return ok
}

// AsBadRow returns the *BadRowError err is or wraps, if any.
func AsBadRow(err error) (*BadRowError, bool) {
	var bad *BadRowError
	ok := errors.As(err, &bad)
	return bad, ok
}

// maxQuoted bounds how much of a value goes into an error message.
const maxQuoted = 64

// idText renders a message id for an error message: as it is when it is
// made of letters, digits and -_.:{} only (a uuid, a number, most keys),
// quoted otherwise.
func idText(id schema.MessageID) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:{}", c) >= 0) {
			return quote([]byte(id))
		}
	}
	return string(id)
}

// quote renders a value for an error message: Go-quoted (so it stays on one
// line) and cut after maxQuoted bytes.
func quote(b []byte) string {
	if len(b) > maxQuoted {
		return fmt.Sprintf("%q...", b[:maxQuoted])
	}
	return fmt.Sprintf("%q", b)
}
