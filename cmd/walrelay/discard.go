//go:build walrelay_discard

package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"

	"go.uber.org/zap"

	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/schema"
	"github.com/walrelay/walrelay/sink"
)

// discarding reports the discarding build: walrelay built with
// -tags walrelay_discard decodes the slot and confirms it, but publishes
// nothing. It exists for the drain benchmark (test/bench/drain), which
// compares the relay's decode-and-confirm path with pg_recvlogical on the
// same WAL; a build tag rather than a flag, so that no configuration of a
// production binary can throw messages away.
//
// The discarding build also skips the start-up ping of Kafka: it never
// talks to a broker, so requiring one would only make the benchmark depend
// on a service it does not measure.
const discarding = true

// cpuProfileEnv names a file for a CPU profile of the session (from its
// start to the publisher's Close), to see where the relay spends its time
// when Kafka costs nothing. Only this build reads it.
const cpuProfileEnv = "WALRELAY_DISCARD_CPUPROFILE"

var profileOnce sync.Once

// newPublisher returns a publisher that acknowledges every message at once,
// without sending it anywhere. cfg is ignored.
func newPublisher(_ sink.Config, _ *zap.Logger, ack func(token uint64)) (relay.Publisher, error) {
	p := &discardPublisher{ack: ack, closed: make(chan struct{})}
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return p, nil
	}
	var err error
	// Only the first session is profiled: a later one (after a transient
	// failure) must not truncate the file the first one wrote.
	profileOnce.Do(func() {
		var f *os.File
		if f, err = os.Create(path); err != nil {
			err = fmt.Errorf("%s: %w", cpuProfileEnv, err)
			return
		}
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return
		}
		p.profile = f
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// discardPublisher acknowledges in Publish itself: the relay counts a
// message in the confirm rule before it publishes it and calls Publish
// without holding its lock, so an immediate acknowledgement is in step.
type discardPublisher struct {
	ack       func(token uint64)
	closeOnce sync.Once
	closed    chan struct{}
	profile   *os.File // the CPU profile this session writes, or nil
}

// Run waits for Close (nil: nothing is left in flight) or ctx.
func (p *discardPublisher) Run(ctx context.Context) error {
	select {
	case <-p.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Publish acknowledges m at once; after Close it refuses, as the sink does.
func (p *discardPublisher) Publish(_ context.Context, _ *schema.Message, token uint64) error {
	select {
	case <-p.closed:
		return sink.ErrClosed
	default:
	}
	p.ack(token)
	return nil
}

// Start is a no-op: this build writes no records.
func (p *discardPublisher) Start(sink.Origin) {}

// PublishBad acknowledges the row at once, as Publish does a message:
// this build keeps nothing, bad rows included.
func (p *discardPublisher) PublishBad(ctx context.Context, _ sink.BadRow, token uint64) error {
	return p.Publish(ctx, nil, token)
}

func (p *discardPublisher) Close() {
	p.closeOnce.Do(func() {
		close(p.closed)
		if p.profile != nil {
			pprof.StopCPUProfile()
			p.profile.Close()
		}
	})
}
