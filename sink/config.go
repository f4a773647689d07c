package sink

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
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
	// Linger is how long a partition batch waits to fill once its first
	// message is queued. A full batch goes at once. Defaults to 5ms.
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
	// through when nothing else is in flight. Defaults to 64 MiB.
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
	// Transport carries the requests (TLS and SASL go here). Defaults to a
	// kafka.Transport with a 5s dial timeout.
	Transport kafka.RoundTripper
}

const (
	defaultTopicTemplate       = "outbox.{aggregate_type}"
	defaultSource              = "walrelay"
	defaultLinger              = 5 * time.Millisecond
	defaultBatchMaxMessages    = 500
	defaultBatchMaxBytes       = 512 << 10
	defaultMaxInFlightMessages = 10000
	defaultMaxInFlightBytes    = 64 << 20
	defaultWriteTimeout        = 10 * time.Second
	defaultRetryBackoffMin     = 100 * time.Millisecond
	defaultRetryBackoffMax     = 10 * time.Second
)

// withDefaults returns c with every unset optional field set to its default.
func (c Config) withDefaults() Config {
	setString(&c.TopicTemplate, defaultTopicTemplate)
	setString(&c.Source, defaultSource)
	setDuration(&c.Linger, defaultLinger)
	setInt(&c.BatchMaxMessages, defaultBatchMaxMessages)
	setInt(&c.BatchMaxBytes, defaultBatchMaxBytes)
	setInt(&c.MaxInFlightMessages, defaultMaxInFlightMessages)
	setInt(&c.MaxInFlightBytes, defaultMaxInFlightBytes)
	setDuration(&c.WriteTimeout, defaultWriteTimeout)
	setDuration(&c.RetryBackoffMin, defaultRetryBackoffMin)
	setDuration(&c.RetryBackoffMax, defaultRetryBackoffMax)
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
	if !strings.Contains(c.TopicTemplate, "{") {
		if err := validateTopic(c.TopicTemplate); err != nil {
			errs = append(errs, fmt.Errorf("topic template: %w", err))
		}
	}
	errs = append(errs, notNegative("Linger", int64(c.Linger)), notNegative("BatchMaxMessages", int64(c.BatchMaxMessages)),
		notNegative("BatchMaxBytes", int64(c.BatchMaxBytes)), notNegative("MaxInFlightMessages", int64(c.MaxInFlightMessages)),
		notNegative("MaxInFlightBytes", int64(c.MaxInFlightBytes)), notNegative("WriteTimeout", int64(c.WriteTimeout)),
		notNegative("RetryBackoffMin", int64(c.RetryBackoffMin)), notNegative("RetryBackoffMax", int64(c.RetryBackoffMax)))
	if c.RetryBackoffMax < c.RetryBackoffMin {
		errs = append(errs, fmt.Errorf("RetryBackoffMax %v is below RetryBackoffMin %v", c.RetryBackoffMax, c.RetryBackoffMin))
	}
	if c.MaxInFlightMessages < c.BatchMaxMessages {
		errs = append(errs, fmt.Errorf("MaxInFlightMessages %d is below BatchMaxMessages %d", c.MaxInFlightMessages, c.BatchMaxMessages))
	}
	return errors.Join(errs...)
}

func notNegative(name string, v int64) error {
	if v < 0 {
		return fmt.Errorf("%s must not be negative, got %d", name, v)
	}
	return nil
}
