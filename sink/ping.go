package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// Ping asks the brokers of cfg for cluster metadata, so that a wrong address
// or a broker that is down fails at start with a clear error rather than at
// the first message. It does not retry: ctx bounds it.
func Ping(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("sink config: %w", err)
	}
	transport := cfg.Transport
	if transport == nil {
		t := newTransport(cfg)
		defer t.CloseIdleConnections()
		transport = t
	}
	brokers := strings.Join(cfg.Brokers, ",")
	res, err := transport.RoundTrip(ctx, kafka.TCP(cfg.Brokers...), &metadataAPI.Request{TopicNames: []string{}})
	if err != nil {
		return pingError(brokers, err)
	}
	if len(res.(*metadataAPI.Response).Brokers) == 0 {
		return fmt.Errorf("kafka brokers %s answered with no brokers in the cluster", brokers)
	}
	return nil
}

// pingError says which step failed: authentication, TLS, or reaching the
// brokers. A broker that closes the connection at once usually has a
// listener with another security protocol (TLS or SASL) than the client.
func pingError(brokers string, err error) error {
	switch {
	case isAuthError(err):
		return fmt.Errorf("kafka brokers %s refused the SASL authentication: %w", brokers, err)
	case isTLSError(err):
		return fmt.Errorf("TLS handshake with kafka brokers %s failed: %w", brokers, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("kafka brokers %s closed the connection (does their listener expect the TLS and SASL settings walrelay uses?): %w", brokers, err)
	}
	return fmt.Errorf("kafka brokers %s do not answer: %w", brokers, err)
}

// TopicPartitions returns the partition count Kafka reports now for each
// of topics, or why it could not say, in the order given (for `walrelay
// topics`). It asks over one connection, creates nothing and does not
// retry: ctx bounds it.
func TopicPartitions(ctx context.Context, cfg Config, topics ...string) ([]int, []error) {
	counts, errs := make([]int, len(topics)), make([]error, len(topics))
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		for i := range errs {
			errs[i] = fmt.Errorf("sink config: %w", err)
		}
		return counts, errs
	}
	transport := cfg.Transport
	if transport == nil {
		t := newTransport(cfg)
		defer t.CloseIdleConnections()
		transport = t
	}
	meta := &kafkaMetadata{transport: transport, addr: kafka.TCP(cfg.Brokers...), timeout: cfg.WriteTimeout}
	for i, topic := range topics {
		if counts[i], errs[i] = meta.TopicPartitions(ctx, topic, false); errs[i] != nil {
			errs[i] = fmt.Errorf("partition count of topic %q: %w", topic, errs[i])
		}
	}
	return counts, errs
}
