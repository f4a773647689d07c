package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/walrelay/walrelay/schema"
)

// Config configures a Sink. The zero value of every optional field means its
// default.
type Config struct {
	// Brokers are the bootstrap addresses, host:port. Required.
	Brokers []string
	// TopicTemplate names the topic of a message: "{aggregate_type}" and
	// "{type}" are replaced by the message's fields. A message's own Topic
	// wins when non-empty. Defaults to "outbox.{aggregate_type}".
	TopicTemplate string
	// Source is the ce_source header. Defaults to "walrelay".
	Source string
	// MessageIDHeader, when set, names a header that carries the message
	// id beside ce_id, for consumers that read it there (Debezium's Outbox
	// Event Router puts its event id into a header named id). An entry of
	// the headers column of that name, in any case, is then dropped as
	// one walrelay sets itself (schema.CheckHeader). It must be a name
	// CheckHeader lets through, and not traceparent or tracestate.
	// Defaults to "": none.
	MessageIDHeader string
	// Tables are the settings of each outbox table of a sink that
	// publishes several (schema.Message.Table indexes them); a field left
	// empty takes the one above. Defaults to none: every message goes by
	// the fields above, and only table 0 is known.
	Tables []TableConfig
	// tables are Tables with their empty fields filled (at least one):
	// what the sink routes by, made anew by every withDefaults, so that a
	// field changed after Defaults() is seen.
	tables []TableConfig
	// Linger is how long a partition batch waits to fill once its first
	// message is queued. A full batch goes at once. Defaults to 5ms. A
	// message already late when it is published (a backlog draining)
	// lingers longer: a tenth of its lateness, up to ten times Linger
	// (DECISIONS.md 38).
	Linger time.Duration
	// BatchMaxMessages caps the records of one produce request. Defaults to 500.
	BatchMaxMessages int
	// BatchMaxBytes caps the estimated encoded size of one produce request.
	// Defaults to 512 KiB, below the broker's default 1 MB message.max.bytes.
	// A single larger record still goes, alone.
	BatchMaxBytes int
	// MaxInFlightMessages bounds messages published but not yet acknowledged;
	// Publish blocks beyond it. Defaults to 10000.
	MaxInFlightMessages int
	// MaxInFlightBytes bounds the schema.Message.Size of the messages in
	// flight; Publish blocks beyond it, except that one message is always let
	// through when nothing else is in flight. Defaults to 16 MiB.
	MaxInFlightBytes int
	// WriteTimeout bounds one produce or metadata request. The broker is
	// asked to wait at most half of it for the in-sync replicas. Defaults to 10s.
	WriteTimeout time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff with
	// full jitter between retries of a transient failure. Default to 100ms
	// and 10s.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Metrics receive the sink's figures. Defaults to private ones.
	Metrics *Metrics
	// Guard, when set, is called before every produce request; an error
	// stops the sink before it writes (Run returns the error, nothing more
	// is acknowledged). walrelay passes the leader lease check, so that a
	// process that lost leadership publishes nothing more.
	Guard func() error
	// Transport carries the requests. Defaults to a kafka.Transport that
	// gives a connection 5s to open (TCP and the TLS handshake) and uses TLS
	// and SASL below.
	Transport kafka.RoundTripper
	// TLS, when set, makes the sink's own transport speak TLS with this
	// configuration to every broker; an empty ServerName is set to each
	// broker's host. The configuration must not change once in use.
	// Defaults to nil: plain TCP. Ignored when Transport is set.
	TLS *tls.Config
	// SASL, when set, authenticates every connection of the sink's own
	// transport with this mechanism (kafka-go's sasl/plain or sasl/scram).
	// Defaults to nil: no authentication. Ignored when Transport is set.
	SASL sasl.Mechanism

	// MaxPayloadBytes is the largest payload the sink hands to Kafka; a
	// larger one is a bad message, found before any produce request.
	// Defaults to 900 KiB (921600), below the broker's default 1 MB
	// message.max.bytes with room for the key and headers.
	MaxPayloadBytes int
	// NoCreateTopics stops the sink from asking the broker to create a
	// missing topic (metadata requests then never allow auto-creation): a
	// topic still absent from the metadata after 10s is missing for good,
	// and its messages cannot be published. Defaults to false: a missing
	// topic is created if the broker allows it (auto.create.topics.enable).
	NoCreateTopics bool
	// Park, when set (the "park" policy), takes each message that cannot be
	// published for good instead of failing the sink: a record Kafka refused
	// for good, a payload over MaxPayloadBytes, a message without an
	// aggregate id, a topic missing or refused, a row that is not a message
	// (PublishBad), and every later message of an aggregate with a parked
	// message (dl.BlockedBy set). Park stores dl
	// durably; only after it returned parked=true and nil is the message
	// acknowledged (AckFunc). parked=false is allowed for a blocked message
	// only: the aggregate was unblocked meanwhile, and the sink publishes the
	// message after all, in order. An error is retried with the backoff
	// below, for as long as it takes, while the message's partition waits.
	// Park is called from the partition goroutines (one call at a time per
	// partition, several partitions at once: it must be safe for concurrent
	// use) and from Publish and PublishBad. The Guard is checked before each
	// call. Defaults to nil (the "halt" policy): these cases
	// fail the sink with an *Error.
	Park func(ctx context.Context, dl schema.DeadLetter) (parked bool, err error)
	// Blocked are the aggregates blocked when the sink starts, from the
	// dead-letter table: a message of such an aggregate positioned after
	// its blocker is parked behind it. Blockers without an aggregate id are
	// ignored: they block nothing. Defaults to none.
	Blocked []schema.Blocker
	// Layouts records, across restarts, the partition count each topic's
	// keys are routed by; a topic whose count in Kafka differs from the
	// recorded one gets nothing more published until they agree again.
	// Defaults to nil: recorded in memory, for the sink's life.
	Layouts Layouts
	// PartitionRecheck is how often the partition counts of the topics in
	// use are read again from Kafka (and at once after a produce error
	// that says the cluster's layout moved). Defaults to 15s.
	PartitionRecheck time.Duration
	// ResumeFromKafka skips a message the sink was told the origin of
	// (Start) when its partition's log already holds it: each partition's
	// newest records are read once, before the first produce to it, and a
	// message at or before the last record of the same stream, timeline and
	// partition count is acknowledged without producing it (DECISIONS 47).
	ResumeFromKafka bool
	// ResumeMaxRecords bounds how many records back from a partition's end
	// the tail is looked for; past it the partition's messages are
	// published (duplicates, never loss). Defaults to 10,000.
	ResumeMaxRecords int
	// ResumeMaxBytes bounds the bytes (keys, values and headers) read back
	// from a partition's end, as ResumeMaxRecords does the records: with
	// large records, the count alone could read gigabytes before the first
	// produce. Defaults to 32 MiB.
	ResumeMaxBytes int
	// NoIdempotence turns Kafka's idempotent producer off. With it on (the
	// default, when the sink makes its own transport), the sink asks the
	// brokers for a producer id and stamps every batch with it and a
	// sequence number per partition (KIP-98), so that a broker drops a
	// batch sent again after its answer was lost; brokers that refuse it
	// turn it off, with a warning. Ignored with a Transport of another
	// kind than *kafka.Transport.
	NoIdempotence bool
	// Compression is the codec of the record batches: kafka.Gzip, Snappy,
	// Lz4 or Zstd. Defaults to none.
	Compression kafka.Compression
}

const (
	defaultTopicTemplate       = "outbox.{aggregate_type}"
	defaultSource              = "walrelay"
	defaultLinger              = 5 * time.Millisecond
	defaultBatchMaxMessages    = 500
	defaultBatchMaxBytes       = 512 << 10
	defaultMaxInFlightMessages = 10000
	defaultMaxInFlightBytes    = 16 << 20
	defaultWriteTimeout        = 10 * time.Second
	defaultRetryBackoffMin     = 100 * time.Millisecond
	defaultRetryBackoffMax     = 10 * time.Second
	defaultMaxPayloadBytes     = 900 << 10
	defaultPartitionRecheck    = 15 * time.Second
	defaultResumeMaxRecords    = 10000
	defaultResumeMaxBytes      = 32 << 20
)

// withDefaults returns c with every unset optional field set to its default.
func (c Config) withDefaults() Config {
	setString(&c.TopicTemplate, defaultTopicTemplate)
	setString(&c.Source, defaultSource)
	c.tables = make([]TableConfig, max(1, len(c.Tables)))
	copy(c.tables, c.Tables)
	for i := range c.tables {
		setString(&c.tables[i].TopicTemplate, c.TopicTemplate)
		setString(&c.tables[i].Source, c.Source)
		setString(&c.tables[i].MessageIDHeader, c.MessageIDHeader)
	}
	setDuration(&c.Linger, defaultLinger)
	setInt(&c.BatchMaxMessages, defaultBatchMaxMessages)
	setInt(&c.BatchMaxBytes, defaultBatchMaxBytes)
	setInt(&c.MaxInFlightMessages, defaultMaxInFlightMessages)
	setInt(&c.MaxInFlightBytes, defaultMaxInFlightBytes)
	setDuration(&c.WriteTimeout, defaultWriteTimeout)
	setDuration(&c.RetryBackoffMin, defaultRetryBackoffMin)
	setDuration(&c.RetryBackoffMax, defaultRetryBackoffMax)
	setInt(&c.MaxPayloadBytes, defaultMaxPayloadBytes)
	setDuration(&c.PartitionRecheck, defaultPartitionRecheck)
	setInt(&c.ResumeMaxRecords, defaultResumeMaxRecords)
	setInt(&c.ResumeMaxBytes, defaultResumeMaxBytes)
	return c
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setDuration(p *time.Duration, def time.Duration) {
	if *p == 0 {
		*p = def
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

// validate checks a Config that has its defaults applied.
func (c Config) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			errs = append(errs, fmt.Errorf("broker %q: %w", b, err))
		}
	}
	for i, t := range c.tables {
		what := "topic template"
		if len(c.tables) > 1 {
			what = fmt.Sprintf("table %d: topic template", i)
		}
		if !strings.Contains(t.TopicTemplate, "{") {
			if err := validateTopic(t.TopicTemplate); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		}
		if err := ValidateMessageIDHeader(t.MessageIDHeader); err != nil && t.MessageIDHeader != c.MessageIDHeader {
			errs = append(errs, fmt.Errorf("table %d: %w", i, err))
		}
	}
	errs = append(errs, notNegative("Linger", int64(c.Linger)), notNegative("BatchMaxMessages", int64(c.BatchMaxMessages)),
		notNegative("BatchMaxBytes", int64(c.BatchMaxBytes)), notNegative("MaxInFlightMessages", int64(c.MaxInFlightMessages)),
		notNegative("MaxInFlightBytes", int64(c.MaxInFlightBytes)), notNegative("WriteTimeout", int64(c.WriteTimeout)),
		notNegative("RetryBackoffMin", int64(c.RetryBackoffMin)), notNegative("RetryBackoffMax", int64(c.RetryBackoffMax)),
		notNegative("MaxPayloadBytes", int64(c.MaxPayloadBytes)), notNegative("PartitionRecheck", int64(c.PartitionRecheck)),
		notNegative("ResumeMaxRecords", int64(c.ResumeMaxRecords)), notNegative("ResumeMaxBytes", int64(c.ResumeMaxBytes)))
	if err := ValidateMessageIDHeader(c.MessageIDHeader); err != nil {
		errs = append(errs, err)
	}
	if c.RetryBackoffMax < c.RetryBackoffMin {
		errs = append(errs, fmt.Errorf("RetryBackoffMax %v is below RetryBackoffMin %v", c.RetryBackoffMax, c.RetryBackoffMin))
	}
	if c.MaxInFlightMessages < c.BatchMaxMessages {
		errs = append(errs, fmt.Errorf("MaxInFlightMessages %d is below BatchMaxMessages %d", c.MaxInFlightMessages, c.BatchMaxMessages))
	}
	return errors.Join(errs...)
}

// TableConfig is one outbox table's own settings in a sink of several.
type TableConfig struct {
	// TopicTemplate, Source and MessageIDHeader are as Config's, for the
	// table's messages.
	TopicTemplate, Source, MessageIDHeader string
}

// maxHeaderName bounds MessageIDHeader: a header name, not a document.
const maxHeaderName = 249

// ValidateMessageIDHeader checks Config.MessageIDHeader, the name of the
// header that carries the message id: empty (none), or 1 to 249 printable
// ASCII characters without spaces that schema.CheckHeader would not drop
// and that is no trace header. The error names the setting.
func ValidateMessageIDHeader(name string) error {
	if err := validateMessageIDHeader(name); err != nil {
		return fmt.Errorf("%s: %w", SettingMessageIDHeader, err)
	}
	return nil
}

func validateMessageIDHeader(name string) error {
	if name == "" {
		return nil
	}
	if len(name) > maxHeaderName {
		return fmt.Errorf("header name is longer than %d characters", maxHeaderName)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("header name %q: only printable ASCII without spaces is allowed", name)
		}
	}
	if d := schema.CheckHeader(name, ""); d != "" {
		return fmt.Errorf("header name %q: %s", name, d.Explain())
	}
	if strings.EqualFold(name, schema.HeaderTraceparent) || strings.EqualFold(name, schema.HeaderTracestate) {
		return fmt.Errorf("header name %q is a W3C trace header", name)
	}
	return nil
}

func notNegative(name string, v int64) error {
	if v < 0 {
		return fmt.Errorf("%s must not be negative, got %d", name, v)
	}
	return nil
}

// Defaults is the Config with every optional field at its default.
func Defaults() Config { return Config{}.withDefaults() }
