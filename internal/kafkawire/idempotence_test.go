package kafkawire

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

var tpA, tpB = TopicPartition{"orders", 0}, TopicPartition{"orders", 1}

// A transcript: each step is an event and what the bookkeeping says.
func TestIdempotenceTranscript(t *testing.T) {
	var s Idempotence
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	need := func() {
		r, ok := s.Need()
		say("need %v %+v", ok, r)
	}
	stamp := func(tp TopicPartition, n int) Stamp {
		st := s.Stamp(tp, n)
		say("stamp %s/%d %d records: %+v", tp.Topic, tp.Partition, n, st)
		return st
	}
	answer := func(tp TopicPartition, st Stamp, n int, err error) {
		say("answer %v: %v", err, []string{"written", "restamp", "other"}[s.Answer(tp, st, n, err)])
	}

	need()
	stamp(tpA, 3) // before a grant: not idempotent yet
	s.Granted(1000, 0)
	need()
	a1 := stamp(tpA, 3)
	b1 := stamp(tpB, 2)
	a2 := stamp(tpA, 1)
	answer(tpA, a1, 3, nil)
	answer(tpB, b1, 2, kafka.DuplicateSequenceNumber)
	answer(tpA, a2, 1, kafka.NotLeaderForPartition) // the caller retries with the same stamp
	answer(tpA, a2, 1, nil)
	a3 := stamp(tpA, 5)
	answer(tpA, a3, 5, kafka.MessageSizeTooLarge)
	s.Refused(a3) // parked: the epoch is bumped, no sequence is taken back
	need()
	s.Granted(1000, 1)
	a4 := stamp(tpA, 4)
	answer(tpA, a4, 4, kafka.OutOfOrderSequenceNumber)
	need()
	answer(tpB, stamp(tpB, 1), 1, kafka.NotLeaderForPartition) // no grant while the bump is asked for
	answer(tpA, a4, 4, kafka.UnknownProducerId)                // the same epoch's other answers change nothing more
	s.Granted(1000, 2)
	stamp(tpA, 4)
	stamp(tpB, 1)
	answer(tpB, b1, 2, kafka.NotLeaderForPartition) // an answer to a stamp of an old epoch
	s.Refused(a3)                                   // a refusal of an old epoch's batch bumps nothing
	need()

	want := `need true {ProducerID:-1 Epoch:-1}
stamp orders/0 3 records: {ProducerID:-1 Epoch:-1 Sequence:-1}
need false {ProducerID:0 Epoch:0}
stamp orders/0 3 records: {ProducerID:1000 Epoch:0 Sequence:0}
stamp orders/1 2 records: {ProducerID:1000 Epoch:0 Sequence:0}
stamp orders/0 1 records: {ProducerID:1000 Epoch:0 Sequence:3}
answer <nil>: written
answer [46] Duplicate Sequence Number: the broker received a duplicate sequence number: written
answer [6] Not Leader For Partition: the client attempted to send messages to a replica that is not the leader for some partition, the client's metadata are likely out of date: other
answer <nil>: written
stamp orders/0 5 records: {ProducerID:1000 Epoch:0 Sequence:4}
answer [10] Message Size Too Large: the server has a configurable maximum message size to avoid unbounded memory allocation and the client attempted to produce a message larger than this maximum: other
need true {ProducerID:1000 Epoch:0}
stamp orders/0 4 records: {ProducerID:1000 Epoch:1 Sequence:0}
answer [45] Out Of Order Sequence Number: the broker received an out of order sequence number: restamp
need true {ProducerID:1000 Epoch:1}
stamp orders/1 1 records: {ProducerID:-1 Epoch:-1 Sequence:-1}
answer [6] Not Leader For Partition: the client attempted to send messages to a replica that is not the leader for some partition, the client's metadata are likely out of date: other
answer [59] Unknown Producer ID: the broker could not locate the producer metadata associated with the producer ID: restamp
stamp orders/0 4 records: {ProducerID:1000 Epoch:2 Sequence:0}
stamp orders/1 1 records: {ProducerID:1000 Epoch:2 Sequence:0}
answer [6] Not Leader For Partition: the client attempted to send messages to a replica that is not the leader for some partition, the client's metadata are likely out of date: restamp
need false {ProducerID:0 Epoch:0}`
	if got := strings.Join(log, "\n"); got != want {
		t.Errorf("transcript:\n%s\n\nwant:\n%s", got, want)
	}
}

func TestEpochAtItsLimitAsksForANewProducerID(t *testing.T) {
	var s Idempotence
	s.Granted(7, math.MaxInt16)
	st := s.Stamp(tpA, 1)
	if v := s.Answer(tpA, st, 1, kafka.OutOfOrderSequenceNumber); v != Restamp {
		t.Fatalf("verdict %v; want Restamp", v)
	}
	if r, ok := s.Need(); !ok || r != (InitRequest{ProducerID: -1, Epoch: -1}) {
		t.Fatalf("Need = %+v, %v; want a new producer id", r, ok)
	}
}

func TestSequencesWrapAfterMaxInt32(t *testing.T) {
	var s Idempotence
	s.Granted(1, 0)
	s.next[tpA] = math.MaxInt32 - 1
	if st := s.Stamp(tpA, 3); st.Sequence != math.MaxInt32-1 {
		t.Fatalf("stamp: %+v", st)
	}
	if st := s.Stamp(tpA, 1); st.Sequence != 1 {
		t.Fatalf("the stamp after wrapping: sequence %d; want 1", st.Sequence)
	}
}

func TestOffStampsNothing(t *testing.T) {
	var s Idempotence
	s.Off()
	if _, ok := s.Need(); ok {
		t.Fatal("Need with idempotence off: got true")
	}
	if st := s.Stamp(tpA, 3); st != NoStamp {
		t.Fatalf("stamp with idempotence off: %+v; want NoStamp", st)
	}
	if v := s.Answer(tpA, NoStamp, 3, kafka.OutOfOrderSequenceNumber); v != Other {
		t.Fatalf("an answer to an unstamped batch: %v; want Other", v)
	}
}

// simPartition is one partition's log as a broker keeps it under KIP-98:
// per producer id its epoch, the next sequence it expects and the first
// sequences of its last five batches. A batch of a newer epoch starts the
// producer again at sequence 0; an older epoch is fenced; a batch it has
// is answered as a duplicate and not written again; a gap is refused. It
// can forget every producer (its log truncated below their batches).
type simPartition struct {
	producers map[int64]*simProducer
	log       []int // message numbers, in log order
}

type simProducer struct {
	epoch  int16
	next   int32
	recent []int32
}

func (p *simPartition) produce(st Stamp, msgs []int) error {
	if st == NoStamp {
		p.log = append(p.log, msgs...)
		return nil
	}
	pr := p.producers[st.ProducerID]
	switch {
	case pr == nil && st.Sequence != 0:
		return kafka.UnknownProducerId
	case pr == nil:
		pr = &simProducer{epoch: st.Epoch}
		p.producers[st.ProducerID] = pr
	case st.Epoch < pr.epoch:
		return kafka.InvalidProducerEpoch
	case st.Epoch > pr.epoch && st.Sequence != 0:
		return kafka.OutOfOrderSequenceNumber
	case st.Epoch > pr.epoch:
		*pr = simProducer{epoch: st.Epoch}
	}
	for _, seq := range pr.recent {
		if seq == st.Sequence {
			return kafka.DuplicateSequenceNumber
		}
	}
	if st.Sequence != pr.next {
		return kafka.OutOfOrderSequenceNumber
	}
	pr.recent = append(pr.recent, st.Sequence)
	if len(pr.recent) > 5 {
		pr.recent = pr.recent[1:]
	}
	pr.next = advance(st.Sequence, len(msgs))
	p.log = append(p.log, msgs...)
	return nil
}

// simCoordinator grants producer ids and bumps epochs.
type simCoordinator struct{ nextID int64 }

func (c *simCoordinator) init(r InitRequest) (int64, int16) {
	if r.ProducerID < 0 {
		c.nextID++
		return c.nextID, 0
	}
	return r.ProducerID, r.Epoch + 1
}

// simSender is one partition's producer loop, as the sink runs it: one
// batch in flight, a batch keeps its stamp across retries, is stamped
// again when told, and a batch refused for good is parked.
type simSender struct {
	tp      TopicPartition
	part    *simPartition
	msgs    []int // to send, in order
	batch   []int // in flight
	st      Stamp
	stamped bool
	parked  []int
	total   int
}

var errTimedOut = fmt.Errorf("request timed out: %w", kafka.RequestTimedOut)

// step sends the partition's batch once, with faults drawn from r, and
// judges the answer. It reports whether the partition is done.
func (sd *simSender) step(s *Idempotence, coord *simCoordinator, r *rand.Rand) bool {
	if len(sd.batch) == 0 {
		if len(sd.msgs) == 0 {
			return true
		}
		n := min(len(sd.msgs), 1+r.IntN(4))
		sd.batch, sd.msgs, sd.stamped = sd.msgs[:n], sd.msgs[n:], false
	}
	if req, ok := s.Need(); ok {
		s.Granted(coord.init(req))
	}
	if !sd.stamped {
		sd.st, sd.stamped = s.Stamp(sd.tp, len(sd.batch)), true
	}
	var err error
	switch f := r.IntN(20); {
	case f == 0: // the request is lost on the way
		err = errTimedOut
	case f == 1: // the answer is lost: written or not, the producer cannot tell
		sd.part.produce(sd.st, sd.batch) //nolint:errcheck // lost
		err = errTimedOut
	case f == 2: // the broker forgets every producer (truncated log)
		sd.part.producers = map[int64]*simProducer{}
		err = sd.part.produce(sd.st, sd.batch)
	case f == 3: // refused for good: too large, say; nothing written
		err = kafka.MessageSizeTooLarge
	default:
		err = sd.part.produce(sd.st, sd.batch)
	}
	switch s.Answer(sd.tp, sd.st, len(sd.batch), err) {
	case Written:
		sd.batch = nil
	case Restamp:
		sd.stamped = false
	case Other:
		if errors.Is(err, kafka.MessageSizeTooLarge) {
			s.Refused(sd.st)
			sd.parked = append(sd.parked, sd.batch...)
			sd.batch = nil
		} // else retried with the same stamp
	}
	return false
}

// No sequence of broker answers makes the producer skip or reorder a
// message: each partition's log, with repeats of a message dropped (the
// first kept), is every message not parked, in order.
func TestIdempotenceNeverSkipsOrReorders(t *testing.T) {
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 47))
		var s Idempotence
		coord := &simCoordinator{nextID: 1000}
		senders := make([]*simSender, 3)
		for i := range senders {
			sd := &simSender{tp: TopicPartition{"t", int32(i)}, part: &simPartition{producers: map[int64]*simProducer{}}}
			sd.total = 10 + r.IntN(60)
			for m := range sd.total {
				sd.msgs = append(sd.msgs, m)
			}
			senders[i] = sd
		}
		for steps := 0; ; steps++ {
			if steps > 100_000 {
				t.Fatalf("seed %d: the producer makes no progress", seed)
			}
			done := true
			sd := senders[r.IntN(len(senders))]
			sd.step(&s, coord, r)
			for _, o := range senders {
				done = done && len(o.msgs) == 0 && len(o.batch) == 0
			}
			if done {
				break
			}
		}
		for _, sd := range senders {
			if err := inOrder(sd.part.log, sd.parked, sd.total); err != nil {
				t.Fatalf("seed %d partition %d: %v (log %v, parked %v)", seed, sd.tp.Partition, err, sd.part.log, sd.parked)
			}
		}
	}
}

// inOrder checks that log, first occurrences only, rises (nothing
// reordered) and holds every message not parked (nothing skipped). A
// parked message may be there too, in its place: an attempt of it was
// written before Kafka refused it for good (the topic's limit lowered
// meanwhile, say): a duplicate, in the log and in the dead letters.
func inOrder(log, parked []int, total int) error {
	isParked := map[int]bool{}
	for _, m := range parked {
		isParked[m] = true
	}
	seen := map[int]bool{}
	last := -1
	for _, m := range log {
		if seen[m] {
			continue
		}
		seen[m] = true
		if m < last {
			return fmt.Errorf("message %d after %d", m, last)
		}
		for skipped := last + 1; skipped < m; skipped++ {
			if !isParked[skipped] {
				return fmt.Errorf("message %d missing before %d", skipped, m)
			}
		}
		last = m
	}
	for skipped := last + 1; skipped < total; skipped++ {
		if !isParked[skipped] {
			return fmt.Errorf("message %d missing at the end", skipped)
		}
	}
	return nil
}
