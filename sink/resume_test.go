package sink

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/segmentio/kafka-go"

	"github.com/walrelay/walrelay/schema"
)

const (
	ours   = "7433256101470117656/shop/walrelay"
	theirs = "7433256101470117656/shop/other_slot"
)

func markAt(tl int32, lsn uint64, seq uint32, partitions int) schema.WALMark {
	return schema.WALMark{Timeline: tl, Pos: schema.Position{CommitLSN: pglogrepl.LSN(lsn), Seq: seq}, Partitions: partitions}
}

// marked is the headers of a stream record of source at w.
func marked(source string, w schema.WALMark) []kafka.Header {
	return []kafka.Header{
		{Key: schema.HeaderID, Value: []byte("id")},
		{Key: schema.HeaderWALSource, Value: []byte(source)},
		{Key: schema.HeaderWALPosition, Value: []byte(w.String())},
	}
}

// unmarked is a record without the headers: another producer's, or one
// walrelay published from a table (recover, replay, dlq retry).
func unmarked() []kafka.Header { return []kafka.Header{{Key: schema.HeaderID, Value: []byte("x")}} }

func TestFindTailTakesTheLastRecordOfTheSource(t *testing.T) {
	log := [][]kafka.Header{
		marked(ours, markAt(1, 100, 0, 3)),
		marked(ours, markAt(1, 300, 1, 3)),
		marked(theirs, markAt(1, 900, 0, 3)), // another slot of the same database
		unmarked(),                           // replay, dlq retry, another producer
		marked(ours, markAt(1, 200, 0, 3)),   // a late retry or a retried dead letter: lower
		unmarked(),
	}
	tl, err := findTail(ours, log)
	if err != nil || !tl.found || tl.mark != markAt(1, 200, 0, 3) {
		t.Fatalf("findTail = %+v, %v; want the last record of ours, at 0/C8#0", tl, err)
	}
	other, err := findTail(theirs, log)
	if err != nil || other.mark != markAt(1, 900, 0, 3) {
		t.Errorf("the other slot's tail = %+v, %v; want its own record", other, err)
	}
	none, err := findTail(ours, [][]kafka.Header{unmarked(), marked(theirs, markAt(1, 900, 0, 3))})
	if err != nil || none.found || none.covers(markAt(1, 1, 0, 3), nil) {
		t.Errorf("a log without our records: %+v, %v; want no tail, covering nothing", none, err)
	}
	empty, err := findTail(ours, nil)
	if err != nil || empty.found {
		t.Errorf("an empty log: %+v, %v", empty, err)
	}
}

func TestFindTailStopsOnAPositionItCannotRead(t *testing.T) {
	bad := []kafka.Header{{Key: schema.HeaderWALSource, Value: []byte(ours)}, {Key: schema.HeaderWALPosition, Value: []byte("tli=1 lsn=zz")}}
	tl, err := findTail(ours, [][]kafka.Header{marked(ours, markAt(1, 100, 0, 3)), bad})
	if err == nil || tl.found {
		t.Fatalf("findTail = %+v, %v; want an error and no tail (never skip on what cannot be read)", tl, err)
	}
	missing := []kafka.Header{{Key: schema.HeaderWALSource, Value: []byte(ours)}}
	if tl, err := findTail(ours, [][]kafka.Header{missing}); err == nil || tl.found {
		t.Errorf("a record of ours without walrelay_position: %+v, %v; want an error", tl, err)
	}
}

func TestTailCovers(t *testing.T) {
	tl := tail{found: true, mark: markAt(2, 0x500, 3, 6)}
	for _, tc := range []struct {
		at   schema.WALMark
		want bool
	}{
		{markAt(2, 0x500, 3, 6), true},  // the tail itself: a repeat
		{markAt(2, 0x500, 2, 6), true},  // earlier in the same transaction
		{markAt(2, 0x400, 9, 6), true},  // an earlier transaction
		{markAt(2, 0x500, 4, 6), false}, // later in the same transaction
		{markAt(2, 0x501, 0, 6), false}, // a later transaction
		{markAt(3, 0x400, 0, 6), false}, // another timeline, its history unknown
		{markAt(1, 0x400, 0, 6), false},
		{markAt(2, 0x400, 0, 3), false}, // routed by another count
	} {
		if got := tl.covers(tc.at, nil); got != tc.want {
			t.Errorf("tail %s covers %s = %v; want %v", tl.mark, tc.at, got, tc.want)
		}
	}
}

// After a failover the tail was read on an ancestor of the messages'
// timeline: it vouches only for messages committed before that ancestor
// ended, where the two timelines' WAL is the same.
func TestTailCoversAcrossAFailoverUpToWhereTheOldTimelineEnded(t *testing.T) {
	tl := tail{found: true, mark: markAt(2, 0x500, 3, 6)}
	ended := map[int32]pglogrepl.LSN{1: 0x100, 2: 0x480, 3: 0x900}
	for _, tc := range []struct {
		at   schema.WALMark
		want bool
	}{
		{markAt(3, 0x400, 0, 6), true},  // before timeline 2 ended
		{markAt(3, 0x47F, 9, 6), true},  // just before
		{markAt(3, 0x480, 0, 6), false}, // at the switch point: the new timeline's own
		{markAt(3, 0x4A0, 0, 6), false}, // below the tail, after the switch: another history
		{markAt(4, 0x400, 0, 6), true},  // two failovers on: timeline 2 is still an ancestor
		{markAt(3, 0x400, 0, 3), false}, // routed by another count
		{markAt(3, 0x501, 0, 6), false}, // beyond the tail
	} {
		if got := tl.covers(tc.at, ended); got != tc.want {
			t.Errorf("tail %s, history %v: covers %s = %v; want %v", tl.mark, ended, tc.at, got, tc.want)
		}
	}
	// A history that does not name the tail's timeline, or a tail read on
	// a later timeline than the messages' (another standby's), vouches
	// for nothing.
	if tl.covers(markAt(3, 0x400, 0, 6), map[int32]pglogrepl.LSN{1: 0x900}) {
		t.Error("a history without the tail's timeline vouches for it")
	}
	if (tail{found: true, mark: markAt(3, 0x500, 0, 6)}).covers(markAt(2, 0x400, 0, 6), map[int32]pglogrepl.LSN{3: 0x900}) {
		t.Error("a tail of a later timeline vouches for an earlier one's messages")
	}
}

func TestResumerStopsSkippingAtTheFirstMessageBeyondTheTail(t *testing.T) {
	r := resumer{tail: tail{found: true, mark: markAt(1, 300, 0, 3)}}
	var got []bool
	for _, lsn := range []uint64{100, 200, 300, 400, 250} {
		got = append(got, r.skip(markAt(1, lsn, 0, 3)))
	}
	if want := []bool{true, true, true, false, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("skips = %v; want %v", got, want)
	}
}

// The property: over random histories of sessions that each end at a
// random point (an in-flight batch written but not acknowledged, batches
// repeated by retries, messages parked, confirmations behind the acks),
// with other slots' records and unmarked records in the same partitions,
// logs truncated by an unclean leader election, partition counts changed
// between sessions and failovers to a timeline that reuses LSNs for other
// messages past the point where the old one ended (the tails of older
// timelines judged by that history), every message the rule skips is in its partition's log or
// parked, and after a last session that finishes, every message of the
// current history is in Kafka or parked, unless Kafka itself lost it
// after the slot had confirmed it.
func TestResumeNeverSkipsWhatKafkaDoesNotHave(t *testing.T) {
	for seed := range uint64(3000) {
		simulateResume(t, rand.New(rand.NewPCG(seed, 38)), seed)
		if t.Failed() {
			return
		}
	}
}

type simMsg struct {
	id  int
	pos schema.Position
	key int
}

type simRec struct {
	hs []kafka.Header
	id int // -1: not one of ours
}

type sim struct {
	t      *testing.T
	rng    *rand.Rand
	seed   uint64
	msgs   []simMsg // the WAL of the current timeline, in order
	nextID int
	logs   map[int][]simRec
	parked map[int]bool
	lost   map[int]bool // removed by a truncation after it was confirmed
	// confirmed holds every message a slot confirmed, on any timeline: a
	// failover's synced slot may be behind it (conf falls), and what Kafka
	// then loses was still confirmed once.
	confirmed map[int]bool
	tl        int32
	ended     map[int32]pglogrepl.LSN // the current timeline's history
	count     int
	conf      int // index of the first message the slot has not confirmed
}

func simulateResume(t *testing.T, rng *rand.Rand, seed uint64) {
	s := &sim{t: t, rng: rng, seed: seed, logs: map[int][]simRec{}, parked: map[int]bool{}, lost: map[int]bool{}, confirmed: map[int]bool{},
		tl: 1, count: 2 + rng.IntN(3)}
	s.grow(10 + rng.IntN(40))
	for range 1 + rng.IntN(6) {
		switch rng.IntN(6) {
		case 0:
			s.failover()
		case 1:
			s.count = 2 + rng.IntN(3) // grown or shrunk and accepted while walrelay was down
		}
		if rng.IntN(4) == 0 {
			s.truncate()
		}
		s.session(false)
		s.grow(rng.IntN(30))
	}
	s.session(true)
	present := s.present()
	for _, m := range s.msgs {
		if !present[m.id] && !s.parked[m.id] && !s.lost[m.id] {
			t.Errorf("seed %d: message %d at %s is neither in Kafka nor parked after the last session", seed, m.id, m.pos)
		}
	}
}

// grow appends n messages to the WAL: transactions of 1 to 3 rows.
func (s *sim) grow(n int) {
	lsn := uint64(100)
	if len(s.msgs) > 0 {
		lsn = uint64(s.msgs[len(s.msgs)-1].pos.CommitLSN) + 10
	}
	for n > 0 {
		rows := min(n, 1+s.rng.IntN(3))
		for seq := range rows {
			s.msgs = append(s.msgs, simMsg{id: s.nextID, pos: schema.Position{CommitLSN: pglogrepl.LSN(lsn), Seq: uint32(seq)}, key: s.rng.IntN(7)})
			s.nextID++
		}
		n -= rows
		lsn += 10 + uint64(s.rng.IntN(20))
	}
}

// failover promotes a standby that had the WAL up to a random message
// (at least up to where its own timeline began): what follows is another
// history on the next timeline, at LSNs from where the old timeline ended
// on, that may repeat the old ones; its synced slot is at or behind what
// was confirmed.
func (s *sim) failover() {
	var begin pglogrepl.LSN // where the current timeline began
	for _, end := range s.ended {
		begin = max(begin, end)
	}
	lo := 0
	for lo < len(s.msgs) && s.msgs[lo].pos.CommitLSN < begin {
		lo++
	}
	fork := lo + s.rng.IntN(len(s.msgs)-lo+1)
	for fork > lo && fork < len(s.msgs) && s.msgs[fork].pos.CommitLSN == s.msgs[fork-1].pos.CommitLSN {
		fork-- // a commit is in the standby's WAL whole or not at all
	}
	var reuse pglogrepl.LSN
	if fork > lo && s.rng.IntN(2) == 0 {
		// the new history goes on at the LSN of the last transaction the
		// standby had not (a commit is in the WAL or not)
		reuse = s.msgs[fork-1].pos.CommitLSN
		for fork > lo && s.msgs[fork-1].pos.CommitLSN == reuse {
			fork--
		}
	}
	s.msgs = s.msgs[:fork]
	var kept pglogrepl.LSN // the last commit the standby had
	if fork > 0 {
		kept = s.msgs[fork-1].pos.CommitLSN
	}
	// The old timeline ended after the standby's last commit and where the
	// standby's own timeline began, at or before the new timeline's first
	// commit (and the old one's first lost commit).
	end := max(kept+1, begin)
	if reuse != 0 {
		end += pglogrepl.LSN(s.rng.Uint64N(uint64(reuse - end + 1)))
	} else {
		end += pglogrepl.LSN(s.rng.IntN(10))
	}
	s.conf = s.rng.IntN(min(s.conf, fork) + 1)
	if reuse == 0 {
		reuse = end + pglogrepl.LSN(s.rng.IntN(3))
	}
	s.msgs = append(s.msgs, simMsg{id: s.nextID, pos: schema.Position{CommitLSN: reuse, Seq: 0}, key: s.rng.IntN(7)})
	s.nextID++
	s.grow(5 + s.rng.IntN(20))
	ended := map[int32]pglogrepl.LSN{s.tl: end}
	for tl, e := range s.ended {
		ended[tl] = e
	}
	s.ended = ended
	s.tl++
}

// truncate cuts a random suffix of one partition's log.
func (s *sim) truncate() {
	p := s.rng.IntN(5)
	log := s.logs[p]
	if len(log) == 0 {
		return
	}
	cut := s.rng.IntN(len(log) + 1)
	s.logs[p] = log[:cut]
	present := s.present()
	for _, r := range log[cut:] {
		if r.id >= 0 && s.confirmed[r.id] && !present[r.id] {
			s.lost[r.id] = true
		}
	}
}

func (s *sim) present() map[int]bool {
	in := map[int]bool{}
	for _, log := range s.logs {
		for _, r := range log {
			if r.id >= 0 {
				in[r.id] = true
			}
		}
	}
	return in
}

func (s *sim) headersOf(log []simRec) [][]kafka.Header {
	hs := make([][]kafka.Header, len(log))
	for i, r := range log {
		hs[i] = r.hs
	}
	return hs
}

// session replays from the confirmed position with the rule, then
// publishes: to the end when finish is set, else up to a random point in
// each partition, and confirms at most what is done.
func (s *sim) session(finish bool) {
	rs := map[int]*resumer{}
	queues := map[int][]int{}
	done := map[int]bool{}
	present := s.present()
	for i := s.conf; i < len(s.msgs); i++ {
		m := s.msgs[i]
		p := m.key % s.count
		mark := schema.WALMark{Timeline: s.tl, Pos: m.pos, Partitions: s.count}
		r := rs[p]
		if r == nil {
			tl, err := findTail(ours, s.headersOf(s.logs[p]))
			if err != nil {
				s.t.Fatalf("seed %d: %v", s.seed, err)
			}
			r = &resumer{tail: tl, ended: s.ended}
			rs[p] = r
		}
		if r.skip(mark) {
			// A message Kafka lost (an unclean leader election) after a
			// slot confirmed it may be replayed after a failover, from a
			// synced slot that lagged; skipping it leaves it as lost as
			// it was without the failover (the final check's exception).
			if !present[m.id] && !s.parked[m.id] && !s.lost[m.id] {
				s.t.Errorf("seed %d: skipped message %d at %s (timeline %d, %d partitions) in partition %d, tail %+v: it is not in Kafka, nor parked",
					s.seed, m.id, m.pos, s.tl, s.count, p, r.tail.mark)
			}
			done[i] = true
			continue
		}
		queues[p] = append(queues[p], i)
	}
	for _, p := range slices.Sorted(maps.Keys(queues)) { // in order, so that a seed replays
		q := queues[p]
		acked := len(q)
		if !finish {
			acked = s.rng.IntN(len(q) + 1)
		}
		i := 0
		for i < acked {
			batch := min(acked-i, 1+s.rng.IntN(4))
			for _, j := range q[i : i+batch] {
				m := s.msgs[j]
				if !finish && s.rng.IntN(15) == 0 {
					s.parked[m.id] = true // parked, never in Kafka
				} else {
					s.logs[p] = append(s.logs[p], simRec{marked(ours, schema.WALMark{Timeline: s.tl, Pos: m.pos, Partitions: s.count}), m.id})
				}
				done[j] = true
			}
			if s.rng.IntN(5) == 0 { // a retry wrote the batch again
				for _, j := range q[i : i+batch] {
					m := s.msgs[j]
					if !s.parked[m.id] {
						s.logs[p] = append(s.logs[p], simRec{marked(ours, schema.WALMark{Timeline: s.tl, Pos: m.pos, Partitions: s.count}), m.id})
					}
				}
			}
			s.noise(p)
			i += batch
		}
		if !finish && acked < len(q) && s.rng.IntN(2) == 0 {
			// the batch in flight when the session ended: written, never acknowledged
			for _, j := range q[acked:min(len(q), acked+1+s.rng.IntN(3))] {
				m := s.msgs[j]
				s.logs[p] = append(s.logs[p], simRec{marked(ours, schema.WALMark{Timeline: s.tl, Pos: m.pos, Partitions: s.count}), m.id})
			}
		}
	}
	first := s.conf
	for first < len(s.msgs) && done[first] {
		first++
	}
	if finish {
		s.conf = first
	} else {
		s.conf += s.rng.IntN(first - s.conf + 1) // confirmations lag the acks
	}
	for _, m := range s.msgs[:s.conf] {
		s.confirmed[m.id] = true
	}
}

// noise adds, now and then, a record of another slot (at any position) or
// one without the headers to partition p.
func (s *sim) noise(p int) {
	switch s.rng.IntN(6) {
	case 0:
		w := markAt(s.tl, uint64(s.rng.IntN(5000)), 0, s.count)
		s.logs[p] = append(s.logs[p], simRec{marked(theirs, w), -1})
	case 1:
		s.logs[p] = append(s.logs[p], simRec{unmarked(), -1})
	}
}
