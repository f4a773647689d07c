//go:build bench

package latency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// consumeMaxWait bounds a fetch that finds nothing new. A fetch returns as
// soon as one record is there (MinBytes 1), so this sets the cost of
// polling an idle partition, not the delay of a record.
const consumeMaxWait = 10 * time.Millisecond

// consumer reads every partition of a topic from the start, one kafka-go
// partition reader each, and stamps each record of the run with its
// arrival time (since base) when the reader hands it over.
type consumer struct {
	base time.Time
	ids  ids

	arrived    []atomic.Int64 // since base, in ns, plus 1 (0: not yet)
	count      atomic.Int64   // distinct messages of the run
	duplicates atomic.Int64
	foreign    atomic.Int64 // records of no message of this run

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startConsumer starts reading topic; stop ends it.
func startConsumer(brokers, topic string, total int, base time.Time, ids ids) (*consumer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parts, err := kafka.DefaultDialer.LookupPartitions(ctx, "tcp", strings.Split(brokers, ",")[0], topic)
	if err != nil {
		return nil, fmt.Errorf("look up the partitions of %s: %w", topic, err)
	}
	c := &consumer{base: base, ids: ids, arrived: make([]atomic.Int64, total), errs: make(chan error, len(parts))}
	ctx, c.cancel = context.WithCancel(context.Background())
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   strings.Split(brokers, ","),
			Topic:     topic,
			Partition: p.ID,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   consumeMaxWait,
		})
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer r.Close()
			c.errs <- c.read(ctx, r)
		}()
	}
	return c, nil
}

func (c *consumer) read(ctx context.Context, r *kafka.Reader) error {
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read partition %d: %w", r.Config().Partition, err)
		}
		at := time.Since(c.base)
		n, ok := c.ids.index(ceID(m))
		if !ok || n >= len(c.arrived) {
			c.foreign.Add(1)
			continue
		}
		if c.arrived[n].CompareAndSwap(0, int64(at)+1) {
			c.count.Add(1)
		} else {
			c.duplicates.Add(1)
		}
	}
}

func ceID(m kafka.Message) string {
	for _, h := range m.Headers {
		if h.Key == "ce_id" {
			return string(h.Value)
		}
	}
	return ""
}

// arrival is when message n arrived, since base, if it did.
func (c *consumer) arrival(n int) (time.Duration, bool) {
	v := c.arrived[n].Load()
	return time.Duration(v - 1), v != 0
}

// waitAll waits until every message of the run arrived, a reader failed,
// or within passed.
func (c *consumer) waitAll(within time.Duration) error {
	deadline := time.Now().Add(within)
	for c.count.Load() < int64(len(c.arrived)) {
		select {
		case err := <-c.errs:
			if err != nil {
				return err
			}
			return errors.New("a partition reader stopped")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages arrived within %s", c.count.Load(), len(c.arrived), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (c *consumer) stop() {
	c.cancel()
	c.wg.Wait()
}
