package sink

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
)

// Header keys the sink sets itself. An entry of the headers column with one
// of these keys, in any case, is dropped (schema.CheckHeader): it must not
// override them.
const (
	headerSpecVersion      = schema.HeaderSpecVersion
	headerID               = schema.HeaderID
	headerType             = schema.HeaderType
	headerSource           = schema.HeaderSource
	headerSubject          = schema.HeaderSubject
	headerTime             = schema.HeaderTime
	headerContentType      = schema.HeaderContentType
	headerAggregateType    = schema.HeaderAggregateType
	headerAggregateVersion = schema.HeaderAggregateVersion
)

// ownHeaders is how many headers the sink sets itself, at most (with
// Config.MessageIDHeader and the WAL origin).
const ownHeaders = 12

// droppedHeader is an entry of the headers column left out of a record.
type droppedHeader struct {
	key    string
	reason schema.HeaderDrop
}

// record is a message as the sink holds it from Publish until Kafka has
// acknowledged it. Its fields are immutable, so a retry sends the same bytes.
type record struct {
	token   uint64
	id      schema.MessageID
	key     []byte
	value   []byte
	headers []kafka.Header
	// time is the Kafka record timestamp: when Publish accepted the message,
	// as the Java producer stamps its send time.
	time time.Time
	// size is schema.Message.Size, for the in-flight bounds.
	size int
	// wire estimates the encoded size, for the batch byte bound.
	wire int
	// msg is the message, for Park; nil for a bad row.
	msg *schema.Message
	// row is a row that could not become a message (PublishBad); else nil.
	row BadRow
	// bad, when set, is the verdict the record came with: Publish found the
	// message unpublishable, or it is a bad row. It is parked when its turn
	// comes.
	bad *verdict
	// mark is the record's walrelay_position, when marked: the sink had an
	// origin and the record a partition.
	mark   schema.WALMark
	marked bool
	// inline holds headers when they fit, so that they take no allocation
	// of their own: walrelay's own and a few of the headers column's.
	inline [inlineHeaders]kafka.Header
}

// inlineHeaders is how many headers a record holds without an allocation
// of their own.
const inlineHeaders = ownHeaders + 4

// recordHeaders are the settings of Config that shape every record's
// headers.
type recordHeaders struct {
	source   string // Config.Source: ce_source
	idHeader string // Config.MessageIDHeader: "" for none
	// wal is the HeaderWALSource value, "" for a record published from
	// elsewhere than the stream (no origin: Start was not called); mark is
	// then the record's HeaderWALPosition.
	wal  string
	mark schema.WALMark
}

// newRecord builds the Kafka record of m, and says which entries of its
// headers column it left out (nil when none). It does not validate m. A
// tombstone's value is null (nil), whatever its Payload.
//
// It takes two allocations: the record (with its headers inline when they
// fit) and one buffer for the header values, which the key shares: the key
// is the aggregate id, which ce_subject carries too.
func newRecord(m *schema.Message, token uint64, rh recordHeaders, now time.Time) (*record, []droppedHeader) {
	r := &record{
		token: token,
		id:    m.ID,
		value: m.Payload,
		time:  now,
		size:  m.Size(),
		msg:   m,
	}
	var hs []kafka.Header
	if ownHeaders+len(m.Headers) <= len(r.inline) {
		hs = r.inline[:0]
	}
	var dropped []droppedHeader
	r.headers, r.key, dropped = appendHeaders(hs, m, rh)
	if m.Tombstone {
		r.value = nil
	}
	r.wire = recordOverhead + len(r.key) + len(r.value)
	for _, h := range r.headers {
		r.wire += headerOverhead + len(h.Key) + len(h.Value)
	}
	return r, dropped
}

// Upper bounds of the varints and fixed fields of a v2 record and header.
const (
	recordOverhead = 1 + 10 + 5 + 5 + 5 + 5 + 5
	headerOverhead = 5 + 5
	// batchOverhead is a record batch header plus the produce request's
	// topic and partition framing, roughly.
	batchOverhead = 61 + 64
)

// buildHeaders returns the record headers of m: the CloudEvents attributes,
// the message id header when rh names one, aggregate_type and
// aggregate_version, walrelay_source and walrelay_position when rh has a
// WAL origin, then every entry of the headers column that
// schema.CheckHeader lets through; it says which entries it dropped, and
// why (nil when none), and adds the trace headers of m's span context that
// the decoder could not read (m.SpanContextDrops). Empty optional
// attributes (ce_time of a zero OccurredAt, an empty content type or
// aggregate type, a missing version) are left out: so a tombstone, with no
// content type, has no content-type header. All values share one
// allocation.
func buildHeaders(m *schema.Message, rh recordHeaders) ([]kafka.Header, []droppedHeader) {
	hs, _, dropped := appendHeaders(nil, m, rh)
	return hs, dropped
}

// appendHeaders is buildHeaders appending to hs (made when nil), and also
// returns the value of ce_subject: the aggregate id, in the values' buffer.
func appendHeaders(hs []kafka.Header, m *schema.Message, rh recordHeaders) ([]kafka.Header, []byte, []droppedHeader) {
	if hs == nil {
		hs = make([]kafka.Header, 0, ownHeaders+len(m.Headers))
	}
	b := headerBuilder{hs: hs, buf: make([]byte, 0, headerValueCap(m, rh))}
	b.add(headerSpecVersion, "1.0")
	b.add(headerID, string(m.ID))
	var also []string
	if rh.idHeader != "" {
		b.add(rh.idHeader, string(m.ID))
		also = []string{rh.idHeader}
	}
	b.add(headerType, m.Type)
	b.add(headerSource, rh.source)
	b.add(headerSubject, m.AggregateID)
	subject := b.hs[len(b.hs)-1].Value
	if !m.OccurredAt.IsZero() {
		start := len(b.buf)
		b.buf = m.OccurredAt.UTC().AppendFormat(b.buf, time.RFC3339Nano)
		b.cut(headerTime, start)
	}
	b.addOptional(headerContentType, m.ContentType)
	b.addOptional(headerAggregateType, m.AggregateType)
	if m.HasVersion {
		start := len(b.buf)
		b.buf = strconv.AppendInt(b.buf, m.AggregateVersion, 10)
		b.cut(headerAggregateVersion, start)
	}
	if rh.wal != "" {
		b.add(schema.HeaderWALSource, rh.wal)
		start := len(b.buf)
		b.buf = rh.mark.Append(b.buf)
		b.cut(schema.HeaderWALPosition, start)
	}
	var dropped []droppedHeader
	for _, h := range m.Headers {
		if d := schema.CheckHeader(h.Key, h.Value, also...); d != "" {
			dropped = append(dropped, droppedHeader{h.Key, d})
			continue
		}
		b.add(h.Key, h.Value)
	}
	for _, key := range m.SpanContextDrops {
		dropped = append(dropped, droppedHeader{key, schema.DropSpanContext})
	}
	return b.hs, subject, dropped
}

// headerValueCap is the byte length of every header value buildHeaders may
// write: the strings (the id twice: ce_id and a message id header), plus 40
// for the time, 20 for the version and maxWALMark for the WAL position.
func headerValueCap(m *schema.Message, rh recordHeaders) int {
	n := len("1.0") + 2*len(m.ID) + len(m.Type) + len(rh.source) + len(m.AggregateID) + 40 +
		len(m.ContentType) + len(m.AggregateType) + 20
	if rh.wal != "" {
		n += len(rh.wal) + maxWALMark
	}
	for _, h := range m.Headers {
		n += len(h.Value)
	}
	return n
}

// maxWALMark is the longest HeaderWALPosition value: "tli=", 10 digits,
// " lsn=", 17, " seq=", 10, " partitions=", 19.
const maxWALMark = 4 + 10 + 5 + 17 + 5 + 10 + 12 + 19

// headerBuilder appends header values to one buffer and slices them out.
// Should the buffer grow after all, earlier values keep pointing at the old
// array, which stays valid: the capacity only saves allocations.
type headerBuilder struct {
	hs  []kafka.Header
	buf []byte
}

func (b *headerBuilder) add(key, value string) {
	start := len(b.buf)
	b.buf = append(b.buf, value...)
	b.cut(key, start)
}

func (b *headerBuilder) addOptional(key, value string) {
	if value != "" {
		b.add(key, value)
	}
}

func (b *headerBuilder) cut(key string, start int) {
	end := len(b.buf)
	b.hs = append(b.hs, kafka.Header{Key: key, Value: b.buf[start:end:end]})
}

// topicFor routes m: its own Topic when set, else the template with
// {aggregate_type} and {type} replaced.
func topicFor(template string, m *schema.Message) string {
	if m.Topic != "" {
		return m.Topic
	}
	if !strings.Contains(template, "{") {
		return template
	}
	t := strings.ReplaceAll(template, "{aggregate_type}", m.AggregateType)
	return strings.ReplaceAll(t, "{type}", m.Type)
}

// maxTopicLen is Kafka's limit on topic names.
const maxTopicLen = 249

// validateTopic applies Kafka's rule for topic names (Topic.validate in the
// Java client), so that a bad name gets a precise error before any request.
func validateTopic(name string) error {
	if name == "" {
		return fmt.Errorf("topic name is empty")
	}
	if name == "." || name == ".." {
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	if len(name) > maxTopicLen {
		return fmt.Errorf("topic name %q is longer than %d characters", name, maxTopicLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("topic name %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}

// Topic is the topic the sink publishes m to under c: m's own Topic, else
// the TopicTemplate of m's table (or its default) filled in with m's
// fields.
func (c Config) Topic(m *schema.Message) string {
	c = c.withDefaults()
	if m.Table < 0 || m.Table >= len(c.tables) {
		return topicFor(c.TopicTemplate, m)
	}
	return topicFor(c.tables[m.Table].TopicTemplate, m)
}

// ValidateTopic checks a topic name as Kafka would: 1 to 249 characters
// of letters, digits, '.', '_' and '-', neither "." nor "..".
func ValidateTopic(name string) error { return validateTopic(name) }
