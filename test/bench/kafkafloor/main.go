//go:build bench

// Command kafkafloor is the steady-load benchmark's floor for the Kafka
// client (issue 37): a bare kafka-go Writer, asynchronous, producing
// records shaped like walrelay's (a key of 1,000 aggregate ids, the same
// payload, CloudEvents headers of the same names and sizes) at a fixed
// rate, with walrelay's batching (linger, 500 records, 512 KiB) and
// RequiredAcks all. It runs as a process of its own so that the benchmark
// can read its CPU time from /proc as it reads walrelay's.
//
//	kafkafloor -brokers B -topic T -rate R -count N -start UNIXNANO -payload FORMAT [-linger 5ms]
//
// Record n is due at start + n/rate; FORMAT has one integer verb, n. It
// exits 0 once Kafka has acknowledged all N records, printing "acked N
// requests W" (W: produce requests sent), and 1 on any failed record.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// aggregates is how many aggregate ids (keys) the records are spread over,
// as the benchmark's writer does.
const aggregates = 1000

func main() {
	brokers := flag.String("brokers", "", "Kafka brokers, comma-separated")
	topic := flag.String("topic", "", "topic to produce to")
	rate := flag.Int("rate", 0, "records per second")
	count := flag.Int("count", 0, "records in all")
	start := flag.Int64("start", 0, "when record 0 is due, Unix nanoseconds")
	format := flag.String("payload", "", "the payload, a format with one integer verb (the record's number)")
	linger := flag.Duration("linger", 5*time.Millisecond, "how long a batch waits to fill (walrelay's --kafka-linger)")
	flag.Parse()
	if *brokers == "" || *topic == "" || *rate <= 0 || *count <= 0 || *start == 0 || *format == "" {
		fmt.Fprintln(os.Stderr, "kafkafloor: -brokers, -topic, -rate, -count, -start and -payload are required")
		os.Exit(2)
	}
	p := &producer{rate: *rate, count: *count, base: time.Unix(0, *start), format: *format}
	w := &kafka.Writer{
		Addr:         kafka.TCP(strings.Split(*brokers, ",")...),
		Topic:        *topic,
		Balancer:     &kafka.Murmur2Balancer{},
		BatchTimeout: *linger,
		BatchSize:    500,
		BatchBytes:   512 << 10,
		RequiredAcks: kafka.RequireAll,
		Async:        true,
		Completion:   p.completed,
	}
	if err := p.run(w); err != nil {
		fmt.Fprintln(os.Stderr, "kafkafloor:", err)
		os.Exit(1)
	}
}

// producer writes the schedule's records and counts Kafka's answers.
type producer struct {
	rate, count int
	base        time.Time
	format      string
	acked       atomic.Int64
	failed      atomic.Int64
	firstErr    atomic.Value // error
}

// run hands each record to w at its time, closes w (which flushes and waits
// for the last batches) and checks that every record was acknowledged.
func (p *producer) run(w *kafka.Writer) error {
	ctx := context.Background()
	for n := 0; n < p.count; {
		time.Sleep(time.Until(p.due(n)))
		var due []kafka.Message
		for now := time.Now(); n < p.count && !p.due(n).After(now); n++ {
			due = append(due, p.record(n))
		}
		if err := w.WriteMessages(ctx, due...); err != nil {
			return fmt.Errorf("write records up to %d: %w", n-1, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("close the writer: %w", err)
	}
	if f := p.failed.Load(); f > 0 {
		return fmt.Errorf("%d records failed, the first with %v", f, p.firstErr.Load())
	}
	if a := p.acked.Load(); a != int64(p.count) {
		return fmt.Errorf("acked %d records; want %d", a, p.count)
	}
	fmt.Printf("acked %d requests %d\n", p.acked.Load(), w.Stats().Writes)
	return nil
}

// due is when record n is to be handed to the writer.
func (p *producer) due(n int) time.Time {
	return p.base.Add(time.Duration(int64(n) * int64(time.Second) / int64(p.rate)))
}

// completed is the writer's Completion: one call per produce request.
func (p *producer) completed(msgs []kafka.Message, err error) {
	if err != nil {
		p.failed.Add(int64(len(msgs)))
		p.firstErr.CompareAndSwap(nil, err)
		return
	}
	p.acked.Add(int64(len(msgs)))
}

// record is the n-th record: the key, payload and headers walrelay's sink
// would make of the benchmark writer's n-th row.
func (p *producer) record(n int) kafka.Message {
	agg := "agg-" + strconv.Itoa(n%aggregates)
	return kafka.Message{
		Key:   []byte(agg),
		Value: []byte(fmt.Sprintf(p.format, n)),
		Headers: []kafka.Header{
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte(fmt.Sprintf("00000000-0000-4000-8000-%012x", n))},
			{Key: "ce_type", Value: []byte("bench.tick.v1")},
			{Key: "ce_source", Value: []byte("walrelay")},
			{Key: "ce_subject", Value: []byte(agg)},
			{Key: "ce_time", Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))},
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "aggregate_type", Value: []byte("bench")},
			{Key: "aggregate_version", Value: []byte(strconv.Itoa(n/aggregates + 1))},
		},
	}
}
