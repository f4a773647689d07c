package schema

import (
	"net/url"
	"strings"
)

// Kafka header keys of every published record: the CloudEvents Kafka binary
// binding (ce_*) plus the aggregate's type and version. The sink writes
// them; consumers (package inbox) read them. A headers-column entry with one
// of these keys, in any case, never overrides them (CheckHeader).
const (
	HeaderSpecVersion      = "ce_specversion"
	HeaderID               = "ce_id"
	HeaderType             = "ce_type"
	HeaderSource           = "ce_source"
	HeaderSubject          = "ce_subject"
	HeaderTime             = "ce_time"
	HeaderContentType      = "content-type"
	HeaderAggregateType    = "aggregate_type"
	HeaderAggregateVersion = "aggregate_version"
)

// Header keys applications put into the headers column (package outbox
// fills them from the context) and consumers carry on.
const (
	// HeaderTraceparent is the W3C Trace Context traceparent, under the name
	// OpenTelemetry's Kafka propagation reads.
	HeaderTraceparent = "traceparent"
	// HeaderCorrelationID ties the messages of one business request together.
	HeaderCorrelationID = "correlation_id"
)

// HeaderReplay marks a record `walrelay replay` published again, for a
// consumer that rebuilds its state: its value is when the replay started
// (RFC 3339, UTC). The record's ce_id is the message's own, as on every
// other delivery.
const HeaderReplay = "walrelay_replay"

// HeaderDrop says why an entry of the headers column is not published as a
// record header; the empty HeaderDrop publishes it. The values are the
// reason label of walrelay_headers_dropped_total.
type HeaderDrop string

// The reasons an entry of the headers column is dropped. Every record must
// read as a CloudEvent in the Kafka binary binding, where a ce_ header is a
// context attribute and content-type is datacontenttype.
const (
	// DropReserved: walrelay sets a header of this name itself (compared
	// in any case), and the row's entry must not override it.
	DropReserved HeaderDrop = "reserved"
	// DropInvalidName: a key that starts with ce_ in any case but is not
	// ce_ and then a CloudEvents attribute name: 1 to 20 lower-case
	// letters a-z and digits (and not "data", which the JSON event format
	// keeps for the data).
	DropInvalidName HeaderDrop = "invalid_name"
	// DropInvalidValue: ce_dataschema whose value is not an absolute URI,
	// as the attribute must be.
	DropInvalidValue HeaderDrop = "invalid_value"
	// DropDataContentType: ce_datacontenttype, which would compete with
	// content-type, the record's datacontenttype in the binary binding.
	DropDataContentType HeaderDrop = "datacontenttype"
	// DropSpanContext: the row's span context column (Debezium's
	// tracingspancontext) holds no traceparent walrelay puts on a record
	// (ValidTraceparent), or a tracestate that is not printable ASCII of at
	// most 512 characters. It is not an entry of the headers column, but a
	// trace header dropped all the same, and counted with them.
	DropSpanContext HeaderDrop = "span_context"
)

// HeaderDrops lists every reason, for counters that start at zero.
var HeaderDrops = []HeaderDrop{DropReserved, DropInvalidName, DropInvalidValue, DropDataContentType, DropSpanContext}

// reservedHeaders are the headers every record gets from walrelay itself.
var reservedHeaders = []string{
	HeaderSpecVersion, HeaderID, HeaderType, HeaderSource, HeaderSubject, HeaderTime,
	HeaderContentType, HeaderAggregateType, HeaderAggregateVersion,
	HeaderWALSource, HeaderWALPosition,
}

// cePrefix starts the header of a CloudEvents attribute in the Kafka
// binary binding.
const cePrefix = "ce_"

// maxAttributeName is the longest CloudEvents attribute name (the spec's
// limit for extension attributes).
const maxAttributeName = 20

// CheckHeader says whether the headers-column entry key: value is
// published (the empty HeaderDrop) or dropped, and why. It is the one rule:
// the sink applies it to every record, and package outbox refuses what it
// would drop. also are headers a configuration makes walrelay set itself
// besides those of every record (the sink's MessageIDHeader): an entry
// named like one of them, in any case, is reserved too.
func CheckHeader(key, value string, also ...string) HeaderDrop {
	for _, r := range reservedHeaders {
		if strings.EqualFold(key, r) {
			return DropReserved
		}
	}
	for _, r := range also {
		if strings.EqualFold(key, r) {
			return DropReserved
		}
	}
	if len(key) < len(cePrefix) || !strings.EqualFold(key[:len(cePrefix)], cePrefix) {
		return ""
	}
	name, ok := strings.CutPrefix(key, cePrefix)
	if !ok || !attributeName(name) {
		return DropInvalidName
	}
	switch name {
	case "datacontenttype":
		return DropDataContentType
	case "dataschema":
		if !absoluteURI(value) {
			return DropInvalidValue
		}
	}
	return ""
}

// Explain says in words why a header is dropped, for logs and errors.
func (d HeaderDrop) Explain() string {
	switch d {
	case DropReserved:
		return "walrelay sets this header itself"
	case DropInvalidName:
		return "not a CloudEvents attribute: want ce_ and 1 to 20 lower-case letters a-z or digits"
	case DropInvalidValue:
		return "ce_dataschema must be an absolute URI"
	case DropDataContentType:
		return "ce_datacontenttype would compete with content-type, the record's datacontenttype"
	case DropSpanContext:
		return "the span context column holds no W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, ids not all zeros) or a tracestate that is not printable ASCII of at most 512 characters"
	case "":
		return "published"
	}
	return string(d)
}

// attributeName reports whether s is a CloudEvents attribute name walrelay
// lets through: a-z and 0-9, 1 to 20 of them, and not "data".
func attributeName(s string) bool {
	if s == "" || len(s) > maxAttributeName || s == "data" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// absoluteURI reports whether s is an absolute URI (RFC 3986 section 4.3:
// a scheme, no surrounding space), as ce_dataschema must be.
func absoluteURI(s string) bool {
	if s == "" || strings.TrimSpace(s) != s {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && u.IsAbs()
}
