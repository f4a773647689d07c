package kafkawire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/initproducerid"
	"github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/internal/testkit/rig"
)

// rawProduce sends one encoded batch to topic's partition 0 and returns the
// partition's answer, asking again (the layout read anew) while the answer
// is a retriable error: a topic just created may not be led yet.
func rawProduce(t *testing.T, c *Cluster, topic string, batch []byte) produce.ResponsePartition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		p, err := rawProduceOnce(ctx, c, topic, batch)
		var kerr kafka.Error
		switch {
		case err == nil && !(errors.As(CodeError(p.ErrorCode, ""), &kerr) && kerr.Temporary()):
			return p
		case ctx.Err() != nil:
			t.Fatalf("produce: %v, %v", err, CodeError(p.ErrorCode, p.ErrorMessage))
		}
		time.Sleep(100 * time.Millisecond)
		c.Refresh(ctx, time.Now()) //nolint:errcheck // the next produce says
	}
}

func rawProduceOnce(ctx context.Context, c *Cluster, topic string, batch []byte) (produce.ResponsePartition, error) {
	id, err := c.Leader(ctx, topic, 0)
	if err != nil {
		return produce.ResponsePartition{}, err
	}
	conn, err := c.Conn(ctx, id)
	if err != nil {
		return produce.ResponsePartition{}, err
	}
	res, err := conn.Do(ctx, &rawproduce.Request{Acks: -1, Timeout: 10_000, Topics: []rawproduce.RequestTopic{{
		Topic: topic, Partitions: []rawproduce.RequestPartition{{Partition: 0, RecordSet: protocol.RawRecordSet{Reader: bytes.NewReader(batch)}}},
	}}})
	if err != nil {
		return produce.ResponsePartition{}, err
	}
	return res.(*produce.Response).Topics[0].Partitions[0], nil
}

// Batches encoded here, with a producer id from the broker, for every
// codec: Kafka takes them (it checks the CRC and the sequence), drops a
// batch sent again with the same sequence, refuses one past a gap, and kcat
// (librdkafka, another client) reads every record back once.
func TestKafkaTakesIdempotentBatchesOfEveryCodec(t *testing.T) {
	brokers := rig.KafkaBrokers(t)
	topic := rig.Unique("wire_")
	kafkatest.CreateTopic(t, brokers, topic, 1)
	t.Cleanup(func() { kafkatest.DeleteTopics(brokers, topic) }) //nolint:errcheck // best effort
	c, err := New(Config{Brokers: []string{brokers}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	conn, err := c.Conn(ctx, mustLeader(t, c, topic))
	if err != nil {
		t.Fatal(err)
	}
	var pid *initproducerid.Response
	for try := 0; ; try++ {
		msg, err := conn.Do(ctx, &initproducerid.Request{TransactionTimeoutMs: -1, ProducerID: -1, ProducerEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		pid = msg.(*initproducerid.Response)
		err = CodeError(pid.ErrorCode, "")
		if err == nil {
			break
		}
		// The broker may still be loading its producer-id state on a
		// fresh rig (COORDINATOR_LOAD_IN_PROGRESS): a retriable answer.
		var kerr kafka.Error
		if !errors.As(err, &kerr) || !kerr.Temporary() || try == 100 {
			t.Fatalf("InitProducerId: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	seq, offset := int32(0), int64(0)
	for _, codec := range codecs {
		recs := sampleRecords(20)
		b, err := AppendRecordSet(nil, &Batch{ProducerID: pid.ProducerID, ProducerEpoch: pid.ProducerEpoch, BaseSequence: seq, Compression: codec, Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		if p := rawProduce(t, c, topic, b); p.ErrorCode != 0 || p.BaseOffset != offset {
			t.Fatalf("%s: produce answered %v (%+v) at offset %d; want no error at %d", codec, CodeError(p.ErrorCode, p.ErrorMessage), p.RecordErrors, p.BaseOffset, offset)
		}
		// The same batch again, as a retry of an answer lost: the broker
		// knows it, answers with where it is, and writes nothing.
		p := rawProduce(t, c, topic, b)
		if err := CodeError(p.ErrorCode, ""); err != nil && !errors.Is(err, kafka.DuplicateSequenceNumber) || p.BaseOffset != offset && err == nil {
			t.Fatalf("%s: the same batch again answered %v at offset %d; want a duplicate of offset %d", codec, err, p.BaseOffset, offset)
		}
		seq, offset = seq+int32(len(recs)), offset+int64(len(recs))
	}
	gap, err := AppendRecordSet(nil, &Batch{ProducerID: pid.ProducerID, ProducerEpoch: pid.ProducerEpoch, BaseSequence: seq + 5, Records: sampleRecords(2)})
	if err != nil {
		t.Fatal(err)
	}
	if p := rawProduce(t, c, topic, gap); !errors.Is(CodeError(p.ErrorCode, ""), kafka.OutOfOrderSequenceNumber) {
		t.Fatalf("a batch past a gap in the sequence: got %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", CodeError(p.ErrorCode, p.ErrorMessage))
	}
	got := kafkatest.Read(t, brokers, topic)
	if len(got) != len(codecs)*20 {
		t.Fatalf("kcat read %d records; want %d (each batch once)", len(got), len(codecs)*20)
	}
	want := sampleRecords(20)
	for i, r := range got {
		w := want[i%20]
		if r.Offset != int64(i) || fmt.Sprint(deref(r.Key)) != string(w.Key) || (r.Key == nil) != (w.Key == nil) ||
			deref(r.Payload) != string(w.Value) || (r.Payload == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d (%s): got %+v; want key %q value %q headers %d", i, codecs[i/20], r, w.Key, w.Value, len(w.Headers))
		}
		for _, h := range w.Headers {
			if r.Headers[h.Key] != string(h.Value) {
				t.Fatalf("record %d header %s: got %q; want %q", i, h.Key, r.Headers[h.Key], h.Value)
			}
		}
	}
}

func mustLeader(t *testing.T, c *Cluster, topic string) int32 {
	t.Helper()
	var id int32
	var err error
	for range 50 { // a topic just created may have no leader for a moment
		if id, err = c.Leader(context.Background(), topic, 0); err == nil {
			return id
		}
		time.Sleep(100 * time.Millisecond)
		c.Refresh(context.Background(), time.Now()) //nolint:errcheck // Leader says
	}
	t.Fatalf("leader of %s/0: %v", topic, err)
	return -1
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
