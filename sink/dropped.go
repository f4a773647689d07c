package sink

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/schema"
)

// dropLogEvery is how often at most one header key is logged as dropped:
// a table whose every row carries a bad header must not flood the log. The
// counter counts every drop.
const dropLogEvery = time.Minute

// maxDropKeys bounds the keys dropLog remembers; past it, it forgets them
// all and starts again (a few more lines, never unbounded memory).
const maxDropKeys = 1024

// dropLog decides which dropped headers are logged: the first drop of a
// header key, then at most one a minute per key, with the number of drops
// not logged since.
type dropLog struct {
	mu   sync.Mutex
	keys map[string]*dropKey
}

type dropKey struct {
	logged     time.Time // when this key was last logged
	suppressed int       // drops since then, not logged
}

// due reports whether a drop of key at now is logged, and how many drops
// of key were left out of the log since its last line.
func (l *dropLog) due(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil || len(l.keys) >= maxDropKeys {
		l.keys = make(map[string]*dropKey)
	}
	k := l.keys[key]
	if k == nil {
		l.keys[key] = &dropKey{logged: now}
		return true, 0
	}
	if now.Sub(k.logged) < dropLogEvery {
		k.suppressed++
		return false, 0
	}
	n := k.suppressed
	k.logged, k.suppressed = now, 0
	return true, n
}

// buildRecord builds the record of m and counts, and logs within dropLog's
// limit, the entries of its headers column left out of it. The message
// itself is published: a header the rule drops is the row's mistake, not
// a reason to hold its aggregate.
//
// partitions is the count m's key is routed by, for the record's WAL
// position when the sink has an origin (Start); 0 for a record parked
// before it has a partition, which goes without one.
func (s *Sink) buildRecord(m *schema.Message, token uint64, partitions int) *record {
	t := s.cfg.tables[m.Table]
	rh := recordHeaders{source: t.Source, idHeader: t.MessageIDHeader}
	if o := s.origin.Load(); o != nil && partitions > 0 {
		rh.wal = o.Source
		rh.mark = schema.WALMark{Timeline: o.Timeline, Pos: m.Position(), Partitions: partitions}
	}
	r, dropped := newRecord(m, token, rh, s.now())
	r.mark, r.marked = rh.mark, rh.wal != ""
	for _, d := range dropped {
		s.m.headersDropped.WithLabelValues(string(d.reason)).Inc()
		log, suppressed := s.drops.due(d.key, r.time)
		if !log {
			continue
		}
		what := "header of the headers column dropped from the record, which is published without it"
		if d.reason == schema.DropSpanContext {
			what = "trace header of the span context column dropped from the record, which is published without it"
		}
		s.log.Warn(what,
			zap.Stringer("message_id", m.ID), zap.String("aggregate_id", m.AggregateID), zap.String("header", d.key),
			zap.String("reason", string(d.reason)), zap.String("why", d.reason.Explain()),
			zap.Int("not_logged_since_last", suppressed), zap.Duration("logged_at_most_every", dropLogEvery))
	}
	return r
}
