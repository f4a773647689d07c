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

	"github.com/walrelay/walrelay/internal/testkit/poll"
)

// consumeMaxWait is how long the broker holds a fetch that finds nothing
// new. A fetch returns as soon as one record is there (MinBytes 1), so this
// sets the cost of polling an idle partition, not the delay of a record.
const consumeMaxWait = 10 * time.Millisecond

// consumer reads every partition of a topic from the start, with a fetch
// loop on a kafka-go Conn per partition, and stamps each record of the run
// with its arrival time (since base) as it is decoded.
//
// Not kafka-go's Reader: with a 10 ms MaxWait it gives the connection a
// read deadline only 2.5 ms longer than the wait it asks of the broker, and
// on this loaded machine a late fetch response then closes the connection
// and redials with a backoff, which showed as consumer delays of hundreds
// of milliseconds that were the Reader's own. Here the broker's wait is
// explicit and the connection's deadline generous.
type consumer struct {
	base time.Time
	ids  ids

	arrived    []atomic.Int64 // since base, in ns, plus 1 (0: not yet)
	published  []atomic.Int64 // the record's timestamp, Unix ms: when walrelay's sink took the message
	count      atomic.Int64   // distinct messages of the run
	duplicates atomic.Int64
	foreign    atomic.Int64 // records of no message of this run
	reconnects atomic.Int64 // fetches that failed and reconnected: their records arrive late

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// startConsumer looks up the partitions of topic and starts reading each
// from its first offset; stop ends it.
func startConsumer(brokers, topic string, total int, base time.Time, ids ids) (*consumer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	broker := strings.Split(brokers, ",")[0]
	parts, err := kafka.DefaultDialer.LookupPartitions(ctx, "tcp", broker, topic)
	if err != nil {
		return nil, fmt.Errorf("look up the partitions of %s: %w", topic, err)
	}
	c := &consumer{base: base, ids: ids, arrived: make([]atomic.Int64, total), published: make([]atomic.Int64, total), errs: make(chan error, len(parts))}
	runCtx, stop := context.WithCancel(context.Background())
	c.cancel = stop
	for _, p := range parts {
		pr := &partitionReader{broker: broker, topic: topic, partition: p.ID, offset: kafka.FirstOffset, reconnects: &c.reconnects}
		if err := pr.connect(ctx); err != nil {
			stop()
			c.wg.Wait()
			return nil, err
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer pr.close()
			c.errs <- pr.read(runCtx, c.stamp)
		}()
	}
	return c, nil
}

// partitionReader fetches one partition on a connection to its leader; it
// reconnects where it left off when the connection fails (kafka-go's Conn
// reports io.ErrNoProgress now and then under load, as its Reader knows).
type partitionReader struct {
	broker, topic string
	partition     int
	offset        int64 // the next offset to read, or kafka.FirstOffset
	conn          *kafka.Conn
	reconnects    *atomic.Int64
}

func (p *partitionReader) connect(ctx context.Context) error {
	conn, err := kafka.DefaultDialer.DialLeader(ctx, "tcp", p.broker, p.topic, p.partition)
	if err != nil {
		return fmt.Errorf("connect to partition %d of %s: %w", p.partition, p.topic, err)
	}
	if p.offset == kafka.FirstOffset {
		_, err = conn.Seek(0, kafka.SeekStart)
	} else {
		_, err = conn.Seek(p.offset, kafka.SeekAbsolute)
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("seek partition %d of %s: %w", p.partition, p.topic, err)
	}
	p.conn = conn
	return nil
}

func (p *partitionReader) close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

// maxReconnects bounds consecutive failed fetches before the reader gives up.
const maxReconnects = 10

// read fetches until ctx is done (checked between fetches, which last at
// most consumeMaxWait when idle), handing each record to stamp with its
// arrival time.
func (p *partitionReader) read(ctx context.Context, stamp func(kafka.Message)) error {
	failures := 0
	for ctx.Err() == nil {
		p.conn.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // fails only on a closed conn, which the fetch reports
		batch := p.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 10 << 20, MaxWait: consumeMaxWait})
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			stamp(m)
			p.offset = m.Offset + 1
		}
		err := batch.Close()
		if err == nil || errors.Is(err, kafka.RequestTimedOut) {
			failures = 0
			continue
		}
		if failures++; failures > maxReconnects {
			return fmt.Errorf("fetch partition %d: %w (%d reconnects in a row failed)", p.partition, err, maxReconnects)
		}
		p.reconnects.Add(1)
		p.close()
		if err := p.connect(ctx); err != nil && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // the next fetch fails on the closed conn and retries
		}
	}
	return nil
}

// stamp records the arrival of m, now.
func (c *consumer) stamp(m kafka.Message) {
	at := time.Since(c.base)
	n, ok := c.ids.index(ceID(m))
	if !ok || n >= len(c.arrived) {
		c.foreign.Add(1)
		return
	}
	if c.arrived[n].CompareAndSwap(0, int64(at)+1) {
		c.published[n].Store(m.Time.UnixMilli())
		c.count.Add(1)
	} else {
		c.duplicates.Add(1)
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

// publishedAt is the timestamp walrelay gave message n's record (its
// sink's clock when the message was handed to it, after decoding, before
// batching), at Kafka's millisecond precision, if n arrived.
func (c *consumer) publishedAt(n int) (time.Time, bool) {
	v := c.published[n].Load()
	return time.UnixMilli(v), v != 0
}

// waitAll waits until every message of the run arrived or a reader
// failed, and gives up when none arrived for idle. Not a deadline: the
// backlog a relay behind its writer works off grows with the rate.
func (c *consumer) waitAll(idle time.Duration) error {
	var failed error
	done := func() bool {
		if c.count.Load() >= int64(len(c.arrived)) {
			return true
		}
		select {
		case err := <-c.errs:
			if err == nil {
				err = errors.New("a partition reader stopped")
			}
			failed = fmt.Errorf("the consumer failed: %w", err)
			return true
		default:
		}
		return false
	}
	for seen := c.count.Load(); !poll.Until(idle, 20*time.Millisecond, done); {
		n := c.count.Load()
		if n == seen {
			break
		}
		seen = n
	}
	switch {
	case failed != nil:
		return failed
	case c.count.Load() < int64(len(c.arrived)):
		return fmt.Errorf("committed messages missing from Kafka: %d of %d arrived, none in the last %s", c.count.Load(), len(c.arrived), idle)
	}
	return nil
}

func (c *consumer) stop() {
	c.cancel()
	c.wg.Wait()
}
