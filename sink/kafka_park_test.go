package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/schema"
)

// parkTestMessage is kafkaTestMessage i on aggregate key, at WAL position i.
func parkTestMessage(i int, key string) *schema.Message {
	m := kafkaTestMessage(i, 1)
	m.AggregateID = key
	m.CommitLSN = pglogrepl.LSN(0x1000 + i)
	m.CommitTime = time.Now()
	return m
}

// A topic with max.message.bytes=1024: a 2 KB payload, well under the
// sink's limit, is refused by Kafka and parked; the later message of its
// aggregate is parked behind it; another aggregate's messages, in the same
// partition, are delivered in order (batches of several records over 1 KB
// are refused as a whole and isolated record by record).
func TestKafkaRecordTooLargeForTopicIsParked(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 1, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: "1024"})
	pl := &parkLog{}
	acked := &acks{}
	s, wait := runSink(t, Config{Brokers: brokers, TopicTemplate: topic, Source: "walrelay-test", Park: pl.park}, acked.ack)

	big := parkTestMessage(2, "a")
	big.Payload = []byte(`"` + strings.Repeat("x", 2048) + `"`)
	ms := []*schema.Message{parkTestMessage(0, "a"), parkTestMessage(1, "b"), big, parkTestMessage(3, "b"),
		parkTestMessage(4, "a"), parkTestMessage(5, "b")}
	for i, m := range ms {
		if err := s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
	}
	s.Close()
	if err := wait(); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}

	if got := acked.get(); fmt.Sprint(got) != "[0 1 2 3 4 5]" {
		t.Errorf("acks = %v; want [0 1 2 3 4 5]", got)
	}
	dls := pl.get()
	if len(dls) != 2 {
		t.Fatalf("parked %d messages; want 2", len(dls))
	}
	checkDeadLetter(t, dls[0], big, topic, nil)
	if !strings.Contains(dls[0].Reason, "[10] Message Size Too Large") {
		t.Errorf("reason = %q; want Kafka's MESSAGE_TOO_LARGE", dls[0].Reason)
	}
	checkDeadLetter(t, dls[1], ms[4], topic, big)
	var got []string
	for _, r := range readPartition(t, brokers, topic, 0) {
		got = append(got, r.Headers[headerID])
	}
	want := []string{ms[0].ID.String(), ms[1].ID.String(), ms[3].ID.String(), ms[5].ID.String()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("partition 0 holds %v; want %v", got, want)
	}
}

// With topic creation off, a message for a topic that does not exist is
// parked (and the later one of its aggregate behind it), and the broker,
// which allows auto-creation, still has no such topic.
func TestKafkaMissingTopicWithCreationOffIsParked(t *testing.T) {
	brokers := testBrokers(t)
	topic := rig.Unique("walrelay-sink-ghost-")
	pl := &parkLog{}
	acked := &acks{}
	s, wait := runSink(t, Config{Brokers: brokers, TopicTemplate: topic, NoCreateTopics: true, Park: pl.park}, acked.ack)
	s.createWait = 3 * time.Second // past the transport's first metadata load; the topic never existed
	ms := []*schema.Message{parkTestMessage(0, "a"), parkTestMessage(1, "a")}
	for i, m := range ms {
		if err := s.Publish(context.Background(), m, uint64(i)); err != nil {
			t.Fatalf("Publish(%d) = %v", i, err)
		}
		if got := len(acked.get()); got != i+1 {
			t.Errorf("acks after Publish(%d) = %d; want %d (parked at once)", i, got, i+1)
		}
	}
	s.Close()
	if err := wait(); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	dls := pl.get()
	if len(dls) != 2 {
		t.Fatalf("parked %d messages; want 2", len(dls))
	}
	checkDeadLetter(t, dls[0], ms[0], topic, nil)
	if !strings.Contains(dls[0].Reason, "does not exist and topic creation is off") {
		t.Errorf("reason = %q; want the topic missing", dls[0].Reason)
	}
	checkDeadLetter(t, dls[1], ms[1], topic, ms[0])

	if kafkatest.TopicExists(t, strings.Join(brokers, ","), topic) {
		t.Errorf("topic %s on the broker: got it; want it absent", topic)
		if err := kafkatest.DeleteTopics(strings.Join(brokers, ","), topic); err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
		}
	}
}
