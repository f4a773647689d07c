package kafkawire

import (
	"errors"
	"math"

	"github.com/segmentio/kafka-go"
)

// Idempotence is the bookkeeping of Kafka's idempotent producer (KIP-98,
// with the epoch bump of KIP-360): the producer id and epoch, the next
// sequence number of each partition, and what a broker's answer to a
// stamped batch means. It is plain code over values: no I/O, no clock, no
// locks (its owner serialises calls); the producer around it sends the
// InitProducerId requests it asks for and the batches it stamps.
//
// The broker keeps, per producer id and partition, the sequence of the
// last batches it wrote: a batch sent again with the same stamp (a retry
// after a lost answer) is answered as a duplicate and written once; a
// batch whose sequence is not the next one is refused with
// OUT_OF_ORDER_SEQUENCE_NUMBER. So a batch keeps its stamp across retries,
// and a partition's batches are stamped in the order they are sent.
//
// The zero value needs a producer id (Need) before it stamps anything.
type Idempotence struct {
	id       int64
	epoch    int16
	granted  bool // id and epoch hold a grant (else Need asks for one)
	bumpFrom *grant
	off      bool
	next     map[TopicPartition]int32
}

// grant is a producer id and epoch the broker gave.
type grant struct {
	id    int64
	epoch int16
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Stamp is what an idempotent batch carries: the producer id and epoch it
// was stamped under and its first record's sequence number. NoStamp is a
// batch of a producer that is not idempotent.
type Stamp struct {
	ProducerID int64
	Epoch      int16
	Sequence   int32
}

// NoStamp is the stamp of a batch that is not idempotent.
var NoStamp = Stamp{ProducerID: -1, Epoch: -1, Sequence: -1}

// InitRequest is the producer id and epoch an InitProducerId request
// names: -1 and -1 for a new producer id, or the current ones to have
// their epoch bumped (KIP-360; brokers before 2.5 cannot, and give a new
// id instead).
type InitRequest struct {
	ProducerID int64
	Epoch      int16
}

// Need reports whether a producer id must be asked for before the next
// batch is stamped, and with what: at start, and after an answer that
// fenced the current epoch.
func (s *Idempotence) Need() (InitRequest, bool) {
	switch {
	case s.off || s.granted:
		return InitRequest{}, false
	case s.bumpFrom != nil && s.bumpFrom.epoch < math.MaxInt16:
		return InitRequest{ProducerID: s.bumpFrom.id, Epoch: s.bumpFrom.epoch}, true
	default:
		// A first id, or the epoch cannot grow any more: a new id.
		return InitRequest{ProducerID: -1, Epoch: -1}, true
	}
}

// Granted takes the broker's answer to the InitRequest Need asked for:
// from now on batches are stamped with id and epoch, every partition's
// sequence starting again at 0.
func (s *Idempotence) Granted(id int64, epoch int16) {
	s.id, s.epoch, s.granted, s.bumpFrom = id, epoch, true, nil
	s.next = make(map[TopicPartition]int32)
}

// Off turns idempotence off for good (the broker or its ACLs refuse it):
// batches are stamped NoStamp, and the caller keeps one batch in flight
// per partition, as a producer without it must.
func (s *Idempotence) Off() { s.off = true }

// On reports whether batches are stamped (a producer id is held).
func (s *Idempotence) On() bool { return !s.off && s.granted }

// Stamp gives the next batch of n records to tp its stamp: the current id
// and epoch and the partition's next sequence, which then moves past the
// batch (wrapping after math.MaxInt32, as the broker does). Without a
// grant, or with idempotence off, it is NoStamp.
func (s *Idempotence) Stamp(tp TopicPartition, n int) Stamp {
	if !s.On() {
		return NoStamp
	}
	seq := s.next[tp]
	s.next[tp] = advance(seq, n)
	return Stamp{ProducerID: s.id, Epoch: s.epoch, Sequence: seq}
}

// advance is seq moved past n records, wrapping after math.MaxInt32.
func advance(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// Verdict is what an answer to a stamped batch means.
type Verdict int

const (
	// Written: Kafka has the batch (now, or from an earlier attempt).
	Written Verdict = iota
	// Restamp: the batch's stamp is no longer good (the broker lost or
	// fenced the producer's state, or the epoch moved on): stamp it again
	// after the next grant and send it again. Kafka may have an earlier
	// attempt, so this may duplicate (never reorder or lose).
	Restamp
	// Other: the answer is not about idempotence; the caller judges it
	// (retry with the same stamp, or a refusal: Refused).
	Other
)

// Answer judges err, the broker's answer to the batch of n records stamped
// st for tp. An answer that fences the stamp's epoch makes Need ask for a
// bumped epoch (once, whichever partition met it first).
func (s *Idempotence) Answer(tp TopicPartition, st Stamp, n int, err error) Verdict {
	switch {
	case err == nil, errors.Is(err, kafka.DuplicateSequenceNumber):
		return Written
	case st == NoStamp:
		return Other
	case st.ProducerID != s.id || st.Epoch != s.epoch || !s.granted:
		return Restamp // stamped under a grant that is gone
	case errors.Is(err, kafka.OutOfOrderSequenceNumber), errors.Is(err, kafka.UnknownProducerId),
		errors.Is(err, kafka.InvalidProducerEpoch), errors.Is(err, kafka.InvalidProducerIDMapping):
		s.granted, s.bumpFrom = false, &grant{id: s.id, epoch: s.epoch}
		return Restamp
	}
	return Other
}

// Refused takes note that Kafka refused the batch stamped st for good
// (too large, invalid): the partition's sequence cannot simply go on from
// it, nor be taken back. Taking it back would be wrong when an earlier
// attempt of the batch was written after all (an answer lost, then the
// topic's limits changed): the broker would take the next batch, stamped
// with the same sequence, for a duplicate of it and drop it unwritten. So
// the epoch is bumped, as for a fenced batch, and every partition starts
// again at sequence 0 (the Java producer does the same, KIP-360).
func (s *Idempotence) Refused(st Stamp) {
	if st != NoStamp && s.granted && st.ProducerID == s.id && st.Epoch == s.epoch {
		s.granted, s.bumpFrom = false, &grant{id: s.id, epoch: s.epoch}
	}
}

// Current reports whether st is still good to send: stamped under the
// grant held now (or NoStamp while idempotence is off).
func (s *Idempotence) Current(st Stamp) bool {
	if st == NoStamp {
		return s.off
	}
	return s.granted && !s.off && st.ProducerID == s.id && st.Epoch == s.epoch
}
