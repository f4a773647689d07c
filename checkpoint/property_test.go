package checkpoint

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run the property test for this one seed only")
	seedCount = flag.Int("seeds", 1000, "number of seeds the property test runs")
)

// TestPropertyNeverPastPending drives a Tracker with random transactions,
// random message counts, acks in random order across all transactions,
// random keepalives and occasional protocol misuse, and checks it against a
// simple model after every step. A failure prints its seed; rerun it with
// go test -run PropertyNeverPastPending -seed=N.
func TestPropertyNeverPastPending(t *testing.T) {
	n := *seedCount
	if testing.Short() {
		n = min(n, 100)
	}
	seeds := make([]uint64, 0, n)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for s := range uint64(n) {
			seeds = append(seeds, s+1)
		}
	}
	for _, seed := range seeds {
		if err := newSim(seed).run(); err != nil {
			t.Fatalf("seed %d: %v\nrerun: go test -run PropertyNeverPastPending -seed=%d ./checkpoint", seed, err, seed)
		}
	}
}

// mtxn is the model's view of one transaction.
type mtxn struct {
	end        pglogrepl.LSN
	planned    int // messages this transaction will have
	adds, acks int
	committed  bool
}

func (m *mtxn) done() bool { return m.committed && m.acks == m.adds }

// sim runs one seeded random scenario against a Tracker and a model.
type sim struct {
	rng       *rand.Rand
	tr        *Tracker
	txns      []mtxn  // every transaction, index = id-1
	unacked   []TxnID // one entry per message added and not acked
	ntxns     int     // transactions to generate
	open      bool
	cursor    pglogrepl.LSN // highest LSN the "server" has produced
	modelSafe pglogrepl.LSN // the model's answer for Safe
	floor     pglogrepl.LSN // the start position, then the last keepalive taken
	lastSafe  pglogrepl.LSN
	trace     []event
}

// event is one logged step, formatted only when a run fails.
type event struct {
	format string
	args   []any
}

func newSim(seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := pglogrepl.LSN(rng.Uint64N(1 << 32))
	return &sim{
		rng: rng, tr: New(start), ntxns: 1 + rng.IntN(40),
		cursor: start, modelSafe: start, lastSafe: start, floor: start,
	}
}

func (s *sim) run() error {
	for !s.finished() {
		if err := s.step(); err != nil {
			return s.fail(err)
		}
		if err := s.check(); err != nil {
			return s.fail(err)
		}
	}
	return s.fail(s.checkEnd())
}

func (s *sim) fail(err error) error {
	if err == nil {
		return nil
	}
	var b strings.Builder
	for _, e := range s.trace[max(0, len(s.trace)-20):] {
		fmt.Fprintf(&b, "\n  "+e.format, e.args...)
	}
	return fmt.Errorf("%w\nlast steps:%s", err, b.String())
}

func (s *sim) finished() bool {
	return len(s.txns) == s.ntxns && !s.open && len(s.unacked) == 0
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, event{format, args})
}

// step performs one random action that the protocol allows at this point,
// or now and then a misuse that must be refused.
func (s *sim) step() error {
	switch r := s.rng.IntN(100); {
	case r < 5:
		return s.misuse()
	case r < 15:
		return s.keepalive()
	case r < 55 && len(s.unacked) > 0:
		return s.ack()
	case s.open:
		return s.addOrCommit()
	case len(s.txns) < s.ntxns:
		return s.begin()
	case len(s.unacked) > 0:
		return s.ack()
	}
	return s.keepalive()
}

func (s *sim) begin() error {
	planned := s.rng.IntN(5) // often 0: transactions without outbox rows
	if s.rng.IntN(10) == 0 {
		planned = 50 + s.rng.IntN(100)
	}
	id, err := s.tr.Begin()
	s.logf("begin -> %d (%d msgs), %v", id, planned, err)
	if err != nil {
		return err
	}
	if want := TxnID(len(s.txns) + 1); id != want {
		return fmt.Errorf("begin: got id %d; want %d", id, want)
	}
	s.txns = append(s.txns, mtxn{planned: planned})
	s.open = true
	return nil
}

func (s *sim) addOrCommit() error {
	id := TxnID(len(s.txns))
	m := &s.txns[id-1]
	if m.adds < m.planned {
		s.logf("add %d", id)
		m.adds++
		s.unacked = append(s.unacked, id)
		return s.tr.Add(id)
	}
	s.cursor += pglogrepl.LSN(1 + s.rng.IntN(1000))
	s.logf("commit %d %s", id, s.cursor)
	m.end, m.committed = s.cursor, true
	s.open = false
	s.advanceModel()
	return s.tr.Commit(id, s.cursor)
}

func (s *sim) ack() error {
	i := s.rng.IntN(len(s.unacked))
	id := s.unacked[i]
	s.unacked[i] = s.unacked[len(s.unacked)-1]
	s.unacked = s.unacked[:len(s.unacked)-1]
	s.logf("ack %d", id)
	s.txns[id-1].acks++
	s.advanceModel()
	return s.tr.Ack(id)
}

// keepalive offers a WAL end ahead of everything received, or now and then
// a stale one. Taken, it moves the server's cursor: later commits end after it.
func (s *sim) keepalive() error {
	walEnd := s.cursor + pglogrepl.LSN(s.rng.IntN(1000))
	if s.rng.IntN(5) == 0 {
		walEnd = pglogrepl.LSN(s.rng.Uint64N(uint64(s.modelSafe) + 1))
	}
	idle := s.modelIdle()
	want := idle && walEnd > s.modelSafe
	got := s.tr.Keepalive(walEnd)
	s.logf("keepalive %s -> %v", walEnd, got)
	if got != want {
		return fmt.Errorf("keepalive %s: got taken=%v; want %v (model idle=%v safe=%s)", walEnd, got, want, idle, s.modelSafe)
	}
	if got {
		s.modelSafe, s.cursor, s.floor = walEnd, max(s.cursor, walEnd), walEnd
	}
	return nil
}

// misuse makes one call the protocol forbids and expects it refused.
func (s *sim) misuse() error {
	before := snapshot(s.tr)
	next := TxnID(len(s.txns) + 1)
	var err, want error
	switch s.rng.IntN(3) {
	case 0:
		if !s.open {
			return nil
		}
		_, err = s.tr.Begin()
		want = ErrTxnOpen
	case 1:
		err, want = s.tr.Add(next+TxnID(s.rng.IntN(3))), ErrNotOpen
	default:
		id, ok := s.fullyAcked()
		if !ok {
			return nil
		}
		err = s.tr.Ack(id)
		if !errors.Is(err, ErrExtraAck) && !errors.Is(err, ErrUnknownTxn) {
			return fmt.Errorf("extra ack %d: got %v; want ErrExtraAck or ErrUnknownTxn", id, err)
		}
		want = err
	}
	s.logf("misuse -> %v", err)
	if !errors.Is(err, want) {
		return fmt.Errorf("misuse: got %v; want %v", err, want)
	}
	if after := snapshot(s.tr); after != before {
		return fmt.Errorf("refused call changed state: %+v -> %+v", before, after)
	}
	return nil
}

// fullyAcked picks a random transaction with no unacked message.
func (s *sim) fullyAcked() (TxnID, bool) {
	if len(s.txns) == 0 {
		return 0, false
	}
	i := s.rng.IntN(len(s.txns))
	m := s.txns[i]
	return TxnID(i + 1), m.acks == m.adds
}

// advanceModel recomputes the model's Safe from scratch: the end of the last
// transaction of the done prefix, never below what it was.
func (s *sim) advanceModel() {
	for i := range s.txns {
		if !s.txns[i].done() {
			return
		}
		s.modelSafe = max(s.modelSafe, s.txns[i].end)
	}
}

// firstPending returns the index of the first transaction not done, or -1.
func (s *sim) firstPending() int {
	for i := range s.txns {
		if !s.txns[i].done() {
			return i
		}
	}
	return -1
}

func (s *sim) modelIdle() bool { return s.firstPending() < 0 }

// check asserts the invariants after every step.
func (s *sim) check() error {
	safe := s.tr.Safe()
	if safe < s.lastSafe {
		return fmt.Errorf("safe went backwards: %s -> %s", s.lastSafe, safe)
	}
	s.lastSafe = safe
	if safe != s.modelSafe {
		return fmt.Errorf("safe: got %s; want %s", safe, s.modelSafe)
	}
	if err := s.checkPending(safe); err != nil {
		return err
	}
	return s.checkCounts()
}

// checkPending: Safe is below the end of the first transaction not done and
// at most every pending committed end.
func (s *sim) checkPending(safe pglogrepl.LSN) error {
	first := s.firstPending()
	if first < 0 {
		return nil
	}
	if m := s.txns[first]; m.committed && safe >= m.end {
		return fmt.Errorf("safe %s not below end %s of pending txn %d", safe, m.end, first+1)
	}
	for i := first; i < len(s.txns); i++ {
		if m := s.txns[i]; m.committed && !m.done() && safe > m.end {
			return fmt.Errorf("safe %s past end %s of pending txn %d", safe, m.end, i+1)
		}
	}
	return nil
}

func (s *sim) checkCounts() error {
	pending, first := 0, s.firstPending()
	for i := range s.txns {
		if !s.txns[i].done() {
			pending++
		}
	}
	txns, msgs := s.tr.InFlight()
	if txns != pending || msgs != len(s.unacked) {
		return fmt.Errorf("in flight: got %d txns %d msgs; want %d, %d", txns, msgs, pending, len(s.unacked))
	}
	id, ok := s.tr.OldestPending()
	if ok != (first >= 0) || (ok && id != TxnID(first+1)) || s.tr.Idle() != (first < 0) {
		return fmt.Errorf("oldest: got %d %v idle=%v; want first pending index %d", id, ok, s.tr.Idle(), first)
	}
	return nil
}

// checkEnd: with everything acknowledged, Safe is the last commit's end, or
// the last keepalive taken if that is higher.
func (s *sim) checkEnd() error {
	want := s.floor
	if n := len(s.txns); n > 0 {
		want = max(want, s.txns[n-1].end)
	}
	if !s.tr.Idle() || s.tr.Safe() != want || s.tr.Safe() != s.modelSafe {
		return fmt.Errorf("end: got safe %s idle=%v; want %s idle", s.tr.Safe(), s.tr.Idle(), want)
	}
	return nil
}

// view is everything a Tracker exposes, comparable with ==.
type view struct {
	safe       pglogrepl.LSN
	txns, msgs int
	oldest     TxnID
	pending    bool
	idle       bool
}

func snapshot(tr *Tracker) view {
	v := view{safe: tr.Safe(), idle: tr.Idle()}
	v.txns, v.msgs = tr.InFlight()
	v.oldest, v.pending = tr.OldestPending()
	return v
}
