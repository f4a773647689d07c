package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// Ping asks the brokers for cluster metadata, so that a wrong address or a
// broker that is down fails at start with a clear error rather than at the
// first message. It does not retry: ctx bounds it.
func (s *Sink) Ping(ctx context.Context) error {
	res, err := s.cfg.Transport.RoundTrip(ctx, kafka.TCP(s.cfg.Brokers...), &metadataAPI.Request{TopicNames: []string{}})
	if err != nil {
		return fmt.Errorf("kafka brokers %s do not answer: %w", strings.Join(s.cfg.Brokers, ","), err)
	}
	if len(res.(*metadataAPI.Response).Brokers) == 0 {
		return fmt.Errorf("kafka brokers %s answered with no brokers in the cluster", strings.Join(s.cfg.Brokers, ","))
	}
	return nil
}
