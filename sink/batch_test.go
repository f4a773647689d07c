package sink

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/schema"
)

func records(n, wire int, at time.Time) []*record {
	rs := make([]*record, n)
	for i := range rs {
		rs[i] = &record{token: uint64(i), wire: wire, size: wire, time: at}
	}
	return rs
}

func TestBatchLen(t *testing.T) {
	tests := []struct {
		name              string
		n, wire           int
		maxMsgs, maxBytes int
		want              int
	}{
		{"empty", 0, 10, 5, 1000, 0},
		{"under both bounds", 3, 10, 5, 1000, 3},
		{"message bound", 10, 10, 5, 1000, 5},
		{"byte bound", 10, 100, 50, batchOverhead + 350, 3},
		{"exactly at byte bound", 4, 100, 50, batchOverhead + 400, 4},
		{"one oversized record goes alone", 3, 5000, 50, 1000, 1},
	}
	for _, tt := range tests {
		if got := batchLen(records(tt.n, tt.wire, time.Time{}), tt.maxMsgs, tt.maxBytes); got != tt.want {
			t.Errorf("%s: batchLen = %d; want %d", tt.name, got, tt.want)
		}
	}
}

func TestPartitionTake(t *testing.T) {
	cfg := Config{Linger: 5 * time.Millisecond, BatchMaxMessages: 4, BatchMaxBytes: 1 << 20}
	t0 := time.Unix(1000, 0)
	newP := func(rs []*record) *partition {
		p := newPartition(topicPartition{"t", 0}, nil, nil)
		for _, r := range rs {
			p.push(r, &cfg)
		}
		return p
	}

	p := newP(nil)
	if b, wait, done := p.take(t0, false, &cfg); b != nil || wait != 0 || done {
		t.Errorf("empty: take = %d records, wait %v, done %v; want nothing, wait 0 (for a push), not done", len(b), wait, done)
	}
	if _, _, done := p.take(t0, true, &cfg); !done {
		t.Errorf("empty and closing: done = false; want true")
	}

	p = newP(records(2, 10, t0))
	if b, wait, _ := p.take(t0.Add(2*time.Millisecond), false, &cfg); b != nil || wait != 3*time.Millisecond {
		t.Errorf("lingering: take = %d records, wait %v; want none, wait 3ms", len(b), wait)
	}
	if b, _, _ := p.take(t0.Add(5*time.Millisecond), false, &cfg); len(b) != 2 {
		t.Errorf("linger over: take = %d records; want 2", len(b))
	}

	p = newP(records(2, 10, t0))
	if b, _, _ := p.take(t0, true, &cfg); len(b) != 2 {
		t.Errorf("closing: take = %d records; want 2 without lingering", len(b))
	}

	p = newP(records(9, 10, t0))
	var sizes []int
	for {
		b, _, _ := p.take(t0, false, &cfg)
		if b == nil {
			break
		}
		sizes = append(sizes, len(b))
	}
	if len(sizes) != 2 || sizes[0] != 4 || sizes[1] != 4 {
		t.Errorf("full batches at once: sizes %v; want [4 4] and 1 record left lingering", sizes)
	}
	if b, _, _ := p.take(t0, true, &cfg); len(b) != 1 || b[0].token != 8 {
		t.Errorf("rest: %d records; want the last one, token 8", len(b))
	}
	if p.wire != 0 || len(p.queue) != 0 {
		t.Errorf("after draining: wire %d, queue %d; want 0, 0", p.wire, len(p.queue))
	}
}

func TestLingerGrowsWithLateness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := Config{Linger: 5 * time.Millisecond}
	late := func(d time.Duration) *record {
		return &record{time: t0, msg: &schema.Message{CommitTime: t0.Add(-d)}}
	}
	tests := []struct {
		name   string
		r      *record
		linger time.Duration
		want   time.Duration
	}{
		{"keeping up: as configured", late(8 * time.Millisecond), cfg.Linger, 5 * time.Millisecond},
		{"a tenth of the lateness", late(200 * time.Millisecond), cfg.Linger, 20 * time.Millisecond},
		{"at most ten times the setting", late(time.Hour), cfg.Linger, 50 * time.Millisecond},
		{"a clock behind the server's", late(-time.Second), cfg.Linger, 5 * time.Millisecond},
		{"unknown commit time", &record{time: t0, msg: &schema.Message{}}, cfg.Linger, 5 * time.Millisecond},
		{"a bad row", &record{time: t0}, cfg.Linger, 5 * time.Millisecond},
		{"no linger stays none", late(time.Hour), 0, 0},
	}
	for _, tt := range tests {
		c := Config{Linger: tt.linger}
		if got := linger(tt.r, &c); got != tt.want {
			t.Errorf("%s: linger = %v; want %v", tt.name, got, tt.want)
		}
	}

	// take waits for the grown linger: a record an hour late, pushed at t0,
	// is held until t0+50ms unless its batch fills.
	cfg.BatchMaxMessages, cfg.BatchMaxBytes = 4, 1<<20
	p := newPartition(topicPartition{"t", 0}, nil, nil)
	p.push(late(time.Hour), &cfg)
	if b, wait, _ := p.take(t0.Add(10*time.Millisecond), false, &cfg); b != nil || wait != 40*time.Millisecond {
		t.Errorf("backlog: take = %d records, wait %v; want none, wait 40ms", len(b), wait)
	}
	for range 3 {
		p.push(late(time.Hour), &cfg)
	}
	if b, _, _ := p.take(t0.Add(10*time.Millisecond), false, &cfg); len(b) != 4 {
		t.Errorf("backlog, batch full: take = %d records; want 4 at once", len(b))
	}
}

// A push wakes the partition's worker only when that changes what it waits
// for: the first record of an empty queue, and a full batch.
func TestPartitionPushWakes(t *testing.T) {
	cfg := Config{Linger: 5 * time.Millisecond, BatchMaxMessages: 3, BatchMaxBytes: 1 << 20}
	p := newPartition(topicPartition{"t", 0}, nil, nil)
	woken := func() bool {
		select {
		case <-p.wake:
			return true
		default:
			return false
		}
	}
	rs := records(4, 10, time.Unix(1000, 0))
	for i, want := range []bool{true, false, true, true} { // empty, lingering, full, still full
		p.push(rs[i], &cfg)
		if got := woken(); got != want {
			t.Errorf("push %d: woke the worker %t; want %t", i+1, got, want)
		}
	}
	cfg.BatchMaxMessages, cfg.BatchMaxBytes = 100, batchOverhead+25
	p = newPartition(topicPartition{"t", 0}, nil, nil)
	for i, want := range []bool{true, false, true} { // empty, 20 bytes, 30 bytes: over the limit
		p.push(rs[i], &cfg)
		if got := woken(); got != want {
			t.Errorf("push %d by bytes: woke the worker %t; want %t", i+1, got, want)
		}
	}
}
