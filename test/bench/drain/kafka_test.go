//go:build bench

package drain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
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

// runToKafka runs bin (walrelay) on slot to a topic of its own, named after
// name, with parts partitions, created empty beforehand (a drained backlog
// can be gigabytes; the topic goes in t.Cleanup), and checks that the topic
// then holds a record for every row: duplicates are logged, a missing one
// fails the test. It returns the run's figures and the records counted.
func runToKafka(ctx context.Context, t *testing.T, b *backlog, bin, slot, name string, parts int, within time.Duration) (measure, int64) {
	t.Helper()
	topic := name + ".bench"
	kafkatest.CreateTopic(t, b.brokers, topic, parts)
	m := runWalrelay(ctx, t, b, bin, slot, name+".{aggregate_type}", within)
	n, err := topicRecords(ctx, b.brokers, topic)
	testkit.Must(t, err, "count the records of %s", topic)
	switch rows := b.rows; {
	case n < rows:
		t.Errorf("topic %s holds %d records; want %d (messages are missing)", topic, n, rows)
	case n > rows:
		t.Logf("topic %s holds %d records for %d rows: %d duplicates", topic, n, rows, n-rows)
	}
	return m, n
}
