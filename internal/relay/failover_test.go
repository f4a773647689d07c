package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/internal/testkit/poll"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// startsOn is a stream that starts on server srv, then fails (err) or, with
// a nil err, streams until stopped.
func startsOn(srv slot.Server, err error) streamFunc {
	return func(ctx context.Context, out chan<- slot.Event, _ slot.Position, drained <-chan struct{}) error {
		out <- slot.Event{Kind: slot.KindStart, Pos: 100, Server: &srv}
		if err != nil {
			close(out)
			return err
		}
		<-ctx.Done()
		close(out)
		<-drained
		return nil
	}
}

// missingSlot is a stream whose preflight finds no slot.
func missingSlot(_ context.Context, out chan<- slot.Event, _ slot.Position, _ <-chan struct{}) error {
	close(out)
	return &slot.ConfigError{Result: check.Failure("slot", `slot "walrelay" does not exist`, "Run `walrelay init`.")}
}

var (
	lost     = errors.New("receive from slot: unexpected EOF")
	primary  = slot.Server{SystemID: "7301", Timeline: 1, Addr: "10.0.0.1:5432"}
	promoted = slot.Server{SystemID: "7301", Timeline: 2, Addr: "10.0.0.2:5432"}
)

// The same system on a new timeline is a failover: followed, counted, the
// timeline exported.
func TestRelayFollowsAFailover(t *testing.T) {
	r, _, cancel, done := runRelay(t, startsOn(primary, lost), startsOn(promoted, nil))
	// The counter moves before the gauge: wait for both.
	poll.Eventually(t, 5*time.Second, "walrelay_postgres_failovers_total 1, walrelay_postgres_timeline 2", func() (string, bool) {
		n, tl := testutil.ToFloat64(r.m.failovers), testutil.ToFloat64(r.m.timeline)
		return fmt.Sprintf("walrelay_postgres_failovers_total %v, walrelay_postgres_timeline %v", n, tl), n == 1 && tl == 2
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil after a stop", err)
	}
}

// Another system identifier is another cluster: the relay stops.
func TestRelayRefusesAnotherSystem(t *testing.T) {
	other := slot.Server{SystemID: "9999", Timeline: 1, Addr: "10.0.0.9:5432"}
	_, _, cancel, done := runRelay(t, startsOn(primary, lost), startsOn(other, nil))
	defer cancel()
	err := ended(t, done, "Run went on streaming from another database system")
	if err == nil || !strings.Contains(err.Error(), "another database system at 10.0.0.9:5432 (system identifier 9999; walrelay streamed from system 7301") {
		t.Fatalf("Run = %v; want the refusal naming both systems", err)
	}
}

// A slot missing after the process streamed from it (a failover to a
// standby without it, say) stops the relay with where the gap starts, and
// never the bare advice to run init.
func TestRelaySaysWhereTheGapStartsWhenTheSlotIsGone(t *testing.T) {
	_, _, cancel, done := runRelay(t, startsOn(primary, lost), missingSlot)
	defer cancel()
	err := ended(t, done, "Run kept retrying a missing slot")
	var gone *slotGoneError
	if !errors.As(err, &gone) || !slot.IsConfig(err) {
		t.Fatalf("Run = %v; want a *slotGoneError that is still a configuration verdict", err)
	}
	for _, want := range []string{"can no longer be streamed (slot \"walrelay\" does not exist)",
		"walrelay streamed from 10.0.0.1:5432 (system 7301, timeline 1) and confirmed up to 0/64",
		"skip every message committed after 0/64", "walrelay recover --since "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %q; want it to say %q", err, want)
		}
	}
	// Before the process ever streamed, a missing slot is the preflight's
	// verdict as it is.
	_, _, cancel2, done2 := runRelay(t, missingSlot)
	defer cancel2()
	if err := <-done2; err == nil || errors.As(err, new(*slotGoneError)) || !strings.Contains(err.Error(), "Run `walrelay init`") {
		t.Errorf("Run on a fresh process = %v; want the preflight's verdict", err)
	}
}

// A slot the server invalidated (wal_status lost) is gone as a missing one
// is: the same stop line, never a plain configuration verdict.
func TestRelayStopsWithTheRecoverLineWhenTheSlotIsLost(t *testing.T) {
	lostSlot := func(_ context.Context, out chan<- slot.Event, _ slot.Position, _ <-chan struct{}) error {
		close(out)
		return &slot.ConfigError{Result: check.Failure("slot wal_status", `lost: the server removed WAL slot "walrelay" needed`, "Run walrelay recover.")}
	}
	_, _, cancel, done := runRelay(t, startsOn(primary, lost), lostSlot)
	defer cancel()
	err := ended(t, done, "Run kept retrying a lost slot")
	if !errors.As(err, new(*slotGoneError)) {
		t.Fatalf("Run = %v; want a *slotGoneError", err)
	}
	if want := `can no longer be streamed (lost: the server removed WAL slot "walrelay" needed)`; !strings.Contains(err.Error(), want) {
		t.Errorf("Run = %q; want it to say %q", err, want)
	}
}

// Each session tells its publisher which stream it reads, with the
// timeline of the server it reached: after a failover, the new one.
func TestRelayNamesTheStreamToThePublisher(t *testing.T) {
	dec := mustDecoder(t, decoder.Config{})
	onPrimary, onPromoted := primary, promoted
	onPrimary.Database, onPrimary.Slot = "shop", "walrelay"
	onPromoted.Database, onPromoted.Slot = "shop", "walrelay"
	onPromoted.History = []slot.TimelineEnd{{Timeline: 1, End: 0x5A01F28}}
	streams := []streamFunc{startsOn(onPrimary, lost), startsOn(onPromoted, nil)}
	var mu sync.Mutex
	var sinks []*fakeSink
	r := mustNew(t, restartsAtOnce(prometheus.NewRegistry()), func(_ context.Context, ack func(uint64)) (Parts, error) {
		mu.Lock()
		defer mu.Unlock()
		s := newFakeSink(1)
		st := streams[min(len(sinks), len(streams)-1)]
		sinks = append(sinks, s)
		return Parts{Stream: st, Decoder: dec, Publisher: s}, nil
	})
	cancel, done := run(r)
	origins := func() (got [][]sink.Origin) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sinks {
			s.originMu.Lock()
			got = append(got, append([]sink.Origin(nil), s.origins...))
			s.originMu.Unlock()
		}
		return got
	}
	poll.Eventually(t, 5*time.Second, "two sessions, each told its origin", func() (string, bool) {
		got := origins()
		return fmt.Sprint(got), len(got) >= 2 && len(got[1]) == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := origins()
	want := [][]sink.Origin{{{Source: "7301/shop/walrelay", Timeline: 1}},
		{{Source: "7301/shop/walrelay", Timeline: 2, Ended: map[int32]pglogrepl.LSN{1: 0x5A01F28}}}}
	if fmt.Sprint(got[:2]) != fmt.Sprint(want) {
		t.Errorf("origins = %v, want %v", got, want)
	}
}
