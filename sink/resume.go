package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/schema"
)

// The skip rule of DECISIONS 47, pure: which replayed messages a
// partition's log already holds. The reading of the log (the newest
// records of a partition, up to a bound) is the caller's.

// tail is what a partition's log says the stream last published to it:
// the WAL mark of the last record (highest offset) carrying this source.
type tail struct {
	found bool
	mark  schema.WALMark
}

// findTail returns the tail of source in records, given oldest first (a
// partition's newest records in offset order). Records of another source,
// or without walrelay_source, are passed over. A record of this source
// whose walrelay_position does not parse ends the search with no tail, so
// that nothing is skipped on a record walrelay cannot read: err says why.
func findTail(source string, records [][]kafka.Header) (tail, error) {
	for i := len(records) - 1; i >= 0; i-- {
		hs := records[i]
		if headerValue(hs, schema.HeaderWALSource) != source {
			continue
		}
		mark, err := schema.ParseWALMark(headerValue(hs, schema.HeaderWALPosition))
		if err != nil {
			return tail{}, err
		}
		return tail{found: true, mark: mark}, nil
	}
	return tail{}, nil
}

// headerValue is the value of the last header named key, or "" when none is.
func headerValue(hs []kafka.Header, key string) string {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == key {
			return string(hs[i].Value)
		}
	}
	return ""
}

// covers reports whether the log whose tail is t already holds the message
// at mark (its timeline, position and the count it is routed by now): the
// tail is at or after it, routed by the same count, and read on the same
// timeline or on an ancestor of it that ended (ended, the history of
// mark's timeline) after the message's commit, so that the WAL up to the
// message is the same on both.
func (t tail) covers(mark schema.WALMark, ended map[int32]pglogrepl.LSN) bool {
	if !t.found || t.mark.Partitions != mark.Partitions || t.mark.Pos.Less(mark.Pos) {
		return false
	}
	if t.mark.Timeline == mark.Timeline {
		return true
	}
	end, ok := ended[t.mark.Timeline]
	return ok && t.mark.Timeline < mark.Timeline && mark.Pos.CommitLSN < end
}

// resumer applies the rule to one partition's replayed messages, in WAL
// order: it skips while the tail covers them and, from the first message
// it does not cover, skips nothing more (positions only rise). ended is
// the history of the messages' timeline.
type resumer struct {
	tail  tail
	ended map[int32]pglogrepl.LSN
	done  bool
}

// skip reports whether the message at mark is already in the log.
func (r *resumer) skip(mark schema.WALMark) bool {
	if r.done {
		return false
	}
	if r.tail.covers(mark, r.ended) {
		return true
	}
	r.done = true
	return false
}

// tailReader finds a source's tail in one partition's log, looking back
// from its end at most lim records and bytes; scanned is how many records
// it read.
type tailReader interface {
	readTail(ctx context.Context, topic string, partition int, source string, lim tailLimits) (t tail, scanned int, err error)
}

// tailLimits bound how far back from a partition's end its tail is looked
// for (Config.ResumeMaxRecords, ResumeMaxBytes).
type tailLimits struct {
	records int
	bytes   int
}

// kafkaTails reads partitions' tails with Fetch requests.
type kafkaTails struct {
	client *kafka.Client
}

// tailWindow is how many records the first look back reads; each next
// look reads twice as many, further back.
const tailWindow = 64

// tailFetchBytes bounds one fetch response.
const tailFetchBytes = 4 << 20

func (k *kafkaTails) readTail(ctx context.Context, topic string, partition int, source string, lim tailLimits) (tail, int, error) {
	end, start, err := k.bounds(ctx, topic, partition)
	if err != nil {
		return tail{}, 0, err
	}
	scanned, bytes := 0, 0
	for window := tailWindow; end > start && scanned < lim.records && bytes < lim.bytes; {
		from := max(start, end-int64(min(window, lim.records-scanned)))
		records, n, err := k.read(ctx, topic, partition, from, end, lim.bytes-bytes)
		if err != nil {
			return tail{}, scanned, err
		}
		scanned, bytes = scanned+len(records), bytes+n
		t, err := findTail(source, records)
		if err != nil || t.found {
			return t, scanned, err
		}
		end = from
		// The next look reads twice as many, or as many as the bytes left
		// hold at the sizes seen so far: large records do not make one
		// look read far past the bound.
		window *= 2
		if scanned > 0 && bytes > 0 {
			window = max(1, min(window, int(int64(lim.bytes-bytes)*int64(scanned)/int64(bytes))))
		}
	}
	return tail{}, scanned, nil
}

// askWithin bounds how long a partition's end is asked again while Kafka
// answers with a retriable error (a topic just created that has no leader
// yet) in check; askRetry spaces the questions.
const (
	askWithin = 3 * time.Second
	askRetry  = 200 * time.Millisecond
)

// resumeLeaderWait bounds how long a resuming sink asks a partition's end
// again before its first produce while the partition's leader is out of
// reach or being elected: a relay that starts just after a broker died
// meets the dead leader until Kafka elects another, once the broker's
// session times out (broker.session.timeout.ms, 9s by default), and the
// transport's cached layout shows it (within 6s more). The partition
// cannot be produced to meanwhile either; past the bound, its replayed
// messages are published again (duplicates, never loss).
const resumeLeaderWait = 30 * time.Second

// askAgain runs ask, and again while it fails with an error retriable
// says a retry may clear, every askRetry until within has passed; it
// returns the last error.
func askAgain(ctx context.Context, within time.Duration, retriable func(error) bool, ask func() error) error {
	deadline := time.Now().Add(within)
	err := ask()
	for retriable(err) && time.Now().Add(askRetry).Before(deadline) {
		if backoff.Sleep(ctx, askRetry) != nil {
			return err
		}
		err = ask()
	}
	return err
}

// leaderAway reports an error that a new leader, once Kafka elects it,
// clears: a retriable Kafka error, no leader in the transport's layout, or
// a connection to the leader that failed (refused, reset, timed out).
func leaderAway(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) { // a kafka.Error is a net.Error too: the broker's word decides
		return kerr.Temporary()
	}
	return errors.Is(err, protocol.ErrNoLeader) || errors.Is(err, protocol.ErrNoPartition) ||
		err != nil && !errors.Is(err, context.Canceled) && isNetworkError(err)
}

// isTemporary reports a Kafka error that a retry may clear.
func isTemporary(err error) bool {
	var kerr kafka.Error
	return errors.As(err, &kerr) && kerr.Temporary()
}

// readable fetches at the end of a partition, reading nothing: an error
// says walrelay cannot read its tails (TopicAuthorizationFailed without
// Read on the topic).
func (k *kafkaTails) readable(ctx context.Context, topic string, partition int) error {
	end, _, err := k.bounds(ctx, topic, partition)
	if err != nil {
		return err
	}
	res, err := k.client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: partition, Offset: end,
		MinBytes: 1, MaxBytes: 1, MaxWait: 10 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return fmt.Errorf("fetch %s/%d at its end: %w", topic, partition, err)
	}
	return nil
}

// bounds is the partition's high watermark (the offset after its last
// record) and its log start offset.
func (k *kafkaTails) bounds(ctx context.Context, topic string, partition int) (end, start int64, err error) {
	res, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.LastOffsetOf(partition), kafka.FirstOffsetOf(partition)},
	}})
	if err != nil {
		return 0, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	for _, po := range res.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, po.Error)
		}
		return po.LastOffset, po.FirstOffset, nil
	}
	return 0, 0, fmt.Errorf("list offsets of %s/%d: no answer for the partition", topic, partition)
}

// read returns the headers of the records at offsets from up to end,
// oldest first, and the bytes of their keys, values and headers. With more
// than maxBytes of them it keeps the newest that fit (at least one), the
// ones a look back needs first.
func (k *kafkaTails) read(ctx context.Context, topic string, partition int, from, end int64, maxBytes int) ([][]kafka.Header, int, error) {
	var out [][]kafka.Header
	var sizes []int
	total := 0
	for next := from; next < end; {
		res, err := k.client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: partition, Offset: next,
			MinBytes: 1, MaxBytes: tailFetchBytes, MaxWait: 100 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err != nil {
			return nil, 0, fmt.Errorf("fetch %s/%d from offset %d: %w", topic, partition, next, err)
		}
		progressed := false
		for {
			r, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("read %s/%d at offset %d: %w", topic, partition, next, err)
			}
			if r.Offset < next || r.Offset >= end {
				continue // a batch starts before from, or goes on past end
			}
			n := sizeOfRecord(r)
			out, sizes, total = append(out, r.Headers), append(sizes, n), total+n
			next, progressed = r.Offset+1, true
		}
		if !progressed {
			break // nothing more below end (compacted away, or aborted)
		}
	}
	// Over the bound: drop the oldest, keeping the newest record at least.
	drop := 0
	for total > maxBytes && drop < len(out)-1 {
		total -= sizes[drop]
		drop++
	}
	return out[drop:], total, nil
}

// sizeOfRecord is the size of a record's key, value and headers.
func sizeOfRecord(r *kafka.Record) int {
	n := 0
	if r.Key != nil {
		n += r.Key.Len()
	}
	if r.Value != nil {
		n += r.Value.Len()
	}
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// resume reads p's tail, before the first produce to it, when the sink
// resumes from Kafka; a failure to read it leaves nothing skipped.
func (s *Sink) resume(ctx context.Context, p *partition) {
	o := s.origin.Load()
	if s.tails == nil || o == nil {
		return
	}
	lim := tailLimits{records: s.cfg.ResumeMaxRecords, bytes: s.cfg.ResumeMaxBytes}
	var t tail
	var scanned int
	err := askAgain(ctx, resumeLeaderWait, leaderAway, func() (err error) {
		t, scanned, err = s.tails.readTail(ctx, p.topic, p.id, o.Source, lim)
		return err
	})
	switch {
	case err != nil:
		s.log.Warn("cannot read the partition's end in Kafka: its replayed messages are published again (duplicates, never loss)",
			zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Error(err))
		return
	case !t.found:
		s.log.Info("no record of this stream among the partition's newest: its messages are published",
			zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Int("records_scanned", scanned))
		return
	}
	fields := []zap.Field{zap.String("topic", p.topic), zap.Int("partition", p.id), zap.String("tail", t.mark.String()), zap.Int("records_scanned", scanned)}
	if tl := t.mark.Timeline; tl != o.Timeline {
		end, ok := o.Ended[tl]
		if !ok || tl > o.Timeline {
			s.log.Info("the partition's end in Kafka is of a timeline not in this server's history: its replayed messages are published",
				append(fields, zap.Int32("timeline", o.Timeline))...)
			return
		}
		fields = append(fields, zap.Int32("timeline", o.Timeline), zap.Stringer("tail_timeline_ended", end))
	}
	p.res = &resumer{tail: t, ended: o.Ended}
	s.log.Info("partition's end in Kafka read: replayed messages at or before it are skipped", fields...)
}

// skipCovered acknowledges, without producing them, the records at the
// front of batch that p's log already holds, and returns the rest.
func (s *Sink) skipCovered(p *partition, batch []*record) []*record {
	if p.res == nil || p.res.done {
		return batch
	}
	n := 0
	for n < len(batch) && batch[n].marked && p.res.skip(batch[n].mark) {
		n++
	}
	if n < len(batch) {
		p.res.done = true // an unmarked record ends the skipping as well
	}
	if n == 0 {
		return batch
	}
	s.inflight.release(n, s.report(batch[:n]))
	p.skipped += n
	s.m.resumeSkipped.WithLabelValues(p.topic).Add(float64(n))
	if p.res.done {
		s.log.Info("resumed after the partition's end in Kafka",
			zap.String("topic", p.topic), zap.Int("partition", p.id), zap.Int("skipped_messages", p.skipped),
			zap.String("tail", p.res.tail.mark.String()))
	}
	return batch[n:]
}

// inDoubtReadTimeout bounds the look at a partition's end before a retry:
// while the broker is out of reach it fails, and the retry is not delayed
// by more than this.
const inDoubtReadTimeout = 2 * time.Second

// writtenAlready is how many records from the front of batch the
// partition's log holds, read before a produce of batch is retried: a
// produce that failed (a timeout, a cut connection) may have been appended
// all the same, its answer lost. The rule is the one of a start (DECISIONS
// 47): the batch is the only thing of this stream in flight to the
// partition, every record before it is acknowledged, so a tail at or after
// a record of the batch says Kafka has it. 0 when the sink does not resume
// from Kafka, the records are not marked, or the end cannot be read.
func (s *Sink) writtenAlready(ctx context.Context, p *partition, batch []*record) int {
	o := s.origin.Load()
	if s.tails == nil || o == nil || !batch[0].marked {
		return 0
	}
	rctx, cancel := context.WithTimeout(ctx, min(inDoubtReadTimeout, s.cfg.WriteTimeout))
	defer cancel()
	t, _, err := s.tails.readTail(rctx, p.topic, p.id, o.Source, tailLimits{records: s.cfg.ResumeMaxRecords, bytes: s.cfg.ResumeMaxBytes})
	if err != nil || !t.found {
		return 0
	}
	n := 0
	for n < len(batch) && batch[n].marked && t.covers(batch[n].mark, o.Ended) {
		n++
	}
	return n
}
