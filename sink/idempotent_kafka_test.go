package sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/walrelay/walrelay/internal/kafkawire"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
)

// wireFor is the sink's own producer for the rig's Kafka, as New makes it.
func wireFor(t *testing.T, cfg Config) *wireProducer {
	t.Helper()
	cfg = cfg.withDefaults()
	cfg.Transport = newTransport(cfg)
	w, err := newWireProducer(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func testRecords(n int, tag string) []*record {
	out := make([]*record, n)
	for i := range out {
		out[i] = &record{time: time.Now(), key: []byte("k"), value: []byte(tag), headers: []kafka.Header{{Key: headerID, Value: []byte(tag + string(rune('a'+i)))}}}
	}
	return out
}

// A batch sent again with its stamp, as after an answer lost on the way
// (a cut connection, a timeout), is answered as written and is in the log
// once: the broker knows it (KIP-98). Without idempotence it is there
// twice. kcat reads the log.
func TestKafkaDropsABatchSentAgainWithItsStamp(t *testing.T) {
	brokers := testBrokers(t)
	for _, tc := range []struct {
		name  string
		off   bool
		codec kafka.Compression
		want  int
	}{
		{"idempotent", false, 0, 3},
		{"idempotent zstd", false, kafka.Zstd, 3},
		{"not idempotent", true, 0, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := createTopic(t, brokers, 1)
			w := wireFor(t, Config{Brokers: brokers, NoIdempotence: tc.off, Compression: tc.codec})
			batch := testRecords(3, tc.name)
			att := &attempt{}
			for try := range 2 {
				var res *kafka.ProduceResponse
				var err error
				for range 50 { // a topic just created may have no leader for a moment
					if res, err = w.ProduceRecords(context.Background(), topic, 0, batch, att); err == nil && res.Error == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
					w.Refresh(context.Background(), time.Now()) //nolint:errcheck // the produce says
				}
				if err != nil || res.Error != nil {
					t.Fatalf("try %d: produce: %v, %v", try, err, res.Error)
				}
			}
			if stamped := att.stamp != kafkawire.NoStamp; stamped == tc.off || w.Idempotent() == tc.off {
				t.Fatalf("stamp %+v, idempotent %v; want idempotence %v", att.stamp, w.Idempotent(), !tc.off)
			}
			if got := len(kafkatest.Read(t, strings.Join(brokers, ","), topic)); got != tc.want {
				t.Fatalf("the log holds %d records; want %d", got, tc.want)
			}
		})
	}
}
