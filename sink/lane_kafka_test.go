package sink

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// On a lane, the partitions one broker leads go to it together: a steady
// load spread over twelve partitions takes about a request a linger, not
// one a partition and linger (issue 48), and every record still arrives
// once, acknowledged in publish order within its partition.
func TestKafkaLaneSendsPartitionsTogether(t *testing.T) {
	brokers := testBrokers(t)
	const partitions, messages, keys, perTick = 12, 1200, 1000, 2
	topic := createTopic(t, brokers, partitions)
	acked := &acks{}
	cfg := Config{Brokers: brokers, TopicTemplate: topic, Source: "walrelay-test", Linger: 5 * time.Millisecond}
	s, wait := runSink(t, cfg, acked.ack)

	tick := time.NewTicker(time.Millisecond) // two messages a millisecond: ten a linger, under one a partition
	defer tick.Stop()
	sent, want := publishTestMessages(t, s, messages, keys, partitions, func(i int) {
		if i%perTick == 0 {
			<-tick.C
		}
	})
	s.Close()
	if err := wait(); err != nil {
		t.Fatalf("Run = %v; want nil after Close", err)
	}

	checkAcks(t, acked.get(), sent, partitions, want)
	requests := testutil.ToFloat64(s.m.requests.WithLabelValues(topic))
	t.Logf("%d messages over %d partitions in %.0f produce requests", messages, partitions, requests)
	// A request a partition and linger would be about one a message here.
	if requests > messages/4 {
		t.Errorf("produce requests: got %.0f for %d messages; want at most %d (the partitions of a broker go together)", requests, messages, messages/4)
	}
	for p := range partitions {
		got := readPartition(t, brokers, topic, p)
		if len(got) != len(want[p]) {
			t.Fatalf("partition %d: got %d records; want %d", p, len(got), len(want[p]))
		}
		for j, r := range got {
			checkRecord(t, p, j, r, sent[want[p][j]], partitions)
		}
	}
}
