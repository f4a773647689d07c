package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/schema"
)

// produceRaw writes records with these headers and value sizes to one
// partition of topic, in order, in batches of 100.
func produceRaw(t *testing.T, client *kafka.Client, topic string, partition int, headers [][]kafka.Header, valueBytes int) {
	t.Helper()
	value := strings.Repeat("v", valueBytes)
	for i := 0; i < len(headers); i += 100 {
		// A topic just created may have no leader yet: retriable errors are
		// tried again for a while, as the sink does.
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var recs []kafka.Record // fresh values each try: a try reads them to the end
			for _, hs := range headers[i:min(i+100, len(headers))] {
				recs = append(recs, kafka.Record{Value: kafka.NewBytes([]byte(value)), Headers: hs})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var res *kafka.ProduceResponse
			res, err = client.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: partition, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(recs...)})
			cancel()
			if err == nil && res.Error != nil {
				err = res.Error
			}
			if !isTemporary(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, partition, err)
		}
	}
}

// The tail reader against a real broker: it finds the last record of the
// source among other slots' and unmarked records, looking further back
// window by window, and gives up, finding nothing, once the records or
// bytes it may read are spent.
func TestKafkaTailsFindTheSourcesLastRecordWithinTheirBounds(t *testing.T) {
	brokers := testBrokers(t)
	topic := createTopic(t, brokers, 2)
	client := kafkatest.Client(strings.Join(brokers, ","))

	// Partition 0: 100 of ours (the last at 0/1000+99), then 150 of another
	// slot and 50 without headers: the tail is 250 records back.
	var log [][]kafka.Header
	for i := range 100 {
		log = append(log, marked(ours, markAt(1, uint64(0x1000+i), 0, 2)))
	}
	for i := range 150 {
		log = append(log, marked(theirs, markAt(1, uint64(0x9000+i), 0, 2)))
	}
	for range 50 {
		log = append(log, unmarked())
	}
	produceRaw(t, client, topic, 0, log, 1000)

	k := &kafkaTails{client: client}
	ctx := context.Background()
	big := tailLimits{records: 10000, bytes: 32 << 20}
	tl, scanned, err := k.readTail(ctx, topic, 0, ours, big)
	if err != nil || !tl.found || tl.mark != markAt(1, 0x1000+99, 0, 2) {
		t.Fatalf("readTail = %+v (%d scanned), %v; want ours at 0/1063", tl, scanned, err)
	}
	if scanned != 300 {
		t.Errorf("scanned %d records; want all 300 (64, then 128, then the rest)", scanned)
	}
	other, _, err := k.readTail(ctx, topic, 0, theirs, big)
	if err != nil || other.mark != markAt(1, 0x9000+149, 0, 2) {
		t.Errorf("the other slot's tail = %+v, %v", other, err)
	}

	// Bounded by records: 200 records back hold no record of ours.
	tl, scanned, err = k.readTail(ctx, topic, 0, ours, tailLimits{records: 200, bytes: 32 << 20})
	if err != nil || tl.found || scanned != 200 {
		t.Errorf("within 200 records: %+v, %d scanned, %v; want no tail after exactly 200", tl, scanned, err)
	}
	// Bounded by bytes: about 1 KB a record, 100 KB hold about 100 records.
	tl, scanned, err = k.readTail(ctx, topic, 0, ours, tailLimits{records: 10000, bytes: 100 << 10})
	if err != nil || tl.found || scanned > 130 {
		t.Errorf("within 100 KiB: %+v, %d scanned, %v; want no tail, after about 100 records", tl, scanned, err)
	}

	// An empty partition has no tail, and a position of ours that does not
	// parse is an error, not a tail.
	if tl, scanned, err := k.readTail(ctx, topic, 1, ours, big); err != nil || tl.found || scanned != 0 {
		t.Errorf("an empty partition: %+v, %d scanned, %v", tl, scanned, err)
	}
	bad := []kafka.Header{{Key: schema.HeaderWALSource, Value: []byte(ours)}, {Key: schema.HeaderWALPosition, Value: []byte("tli=1 lsn=zz")}}
	produceRaw(t, client, topic, 1, [][]kafka.Header{marked(ours, markAt(1, 5, 0, 2)), bad}, 10)
	if tl, _, err := k.readTail(ctx, topic, 1, ours, big); err == nil || tl.found {
		t.Errorf("a position that does not parse: %+v, %v; want an error", tl, err)
	}
}
