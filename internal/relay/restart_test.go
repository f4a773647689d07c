package relay

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/slot"
)

// The restart policy as a transcript: each step is a session's ending, how
// long it ran and whether the process ever streamed, and the decision.
// Delays are the ceilings (the largest jittered draw).
func TestRestartPolicy(t *testing.T) {
	type step struct {
		e        ending
		ran      time.Duration
		streamed bool
		want     restart
	}
	wait := func(e ending, d time.Duration) restart { return restart{class: e, wait: d} }
	stop := restart{class: endedPermanent, stop: true}
	tests := []struct {
		name  string
		steps []step
	}{
		{"transient doubles to its cap", []step{
			{endedTransient, 0, true, wait(endedTransient, time.Second)},
			{endedTransient, 0, true, wait(endedTransient, 2*time.Second)},
			{endedTransient, 0, true, wait(endedTransient, 4*time.Second)},
			{endedTransient, 0, true, wait(endedTransient, 4*time.Second)},
		}},
		{"a long session starts the backoff again", []step{
			{endedTransient, 0, true, wait(endedTransient, time.Second)},
			{endedTransient, 0, true, wait(endedTransient, 2*time.Second)},
			{endedTransient, 2 * time.Minute, true, wait(endedTransient, time.Second)},
		}},
		{"halts back off up to their own cap, apart from transients", []step{
			{endedHalted, 0, true, wait(endedHalted, time.Second)},
			{endedTransient, 0, true, wait(endedTransient, time.Second)},
			{endedHalted, 0, true, wait(endedHalted, 2*time.Second)},
			{endedHalted, 0, true, wait(endedHalted, 4*time.Second)},
			{endedHalted, 0, true, wait(endedHalted, 8*time.Second)},
			{endedHalted, 0, true, wait(endedHalted, 8*time.Second)},
			{endedHalted, 2 * time.Minute, true, wait(endedHalted, time.Second)},
		}},
		{"a halt before streaming still waits for a fix", []step{
			{endedHalted, 0, false, wait(endedHalted, time.Second)},
		}},
		{"a failure before the process streamed stops it", []step{
			{endedTransient, 0, false, stop},
		}},
		{"a permanent failure stops it", []step{
			{endedTransient, 0, true, wait(endedTransient, time.Second)},
			{endedPermanent, time.Hour, true, stop},
		}},
	}
	highest := func(n int64) int64 { return n - 1 }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newRestartPolicy(Config{RestartBackoffMin: time.Second, RestartBackoffMax: 4 * time.Second, HaltBackoffMax: 8 * time.Second})
			p.transient.Rand, p.halt.Rand = highest, highest
			for i, s := range tt.steps {
				if got := p.next(s.e, s.ran, s.streamed); got != s.want {
					t.Fatalf("step %d: next(%s, %s, streamed=%v) = %+v; want %+v", i, s.e.label(), s.ran, s.streamed, got, s.want)
				}
			}
		})
	}
}

// Full jitter: a delay may be anything from 0 to the ceiling.
func TestRestartPolicyJitters(t *testing.T) {
	p := newRestartPolicy(Config{RestartBackoffMin: time.Second, RestartBackoffMax: 4 * time.Second, HaltBackoffMax: 8 * time.Second})
	p.transient.Rand = func(int64) int64 { return 0 }
	if got := p.next(endedTransient, 0, true); got.wait != 0 {
		t.Errorf("wait with the lowest draw = %s; want 0", got.wait)
	}
}

// Each failure is classified by its owner's predicate, through wrapping.
func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want ending
	}{
		{errors.New("receive from slot: unexpected EOF"), endedTransient},
		{fmt.Errorf("session: %w", &decoder.BadRowError{Column: "aggregate_id"}), endedHalted},
		{fmt.Errorf("session: %w", &sink.Error{Topic: "t", Err: errors.New("refused")}), endedHalted},
		{fmt.Errorf("session: %w", &slot.TooLargeError{Size: 2, Limit: 1}), endedHalted},
		{fmt.Errorf("session: %w", &slot.ConfigError{}), endedPermanent},
		{errorf("broken invariant"), endedPermanent},
		{errorf("park: %w", &decoder.BadRowError{}), endedHalted},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %s; want %s", tt.err, got.label(), tt.want.label())
		}
	}
}
