//go:build bench

package latency

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
)

// probeInterval spaces the probe's produce requests: a light load (50
// requests a second) beside walrelay's.
const probeInterval = 20 * time.Millisecond

// probe measures Kafka's acknowledgement time alone while the benchmark
// runs: one small record per request, RequiredAcks all, to a topic of its
// own, timed from the request to its answer. Beside the consumer's split
// at walrelay's record timestamp it tells the broker's share of the time
// after the sink from the batch wait's.
type probe struct {
	mu   sync.Mutex
	rtts []time.Duration
	errs int
	stop context.CancelFunc
	done chan struct{}
}

func startProbe(brokers, topic string) *probe {
	ctx, stop := context.WithCancel(context.Background())
	p := &probe{stop: stop, done: make(chan struct{})}
	client := kafkatest.Client(brokers)
	client.Timeout = 10 * time.Second
	go func() {
		defer close(p.done)
		tick := time.NewTicker(probeInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			res, err := client.Produce(ctx, &kafka.ProduceRequest{
				Topic: topic, Partition: 0, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("probe"))}),
			})
			rtt := time.Since(start)
			p.mu.Lock()
			if err != nil || res.Error != nil {
				p.errs++
			} else {
				p.rtts = append(p.rtts, rtt)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// take returns the round trips measured so far, sorted, and starts anew:
// called at the start of the window it drops the warm-up.
func (p *probe) take() (rtts []time.Duration, errs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rtts, errs = p.rtts, p.errs
	p.rtts, p.errs = nil, 0
	slices.Sort(rtts)
	return rtts, errs
}

func (p *probe) end() {
	p.stop()
	<-p.done
}
