// Package procs runs walrelay on one processor while one is enough and on
// the Go runtime's default while it is not (a backlog draining), unless
// GOMAXPROCS chose. At steady load walrelay's cost is the wake-ups around
// each message, and with idle processors to spare every hand-over between
// goroutines wakes another thread: one processor took a quarter off
// walrelay's CPU a message at 200 to 2,500 tx/s (BENCHMARKS.md), while a
// drain may use every core it has. See DECISIONS 51.
//
// Internal: walrelay's own, for `walrelay run`.
package procs

import (
	"context"
	"runtime"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The policy's figures: a look every tick; one processor is not enough once
// walrelay used busy of a core over a tick, and is enough again after calm
// ticks in a row under idle.
const (
	tick = 250 * time.Millisecond
	busy = 0.8
	idle = 0.4
	calm = 20 // five seconds
)

// Policy decides the processors for the next tick from the CPU walrelay
// used over the last one. Its zero value is not usable: NewPolicy.
type Policy struct {
	max, procs, quiet int
}

// NewPolicy starts at one processor, with most the runtime's default.
func NewPolicy(most int) *Policy { return &Policy{max: max(1, most), procs: 1} }

// Next takes the share of a core used over the last tick and returns the
// processors for the next: the most at once when one was busy, one again
// after calm quiet ticks.
func (p *Policy) Next(used float64) int {
	switch {
	case p.procs == 1 && used >= busy:
		p.procs, p.quiet = p.max, 0
	case p.procs > 1 && used < idle:
		if p.quiet++; p.quiet >= calm {
			p.procs, p.quiet = 1, 0
		}
	default:
		p.quiet = 0
	}
	return p.procs
}

// SetMost changes the most processors (the runtime's default, after a
// change of the CPU limit); a policy on more than one is on the most.
func (p *Policy) SetMost(most int) {
	p.max = max(1, most)
	if p.procs > 1 || p.max == 1 {
		p.procs = p.max
	}
}

// Run follows Policy until ctx is done, unless getenv("GOMAXPROCS") is set
// or the runtime's default is one processor already; it then gives the
// runtime its default back.
func Run(ctx context.Context, getenv func(string) string, log *zap.Logger) {
	most := runtime.GOMAXPROCS(0)
	if getenv("GOMAXPROCS") != "" || most <= 1 {
		return
	}
	defer runtime.SetDefaultGOMAXPROCS()
	p := NewPolicy(most)
	runtime.GOMAXPROCS(1)
	log.Debug("processors: one while one is enough", zap.Int("most", most))
	t := time.NewTicker(tick)
	defer t.Stop()
	last, at := cpuTime(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			used := cpuTime()
			share := (used - last).Seconds() / now.Sub(at).Seconds()
			last, at = used, now
			if n := p.Next(share); n != runtime.GOMAXPROCS(0) {
				if n == 1 {
					runtime.GOMAXPROCS(1)
				} else {
					// The default, which follows a changed CPU limit again:
					// the most from now on, larger or smaller.
					runtime.SetDefaultGOMAXPROCS()
					p.SetMost(runtime.GOMAXPROCS(0))
				}
				log.Debug("processors", zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)), zap.Float64("cores_used", share))
			}
		}
	}
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
