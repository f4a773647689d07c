//go:build bench

package drain

import (
	"context"
	"fmt"

	"github.com/walrelay/walrelay/test/kafkatest"
)

// partitions is the partition count of the Kafka run's topic: more than
// one, as the e2e fixtures use, so that the sink can pipeline across
// partitions as it would in production.
const partitions = 3

// topicRecords is the number of records in topic: the sum of its
// partitions' end offsets (it was created empty and nothing compacts it).
func topicRecords(ctx context.Context, brokers, topic string) (int64, error) {
	ends, err := kafkatest.EndOffsets(ctx, brokers, topic)
	if err != nil {
		return 0, fmt.Errorf("records of %s: %w", topic, err)
	}
	var n int64
	for _, end := range ends {
		n += end
	}
	return n, nil
}
