package sink

import (
	"github.com/segmentio/kafka-go"

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
// tail is at or after it, read on the same timeline, routed by the same
// count.
func (t tail) covers(mark schema.WALMark) bool {
	return t.found && t.mark.Timeline == mark.Timeline && t.mark.Partitions == mark.Partitions &&
		!t.mark.Pos.Less(mark.Pos)
}

// resumer applies the rule to one partition's replayed messages, in WAL
// order: it skips while the tail covers them and, from the first message
// it does not cover, skips nothing more (positions only rise).
type resumer struct {
	tail tail
	done bool
}

// skip reports whether the message at mark is already in the log.
func (r *resumer) skip(mark schema.WALMark) bool {
	if r.done {
		return false
	}
	if r.tail.covers(mark) {
		return true
	}
	r.done = true
	return false
}
