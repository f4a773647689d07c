package decoder

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/schema"
)

// value is one column of a row, a sub-slice of the frame.
type value struct {
	// kind is 't' (text), 'n' (null) or 'u' (unchanged TOAST value, read as
	// null); 0 when the relation lacks the column.
	kind byte
	b    []byte
}

func (v value) null() bool { return v.kind != 't' }

// rowOptions are the choices of a Config that shape a message, as message
// takes them.
type rowOptions struct {
	contentType string // "" for the payload column type's
	tombstone   bool   // a NULL payload is a tombstone, not a bad row
}

func (cfg Config) rowOptions() rowOptions {
	return rowOptions{contentType: cfg.ContentType, tombstone: cfg.NullPayload == NullPayloadTombstone}
}

// Content types by payload column type.
const (
	contentJSON   = "application/json"
	contentText   = "text/plain; charset=utf-8"
	contentBinary = "application/octet-stream"
)

// insert reads an Insert message: Int32 relation id, Byte1 'N', TupleData.
func (d *Decoder) insert(r *reader) (Event, error) {
	id := r.u32()
	tupleKind := r.u8()
	if r.short {
		return Event{}, fmt.Errorf("decode insert: %w", r.finish())
	}
	if tupleKind != 'N' {
		return Event{}, fmt.Errorf("decode insert into relation %d: tuple kind %q, want 'N'", id, tupleKind)
	}
	if !d.tx.open {
		return Event{}, fmt.Errorf("decode insert into relation %d: no transaction is open", id)
	}
	rel, ok := d.relations[id]
	if !ok {
		return Event{}, fmt.Errorf("decode insert: relation %d was never announced", id)
	}
	if !rel.outbox {
		return Event{}, nil
	}
	vals, err := d.tuple(r)
	if err != nil {
		return Event{}, fmt.Errorf("decode insert into relation %d: %w", id, err)
	}
	if len(vals) != rel.ncols {
		return Event{}, fmt.Errorf("decode insert into relation %d: row has %d columns, relation has %d", id, len(vals), rel.ncols)
	}
	pos := schema.Position{CommitLSN: d.tx.finalLSN, Seq: d.tx.seq}
	d.tx.seq++
	msg, err := message(rel, &rel.tab.names, &rel.tab.opts, vals, pos, d.tx.commitTime)
	if err != nil {
		if bad := (*BadRowError)(nil); errors.As(err, &bad) {
			bad.Table = rel.tab.index
		}
		return Event{}, err
	}
	msg.Table = rel.tab.index
	return Event{Kind: KindMessage, XID: d.tx.xid, FinalLSN: d.tx.finalLSN, CommitTime: d.tx.commitTime, Message: msg}, nil
}

// tuple reads TupleData: Int16 column count, then per column Byte1 kind
// and, for text, Int32 length and the bytes. The values reuse d.scratch,
// which grows by at most one entry per byte read, never by the count.
func (d *Decoder) tuple(r *reader) ([]value, error) {
	n := int(r.u16())
	vals := d.scratch[:0]
	for i := 0; i < n && !r.short; i++ {
		v := value{kind: r.u8()}
		switch v.kind {
		case 'n', 'u':
		case 't':
			v.b = r.take(int(r.u32()))
		case 'b':
			return nil, errors.New("binary column values are not supported: start replication without binary 'true'")
		default:
			if !r.short {
				return nil, fmt.Errorf("column %d has unknown kind %q", i, v.kind)
			}
		}
		vals = append(vals, v)
	}
	d.scratch = vals
	return vals, r.finish()
}

// message converts one outbox row of rel, whose fields have the column
// names names, into a Message (or a *BadRowError) at pos, committed at
// commitTime, as opts say. A row costs the Message, one string holding all
// its strings, and the headers slice when it has headers (a bytea payload
// adds one); the string copies are made after every check. A json or text
// payload is vals' bytes, not a copy.
func message(rel *relation, names *[schema.NumFields]string, opts *rowOptions, vals []value, pos schema.Position, commitTime time.Time) (*schema.Message, error) {
	var v [schema.NumFields]value
	for f, c := range rel.col {
		if c >= 0 {
			v[f] = vals[c]
		}
	}
	if v[schema.FieldAggregateType].null() && rel.aggType != nil {
		v[schema.FieldAggregateType] = value{kind: 't', b: rel.aggType}
	}
	idReason := readID(v[schema.FieldMessageID])
	badRow := func(f schema.Field, column string, contentType bool, reason string) error {
		var id schema.MessageID
		if idReason == "" {
			id = schema.MessageID(v[schema.FieldMessageID].b)
		}
		return &BadRowError{
			Field: f, Column: column, ContentType: contentType, Reason: reason,
			MessageID: id, HasID: idReason == "",
			AggregateType: string(v[schema.FieldAggregateType].b),
			AggregateID:   string(v[schema.FieldAggregateID].b),
			CommitLSN:     pos.CommitLSN, CommitTime: commitTime, Seq: pos.Seq,
			Row: rawRow(rel, vals),
		}
	}
	fail := func(f schema.Field, reason string) error { return badRow(f, names[f], false, reason) }
	if p := rel.problem; p != nil {
		return nil, badRow(p.Field, p.Column, p.ContentType, p.reason())
	}
	if idReason != "" {
		return nil, fail(schema.FieldMessageID, idReason)
	}
	if f, reason := checkNames(&v); reason != "" {
		return nil, fail(f, reason)
	}
	m := &schema.Message{CommitLSN: pos.CommitLSN, CommitTime: commitTime, Seq: pos.Seq}
	if f, reason := readScalars(m, &v, &rel.typ, opts); reason != "" {
		return nil, fail(f, reason)
	}
	if reason := readContentType(m, rel, vals); reason != "" {
		return nil, badRow(schema.FieldPayload, rel.names[rel.ctCol], true, reason)
	}
	hst, reason := headerCheck(v[schema.FieldHeaders])
	if reason != "" {
		return nil, fail(schema.FieldHeaders, reason)
	}
	fillStrings(m, &v, hst)
	if c := rel.spanCol; c >= 0 && !vals[c].null() {
		addSpanContext(m, vals[c].b)
	}
	return m, nil
}

// rawRow is every column of a bad row as text (nil for null and unchanged
// TOAST values), so that a parked row keeps all it had.
func rawRow(rel *relation, vals []value) map[string]*string {
	row := make(map[string]*string, len(vals))
	for i, v := range vals {
		if i >= len(rel.names) {
			break
		}
		if v.null() {
			row[rel.names[i]] = nil
			continue
		}
		s := string(v.b)
		row[rel.names[i]] = &s
	}
	return row
}

// headerCheck validates the headers column; null has no headers.
func headerCheck(v value) (headerStats, string) {
	if v.null() {
		return headerStats{}, ""
	}
	return countHeaders(v.b)
}

// fillStrings sets the strings and headers of m, all of them sharing one
// allocation (the arena, grown up front to its final size).
func fillStrings(m *schema.Message, v *[schema.NumFields]value, hst headerStats) {
	var a strings.Builder
	a.Grow(len(v[schema.FieldMessageID].b) + len(v[schema.FieldAggregateType].b) + len(v[schema.FieldAggregateID].b) +
		len(v[schema.FieldType].b) + len(v[schema.FieldTopic].b) + hst.bytes)
	m.ID = schema.MessageID(add(&a, v[schema.FieldMessageID].b))
	m.AggregateType = add(&a, v[schema.FieldAggregateType].b)
	m.AggregateID = add(&a, v[schema.FieldAggregateID].b)
	m.Type = add(&a, v[schema.FieldType].b)
	m.Topic = add(&a, v[schema.FieldTopic].b)
	m.Headers = buildHeaders(&a, v[schema.FieldHeaders].b, hst)
}

// readID checks the message id, the text of any column type the decoder
// reads it from (a uuid's canonical form, a bigint's digits, a text
// column's value); the reason is empty when it may be one.
func readID(v value) string {
	switch {
	case v.null():
		return "null"
	case len(v.b) == 0:
		return "empty"
	case len(v.b) > schema.MaxMessageIDBytes:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(v.b), schema.MaxMessageIDBytes)
	}
	return ""
}

// checkNames checks the text fields: aggregate id and type must be set, and
// so must aggregate type unless the row names its topic (a NULL aggregate
// type is the default, when set, by now).
func checkNames(v *[schema.NumFields]value) (schema.Field, string) {
	for _, f := range [...]schema.Field{schema.FieldAggregateID, schema.FieldType} {
		if reason := emptiness(v[f]); reason != "" {
			return f, reason
		}
	}
	if emptiness(v[schema.FieldTopic]) != "" {
		if reason := emptiness(v[schema.FieldAggregateType]); reason != "" {
			return schema.FieldAggregateType, reason + ", and the row has no topic"
		}
	}
	return 0, ""
}

func emptiness(v value) string {
	switch {
	case v.null():
		return "null"
	case len(v.b) == 0:
		return "empty"
	}
	return ""
}

// readScalars fills payload, version and event time.
func readScalars(m *schema.Message, v *[schema.NumFields]value, typ *[schema.NumFields]uint32, opts *rowOptions) (schema.Field, string) {
	var reason string
	switch payload := v[schema.FieldPayload]; {
	case payload.null() && opts.tombstone:
		m.Tombstone = true
	case payload.null():
		return schema.FieldPayload, "null"
	default:
		if m.Payload, m.ContentType, reason = readPayload(payload.b, typ[schema.FieldPayload]); reason != "" {
			return schema.FieldPayload, reason
		}
		if opts.contentType != "" {
			m.ContentType = opts.contentType
		}
	}
	if ver := v[schema.FieldAggregateVersion]; !ver.null() {
		var ok bool
		if m.AggregateVersion, ok = parseInt64(ver.b); !ok {
			return schema.FieldAggregateVersion, "not an integer: " + quote(ver.b)
		}
		m.HasVersion = true
	}
	if at := v[schema.FieldOccurredAt]; !at.null() {
		if m.OccurredAt, reason = parseTimestamp(at.b, typ[schema.FieldOccurredAt] == oidTimestamptz); reason != "" {
			return schema.FieldOccurredAt, reason
		}
	}
	return 0, ""
}

// readContentType sets m's content type from the relation's content type
// column (Config.ContentTypeColumn) when the row's value there is neither
// NULL nor empty; a tombstone has none. The reason is empty unless the
// value cannot be a record's content-type.
func readContentType(m *schema.Message, rel *relation, vals []value) string {
	if rel.ctCol < 0 || m.Tombstone {
		return ""
	}
	v := vals[rel.ctCol]
	switch {
	case v.null() || len(v.b) == 0:
		return ""
	case len(v.b) > MaxContentTypeBytes:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(v.b), MaxContentTypeBytes)
	}
	ct := string(v.b)
	if fault := mediaTypeFault(ct); fault != "" {
		return quote(v.b) + " " + fault
	}
	m.ContentType = ct
	return ""
}

// readPayload passes json and text through and decodes bytea. The relation
// check has already refused every other type.
func readPayload(b []byte, oid uint32) (payload []byte, contentType, reason string) {
	switch oid {
	case oidJSON, oidJSONB:
		payload, contentType = b, contentJSON
	case oidBytea:
		var ok bool
		if payload, ok = decodeByteaHex(b); !ok {
			return nil, "", "bytea is not in hex format (bytea_output must be hex)"
		}
		contentType = contentBinary
	default:
		payload, contentType = b, contentText
	}
	if payload == nil {
		payload = []byte{}
	}
	return payload, contentType, ""
}

// add copies b into the arena and returns it as a string sharing the
// arena's memory. a must have been grown to hold everything added, so that
// all strings of a message share one allocation.
func add(a *strings.Builder, b []byte) string {
	start := a.Len()
	a.Write(b)
	return a.String()[start:]
}
