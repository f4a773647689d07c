package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/kafkatest"
	"github.com/walrelay/walrelay/schema"
)

// row is one outbox row as the database holds it, in the text forms
// pgoutput sends.
type Row struct {
	ID            string
	AggregateType string
	AggregateID   string
	Version       *int64
	Type          string
	Payload       string
	// Tombstone is set when the payload is NULL (Payload is then empty):
	// the record's value must be null.
	Tombstone  bool
	Headers    map[string]any
	OccurredAt time.Time
	Topic      *string
	// ContentType is the record's content-type; empty means Expect's,
	// and when that is empty application/json (a jsonb payload column's).
	ContentType string
}

func (f *Fixture) OutboxRows() []Row {
	f.t.Helper()
	rows, err := f.DB.Query(context.Background(), `SELECT message_id::text, aggregate_type, aggregate_id, aggregate_version,
		type, payload::text, headers::text, occurred_at, topic FROM `+f.Table)
	testkit.Must(f.t, err, "read outbox")
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var headers, payload *string
		testkit.Must(f.t, rows.Scan(&r.ID, &r.AggregateType, &r.AggregateID, &r.Version, &r.Type, &payload, &headers, &r.OccurredAt, &r.Topic), "scan outbox row")
		if payload == nil {
			r.Tombstone = true
		} else {
			r.Payload = *payload
		}
		if headers != nil {
			testkit.Must(f.t, json.Unmarshal([]byte(*headers), &r.Headers), "headers of %s", r.ID)
		}
		out = append(out, r)
	}
	testkit.Must(f.t, rows.Err(), "read outbox")
	return out
}

func (f *Fixture) ExpectedTopic(r Row) string {
	if r.Topic != nil {
		return *r.Topic
	}
	return f.Topic(r.AggregateType)
}

// report is what the verifier found.
type Report struct {
	Expected, Delivered int
	Lost                []string   // message ids committed and not in Kafka
	Duplicates          int        // records repeating an earlier message id
	Unexpected          []string   // records no committed row explains
	Mismatches          []string   // records that differ from their row
	OutOfOrder          []string   // aggregates whose versions are not 1, 2, 3, ...
	SplitAggregates     []string   // aggregates found in more than one partition
	Repeats             []Position // where each duplicate stands
}

func (r Report) String() string {
	return fmt.Sprintf("expected %d, delivered %d, lost %d, duplicates %d, unexpected %d, mismatched %d, out of order %d, split aggregates %d",
		r.Expected, r.Delivered, len(r.Lost), r.Duplicates, len(r.Unexpected), len(r.Mismatches), len(r.OutOfOrder), len(r.SplitAggregates))
}

// verify reads every topic the rows should be in and checks each row is
// there exactly as specified, and each aggregate's versions are in commit
// order (1, 2, 3, ... after dropping repeats of a message_id) in one
// partition.
func (f *Fixture) Verify(rows []Row) Report {
	f.t.Helper()
	return f.VerifyAs(rows, Expect{})
}

// Expect is what the verifier expects of the records besides the rows
// themselves (Verify expects nothing more).
type Expect struct {
	// Topic, when set, is the topic of every row instead of its own (a
	// replay's --to-topic).
	Topic string
	// Headers are headers every record carries besides the row's, of any
	// value (walrelay_replay on a replay's records).
	Headers []string
	// ContentType is the content-type of every record but a tombstone.
	// Defaults to application/json (a jsonb payload).
	ContentType string
}

// VerifyAs is Verify with the records expected as e says.
func (f *Fixture) VerifyAs(rows []Row, e Expect) Report {
	f.t.Helper()
	topicOf := f.ExpectedTopic
	if e.Topic != "" {
		topicOf = func(Row) string { return e.Topic }
	}
	want := map[string]Row{}
	topics := map[string]bool{}
	for _, r := range rows {
		want[r.ID] = r
		topics[topicOf(r)] = true
	}
	rep := Report{Expected: len(rows)}
	seen := map[string]bool{}
	type pos struct {
		partition int32
		offset    int64
		version   int64
	}
	byAggregate := map[string][]pos{}
	partitionOf := map[string]int32{}
	var names []string
	for tp := range topics {
		names = append(names, tp)
	}
	sort.Strings(names)
	for _, topic := range names {
		recs := f.ReadTopic(topic)
		partitionFor := f.JavaPartitioner(topic)
		sort.Slice(recs, func(i, j int) bool {
			if recs[i].Partition != recs[j].Partition {
				return recs[i].Partition < recs[j].Partition
			}
			return recs[i].Offset < recs[j].Offset
		})
		for _, rec := range recs {
			rep.Delivered++
			id := rec.Headers["ce_id"]
			r, ok := want[id]
			if !ok {
				rep.Unexpected = append(rep.Unexpected, fmt.Sprintf("%s/%d@%d ce_id=%q", topic, rec.Partition, rec.Offset, id))
				continue
			}
			if seen[id] {
				rep.Duplicates++
				rep.Repeats = append(rep.Repeats, Position{topic, rec.Partition, rec.Offset})
				continue
			}
			seen[id] = true
			if problem := checkRecord(r, rec, topic, topicOf(r), e); problem != "" {
				rep.Mismatches = append(rep.Mismatches, id+": "+problem)
			}
			if want := partitionFor(r.AggregateID); rec.Partition != want {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: partition %d; want %d, murmur2 of key %q as Java's default partitioner picks it", id, rec.Partition, want, r.AggregateID))
			}
			agg := r.AggregateType + "/" + r.AggregateID
			if p, ok := partitionOf[agg]; ok && p != rec.Partition {
				rep.SplitAggregates = append(rep.SplitAggregates, fmt.Sprintf("%s in partitions %d and %d", agg, p, rec.Partition))
			}
			partitionOf[agg] = rec.Partition
			if r.Version != nil {
				byAggregate[agg] = append(byAggregate[agg], pos{rec.Partition, rec.Offset, *r.Version})
			}
		}
	}
	for id := range want {
		if !seen[id] {
			rep.Lost = append(rep.Lost, id)
		}
	}
	for agg, ps := range byAggregate {
		for i, p := range ps {
			if p.version != int64(i+1) {
				rep.OutOfOrder = append(rep.OutOfOrder, fmt.Sprintf("%s: version %d at position %d (partition %d offset %d)", agg, p.version, i+1, p.partition, p.offset))
				break
			}
		}
	}
	return rep
}

// checkRecord compares one record with its row; "" when they agree. Of the
// row's headers, the record carries those walrelay's rule keeps
// (schema.CheckHeader); that they and all the rest read as a CloudEvent,
// ReadTopic checks with the SDK.
func checkRecord(r Row, rec kafkatest.Record, topic, wantTopic string, e Expect) string {
	extra := e.Headers
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if topic != wantTopic {
		add("topic %q; want %q", topic, wantTopic)
	}
	if rec.Key == nil || *rec.Key != r.AggregateID {
		add("key %v; want %q", deref(rec.Key), r.AggregateID)
	}
	switch {
	case r.Tombstone && rec.Payload != nil:
		add("value %v; want null (a tombstone)", deref(rec.Payload))
	case !r.Tombstone && (rec.Payload == nil || *rec.Payload != r.Payload):
		add("value %v; want %q", deref(rec.Payload), r.Payload)
	}
	wantHeaders := map[string]string{
		"ce_specversion": "1.0",
		"ce_id":          r.ID,
		"ce_type":        r.Type,
		"ce_source":      "walrelay",
		"ce_subject":     r.AggregateID,
		"content-type":   cmp.Or(r.ContentType, e.ContentType, "application/json"),
		"aggregate_type": r.AggregateType,
	}
	if r.Tombstone {
		delete(wantHeaders, "content-type")
	}
	if r.Version != nil {
		wantHeaders["aggregate_version"] = strconv.FormatInt(*r.Version, 10)
	}
	for k, v := range r.Headers {
		if s, ok := v.(string); ok && schema.CheckHeader(k, s) == "" {
			wantHeaders[k] = s
		}
	}
	for k, v := range wantHeaders {
		if got, ok := rec.Headers[k]; !ok || got != v {
			add("header %s = %q; want %q", k, got, v)
		}
	}
	ceTime, err := time.Parse(time.RFC3339Nano, rec.Headers["ce_time"])
	if err != nil || !ceTime.Equal(r.OccurredAt) {
		add("header ce_time = %q; want %s", rec.Headers["ce_time"], r.OccurredAt.UTC().Format(time.RFC3339Nano))
	}
	for _, k := range extra {
		if _, ok := rec.Headers[k]; !ok {
			add("no header %s", k)
		}
	}
	// Where the record came from in the WAL (issue 38): on a record of the
	// stream both, naming the fixture's slot, the position readable; on
	// one published from the table (recover, replay) neither.
	source, hasSource := rec.Headers[schema.HeaderWALSource]
	position, hasPosition := rec.Headers[schema.HeaderWALPosition]
	switch {
	case hasSource != hasPosition:
		add("header %s without %s, or the reverse", schema.HeaderWALSource, schema.HeaderWALPosition)
	case hasSource:
		sys, rest, _ := strings.Cut(source, "/")
		i := strings.LastIndexByte(rest, '/')
		if _, err := strconv.ParseUint(sys, 10, 64); err != nil || i <= 0 || i == len(rest)-1 {
			add("header %s = %q; want <system identifier>/<database>/<slot>", schema.HeaderWALSource, source)
		}
		if _, err := schema.ParseWALMark(position); err != nil {
			add("header %s: %v", schema.HeaderWALPosition, err)
		}
	}
	for k := range rec.Headers {
		if _, ok := wantHeaders[k]; !ok && k != "ce_time" && !slices.Contains(extra, k) &&
			k != schema.HeaderWALSource && k != schema.HeaderWALPosition {
			add("unexpected header %s", k)
		}
	}
	return strings.Join(problems, "; ")
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return strconv.Quote(*s)
}

// JavaPartitioner is the partition the Java client's default partitioner
// picks for a key on topic (murmur2 of the key, positive, modulo the
// topic's partition count), computed by kafka-go's Murmur2Balancer: an
// implementation of its own, not walrelay's.
func (f *Fixture) JavaPartitioner(topic string) func(key string) int32 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := kafkatest.PartitionCount(ctx, f.Brokers, topic)
	testkit.Must(f.t, err, "count the partitions of %s", topic)
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	var b kafka.Murmur2Balancer
	return func(key string) int32 { return int32(b.Balance(kafka.Message{Key: []byte(key)}, parts...)) }
}
