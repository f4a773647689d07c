package sink

import (
	"context"
	"fmt"
	"strings"

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
		t := newTransport()
		defer t.CloseIdleConnections()
		transport = t
	}
	brokers := strings.Join(cfg.Brokers, ",")
	res, err := transport.RoundTrip(ctx, kafka.TCP(cfg.Brokers...), &metadataAPI.Request{TopicNames: []string{}})
	if err != nil {
		return fmt.Errorf("kafka brokers %s do not answer: %w", brokers, err)
	}
	if len(res.(*metadataAPI.Response).Brokers) == 0 {
		return fmt.Errorf("kafka brokers %s answered with no brokers in the cluster", brokers)
	}
	return nil
}
