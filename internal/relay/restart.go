package relay

import (
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
)

// ending is how a session ended in error, as the restart policy sees it.
type ending int

const (
	// endedTransient: a lost connection, say; a new session may mend it.
	endedTransient ending = iota
	// endedHalted: stopped before a message walrelay cannot publish
	// (policy halt); a new session meets it again, until an operator acts.
	endedHalted
	// endedPermanent: a preflight verdict or a broken invariant.
	endedPermanent
)

// label is the class label of walrelay_session_errors_total.
func (e ending) label() string {
	switch e {
	case endedHalted:
		return "halted"
	case endedPermanent:
		return "permanent"
	default:
		return "transient"
	}
}

// longSession is how long a session must have run for the backoff to start
// again from its minimum: it streamed long enough to call the failure new.
const longSession = time.Minute

// restartPolicy decides, after a session ended in error, whether the relay
// starts a new one and after which delay. It is pure: the caller classifies
// the error, measures the session and does the waiting.
//
// Transient failures back off from RestartBackoffMin to RestartBackoffMax,
// halts from RestartBackoffMin to HaltBackoffMax, each on its own count of
// attempts; both counts start again after a session that ran longer than
// longSession. A permanent failure, or any failure before the process ever
// streamed, stops the relay: bad configuration fails fast.
type restartPolicy struct {
	transient, halt backoff.Policy
	// attempts counts the restarts since the last long session, by kind.
	transientAttempts, haltAttempts int
}

func newRestartPolicy(cfg Config) restartPolicy {
	return restartPolicy{
		transient: backoff.Policy{Min: cfg.RestartBackoffMin, Max: cfg.RestartBackoffMax},
		halt:      backoff.Policy{Min: cfg.RestartBackoffMin, Max: cfg.HaltBackoffMax},
	}
}

// restart is the policy's decision on one failed session.
type restart struct {
	class ending        // as counted: a failure that stops the relay is permanent
	stop  bool          // the relay returns the error
	wait  time.Duration // before the next session, when !stop
}

// next decides on a session that ended as e after running for ran;
// streamed says whether any session of the process reached replication.
func (p *restartPolicy) next(e ending, ran time.Duration, streamed bool) restart {
	if ran > longSession {
		p.transientAttempts, p.haltAttempts = 0, 0
	}
	switch {
	case e == endedHalted:
		// Before checking streamed: a halt is a verdict on a row, not on
		// the configuration, and the fix is picked up by a new session.
		p.haltAttempts++
		return restart{class: endedHalted, wait: p.halt.Delay(p.haltAttempts - 1)}
	case e == endedPermanent || !streamed:
		return restart{class: endedPermanent, stop: true}
	}
	p.transientAttempts++
	return restart{class: endedTransient, wait: p.transient.Delay(p.transientAttempts - 1)}
}
