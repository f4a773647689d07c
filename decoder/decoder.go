package decoder

import (
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/walrelay/walrelay/schema"
)

// Config says which table is the outbox and how its columns are named.
type Config struct {
	// Table is the outbox table. Relation messages for other tables are
	// remembered, but their rows are skipped. Defaults to
	// public.outbox_messages when zero; an empty Schema defaults to public.
	Table schema.Table
	// Columns maps the contract to the table's columns. Defaults to
	// schema.DefaultColumns() when zero.
	Columns schema.Columns
	// AggregateTypeDefault is the aggregate type of every row when the
	// table has no Columns.AggregateType column, and of a row whose
	// aggregate type is NULL: the topic template's {aggregate_type}, the
	// aggregate_type header, and the aggregate its rows are ordered and
	// blocked by. Empty (the default): the column is required, and a row
	// whose aggregate type is NULL or empty must name its topic. An empty
	// (not NULL) aggregate type stays empty either way.
	AggregateTypeDefault string
	// ContentType, when set, is the ContentType of every message (the
	// record's content-type header) instead of the one the payload
	// column's type gives: application/json for json and jsonb,
	// text/plain; charset=utf-8 for text, varchar, bpchar and name,
	// application/octet-stream for bytea. A text column holding JSON wants
	// application/json. It must be a media type (mime.ParseMediaType), and
	// not a CloudEvents structured-mode one (application/cloudevents...):
	// walrelay publishes in binary mode. Defaults to "": by the column's
	// type.
	ContentType string
	// NullPayload says what a row whose payload is NULL becomes:
	// NullPayloadPark, a *BadRowError (parked or halted, as the sink's
	// policy says), or NullPayloadTombstone, a message with Tombstone set
	// (a Kafka record with a null value). Defaults to NullPayloadPark.
	NullPayload NullPayload
	// SpanContextColumn names a column holding a span context as Debezium's
	// Outbox Event Router stores it (its tracingspancontext: Java
	// Properties text with a traceparent and maybe a tracestate). A valid
	// traceparent becomes the record's traceparent header, with its
	// tracestate; a value that is not one is counted by the sink and the
	// message goes without (schema.Message.SpanContextDrops). Optional: a
	// table without the column, or a NULL, gives no trace header. It is
	// read from the text of any type. Defaults to "": none.
	SpanContextColumn string
	// ContentTypeColumn names a text column (text, varchar, char or name)
	// whose value is its row's ContentType, for a table whose payloads are
	// of several types. A NULL or empty value gives ContentType as without
	// the column: Config.ContentType, else the payload column type's. A
	// value that is no media type (mime.ParseMediaType), is a CloudEvents
	// structured-mode one, or is over MaxContentTypeBytes makes the row a
	// *BadRowError: consumers read the payload by it. Optional: a table
	// without the column reads as NULL. A tombstone has no content type
	// whatever the column says. Defaults to "": none.
	ContentTypeColumn string
}

// MaxContentTypeBytes bounds a content type read from the content type
// column: it is a header of every record (RFC 6838 allows 127 characters
// each for a type and a subtype, leaving room for parameters).
const MaxContentTypeBytes = 256

// NullPayload is what the decoder makes of a NULL payload.
type NullPayload string

// The choices of Config.NullPayload.
const (
	NullPayloadPark      NullPayload = "park"
	NullPayloadTombstone NullPayload = "tombstone"
)

// The settings of Config that errors name, for a program to say in its
// own terms (walrelay says its flags).
const (
	SettingContentType = "decoder.Config.ContentType"
	SettingNullPayload = "decoder.Config.NullPayload"
	SettingSpanContext = "decoder.Config.SpanContextColumn"
	// SettingContentTypeColumn is Config.ContentTypeColumn.
	SettingContentTypeColumn = "decoder.Config.ContentTypeColumn"
)

// Kind says what an Event carries.
type Kind uint8

const (
	// KindSkip: nothing for the caller (Relation, Type, Origin, Update,
	// Delete, Truncate, logical messages other than walrelay's heartbeats,
	// rows of other tables, ...).
	KindSkip Kind = iota
	// KindBegin: a transaction starts; XID, FinalLSN and CommitTime are set.
	KindBegin
	// KindMessage: one outbox row of the open transaction; Message is set.
	KindMessage
	// KindCommit: the open transaction ends; CommitLSN, EndLSN and
	// CommitTime are set.
	KindCommit
	// KindHeartbeat: a walrelay heartbeat (schema.HeartbeatPrefix), a
	// logical message written outside any transaction. EndLSN is its WAL
	// position: every transaction that committed before it has been sent.
	KindHeartbeat
)

var kindNames = [...]string{"skip", "begin", "message", "commit", "heartbeat"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Event is the outcome of decoding one pgoutput message.
type Event struct {
	Kind Kind
	// XID is the transaction id: set on Begin, Message and Commit.
	XID uint32
	// FinalLSN is the transaction's commit LSN, announced by its Begin.
	// Set on Begin and Message.
	FinalLSN pglogrepl.LSN
	// CommitLSN is the LSN of the commit record. Commit only.
	CommitLSN pglogrepl.LSN
	// EndLSN is the Commit's TransactionEndLSN: the position walrelay
	// confirms once every message of the transaction is acknowledged. On
	// KindHeartbeat, the heartbeat's position.
	EndLSN pglogrepl.LSN
	// CommitTime is the commit timestamp (UTC). Set on Begin, Message and
	// Commit.
	CommitTime time.Time
	// Message is the decoded outbox row. KindMessage only.
	Message *schema.Message
}

// Decoder decodes the pgoutput messages of one replication session. It
// holds the relation cache and the open transaction. Not safe for
// concurrent use.
type Decoder struct {
	tables    []*outboxTable
	relations map[uint32]*relation
	tx        txState
	scratch   []value // reused across rows: one entry per tuple column
}

// outboxTable is one outbox table of a Decoder: its Config, resolved.
type outboxTable struct {
	index   int // in NewTables' order: Message.Table and BadRowError.Table
	table   schema.Table
	names   [schema.NumFields]string
	aggType []byte // Config.AggregateTypeDefault; nil when unset
	extras  extraColumns
	opts    rowOptions
}

// txState is the open transaction, from its Begin.
type txState struct {
	open       bool
	xid        uint32
	finalLSN   pglogrepl.LSN
	commitTime time.Time
	seq        uint32 // the next outbox row's place in the transaction
}

// New validates cfg, fills its defaults and returns a Decoder of its one
// outbox table with an empty relation cache and no open transaction.
func New(cfg Config) (*Decoder, error) { return NewTables(cfg) }

// NewTables is New for several outbox tables read from one stream, each
// with its own columns and options: a row's Message.Table (or its
// BadRowError.Table) is its table's index in cfgs. The rows of all of them
// are numbered together in their transaction (Message.Seq), so that a
// row's Position stays unique in the slot. A table given twice is refused.
func NewTables(cfgs ...Config) (*Decoder, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("decoder config: no outbox table")
	}
	d := &Decoder{relations: map[uint32]*relation{}}
	for i, cfg := range cfgs {
		cfg, err := cfg.resolve()
		if err != nil {
			if len(cfgs) > 1 {
				err = fmt.Errorf("table %d of %d: %w", i+1, len(cfgs), err)
			}
			return nil, err
		}
		for _, t := range d.tables {
			if t.table == cfg.Table {
				return nil, fmt.Errorf("decoder config: table %s is given twice", cfg.Table)
			}
		}
		d.tables = append(d.tables, &outboxTable{
			index:   i,
			table:   cfg.Table,
			names:   cfg.Columns.Names(),
			aggType: defaultBytes(cfg.AggregateTypeDefault),
			extras:  cfg.extraColumns(),
			opts:    cfg.rowOptions(),
		})
	}
	return d, nil
}

// outbox is the outbox table named namespace.name; nil for another.
func (d *Decoder) outbox(namespace, name []byte) *outboxTable {
	for _, t := range d.tables {
		if string(namespace) == t.table.Schema && string(name) == t.table.Name {
			return t
		}
	}
	return nil
}

// resolve fills cfg's defaults and validates it.
func (cfg Config) resolve() (Config, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Table.Validate("table"); err != nil {
		return cfg, fmt.Errorf("decoder config: %w", err)
	}
	if err := cfg.Columns.Validate(); err != nil {
		return cfg, fmt.Errorf("decoder config: %w", err)
	}
	if err := validateAggregateType(cfg.AggregateTypeDefault); err != nil {
		return cfg, fmt.Errorf("decoder config: %s: %w", SettingAggregateTypeDefault, err)
	}
	if cfg.NullPayload == "" {
		cfg.NullPayload = NullPayloadPark
	}
	if cfg.NullPayload != NullPayloadPark && cfg.NullPayload != NullPayloadTombstone {
		return cfg, fmt.Errorf("decoder config: %s is %q; want %s or %s", SettingNullPayload, cfg.NullPayload,
			NullPayloadPark, NullPayloadTombstone)
	}
	if err := checkContentType(cfg.ContentType); err != nil {
		return cfg, fmt.Errorf("decoder config: %w", err)
	}
	if err := cfg.checkExtraColumn("span context", cfg.SpanContextColumn); err != nil {
		return cfg, fmt.Errorf("decoder config: %s: %w", SettingSpanContext, err)
	}
	if err := cfg.checkExtraColumn("content type", cfg.ContentTypeColumn); err != nil {
		return cfg, fmt.Errorf("decoder config: %s: %w", SettingContentTypeColumn, err)
	}
	if cfg.ContentTypeColumn != "" && cfg.ContentTypeColumn == cfg.SpanContextColumn {
		return cfg, fmt.Errorf("decoder config: column %q is configured for both the span context and the content type", cfg.ContentTypeColumn)
	}
	return cfg, nil
}

// checkExtraColumn checks the name of a column outside the contract's
// fields (the span context's, the content type's), what it holds: a valid
// identifier, and no column of the contract's fields. Empty is none.
func (cfg Config) checkExtraColumn(what, column string) error {
	if column == "" {
		return nil
	}
	if err := schema.ValidateIdentifier(what+" column", column); err != nil {
		return err
	}
	for f, name := range cfg.Columns.Names() {
		if name == column {
			return fmt.Errorf("column %q is configured for both the %s and %s", name, what, schema.Field(f))
		}
	}
	return nil
}

// withDefaults is cfg with its defaults filled, not validated.
func (cfg Config) withDefaults() Config {
	if cfg.Table == (schema.Table{}) {
		cfg.Table = schema.DefaultConfig().Table
	}
	if cfg.Table.Schema == "" {
		cfg.Table.Schema = "public"
	}
	if cfg.Columns == (schema.Columns{}) {
		cfg.Columns = schema.DefaultColumns()
	}
	return cfg
}

// maxAggregateType bounds Config.AggregateTypeDefault: it goes into topic
// names (at most 249 bytes) and headers.
const maxAggregateType = 200

// validateAggregateType accepts an aggregate type default: empty (none),
// or printable UTF-8 of at most maxAggregateType bytes.
func validateAggregateType(s string) error {
	switch {
	case len(s) > maxAggregateType:
		return fmt.Errorf("%d bytes, over the limit of %d", len(s), maxAggregateType)
	case !utf8.ValidString(s):
		return fmt.Errorf("%q is not valid UTF-8", s)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%q has a control character", s)
	}
	return nil
}

// Validate checks cfg as New does, without making a Decoder.
func (cfg Config) Validate() error {
	_, err := cfg.resolve()
	return err
}

// checkContentType refuses a Config.ContentType that is no media type, or
// one that would make a record a structured-mode CloudEvent.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	if fault := mediaTypeFault(ct); fault != "" {
		return fmt.Errorf("%s %q %s", SettingContentType, ct, fault)
	}
	return nil
}

// mediaTypeFault says why ct cannot be a record's content-type, as the
// end of a sentence about it; "" when it can be.
func mediaTypeFault(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && !strings.Contains(mt, "/") {
		err = errors.New("want type/subtype") // ParseMediaType takes a lone token too
	}
	if err == nil && strings.IndexFunc(ct, unicode.IsControl) >= 0 {
		err = errors.New("a control character") // a quoted parameter may hold one
	}
	if err != nil {
		return fmt.Sprintf("is not a media type like application/json: %v", err)
	}
	if strings.HasPrefix(mt, "application/cloudevents") {
		return "is a CloudEvents structured-mode type: walrelay publishes in binary mode (ce_ headers), " +
			"so give the payload's own type, like application/json"
	}
	return ""
}

// defaultBytes is s as the bytes a row's value would be, nil when empty.
func defaultBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// Decode reads one pgoutput message (the WALData of one XLogData frame).
// The decoder may keep references into data: the caller must not reuse it.
//
// A *BadRowError leaves the decoder consistent: the row is lost to the
// decoder but the transaction stays open, and decoding may go on. Any other
// error is a protocol error after which the session should be restarted.
func (d *Decoder) Decode(data []byte) (Event, error) {
	if len(data) == 0 {
		return Event{}, errors.New("decode pgoutput: empty message")
	}
	r := &reader{buf: data, pos: 1}
	switch data[0] {
	case 'B':
		return d.begin(r)
	case 'C':
		return d.commit(r)
	case 'R':
		return Event{}, d.relation(r)
	case 'I':
		return d.insert(r)
	case 'M':
		return d.logicalMessage(r)
	default:
		return Event{}, nil
	}
}

// begin: Int64 final LSN, Int64 commit time, Int32 xid.
func (d *Decoder) begin(r *reader) (Event, error) {
	tx := txState{open: true, finalLSN: r.lsn(), commitTime: r.time(), xid: r.u32()}
	if err := r.finish(); err != nil {
		return Event{}, fmt.Errorf("decode begin: %w", err)
	}
	if d.tx.open {
		return Event{}, fmt.Errorf("decode begin of xid %d: transaction %d (final lsn %s) has not committed",
			tx.xid, d.tx.xid, d.tx.finalLSN)
	}
	d.tx = tx
	return Event{Kind: KindBegin, XID: tx.xid, FinalLSN: tx.finalLSN, CommitTime: tx.commitTime}, nil
}

// logicalMessage (pgoutput sends them with the messages option): Int8 flags (1:
// transactional), Int64 LSN, String prefix, Int32 length, Byte[n] content.
// Only walrelay's own heartbeats, written outside transactions, matter.
func (d *Decoder) logicalMessage(r *reader) (Event, error) {
	flags, lsn, prefix := r.u8(), r.lsn(), r.cstring()
	r.take(int(int32(r.u32())))
	if err := r.finish(); err != nil {
		return Event{}, fmt.Errorf("decode logical message: %w", err)
	}
	if flags&1 != 0 || string(prefix) != schema.HeartbeatPrefix {
		return Event{}, nil
	}
	return Event{Kind: KindHeartbeat, EndLSN: lsn}, nil
}

// commit: Int8 flags (unused), Int64 commit LSN, Int64 end LSN, Int64
// commit time.
func (d *Decoder) commit(r *reader) (Event, error) {
	r.u8()
	ev := Event{Kind: KindCommit, CommitLSN: r.lsn(), EndLSN: r.lsn(), CommitTime: r.time()}
	if err := r.finish(); err != nil {
		return Event{}, fmt.Errorf("decode commit: %w", err)
	}
	if !d.tx.open {
		return Event{}, fmt.Errorf("decode commit at %s: no transaction is open", ev.CommitLSN)
	}
	ev.XID = d.tx.xid
	d.tx = txState{}
	return ev, nil
}
