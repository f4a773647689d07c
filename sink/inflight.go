package sink

import (
	"context"
	"sync"
)

// inflight bounds the messages (and their bytes) that were published but are
// not acknowledged yet, so memory stays flat while Kafka is slow or down.
type inflight struct {
	maxMsgs, maxBytes int
	m                 *Metrics

	mu    sync.Mutex
	msgs  int
	bytes int
	// freed is closed, and replaced, whenever room is released.
	freed chan struct{}
}

func newInflight(maxMsgs, maxBytes int, m *Metrics) *inflight {
	// A new sink starts empty: what an earlier session left in flight is
	// gone with it (and will be replayed from the slot).
	m.inFlightMessages.Set(0)
	m.inFlightBytes.Set(0)
	return &inflight{maxMsgs: maxMsgs, maxBytes: maxBytes, m: m, freed: make(chan struct{})}
}

// acquire waits until one message of size bytes fits, then counts it. A
// message alone in flight always fits, however large, so that one oversized
// message cannot deadlock the sink. It gives up with ctx's error, or with
// errStopped once stop is closed.
func (f *inflight) acquire(ctx context.Context, stop <-chan struct{}, size int) error {
	for {
		f.mu.Lock()
		if f.msgs == 0 || f.msgs < f.maxMsgs && f.bytes+size <= f.maxBytes {
			f.add(1, size)
			f.mu.Unlock()
			return nil
		}
		freed := f.freed
		f.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopped
		}
	}
}

// release gives back the room of msgs messages of bytes in all.
func (f *inflight) release(msgs, bytes int) {
	f.mu.Lock()
	f.add(-msgs, -bytes)
	close(f.freed)
	f.freed = make(chan struct{})
	f.mu.Unlock()
}

func (f *inflight) add(msgs, bytes int) {
	f.msgs += msgs
	f.bytes += bytes
	f.m.inFlightMessages.Set(float64(f.msgs))
	f.m.inFlightBytes.Set(float64(f.bytes))
}

// load reports what is in flight.
func (f *inflight) load() (msgs, bytes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msgs, f.bytes
}
