package schema

// Kafka header keys of every published record: the CloudEvents Kafka binary
// binding (ce_*) plus the aggregate's type and version. The sink writes
// them; consumers (package inbox) read them. A headers-column entry with one
// of these keys, in any case, never overrides them.
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
