// Package memlimit gives the Go runtime walrelay's soft memory limit: the
// in-flight window, which is most of the heap, twice, plus a base for the
// rest, unless GOMEMLIMIT chose a limit. Go's collector otherwise lets the
// heap grow to about twice what is live. See DECISIONS 25.
//
// Internal: walrelay's own, for `walrelay run`.
package memlimit

import (
	"math"
	"runtime/debug"

	"github.com/walrelay/walrelay/internal/bytesize"
)

// base is what walrelay needs besides its in-flight window: the runtime,
// the read buffers of the replication connection, the produce batches
// being written and the metrics.
const base = 32 << 20

// Default is the soft memory limit walrelay gives the Go runtime when
// GOMEMLIMIT is not set: the base plus twice maxInFlightBytes
// (sink.Config.MaxInFlightBytes: a message in flight is held twice,
// decoded and encoded into its produce request).
func Default(maxInFlightBytes int) int64 {
	return base + 2*int64(maxInFlightBytes)
}

// Apply sets the Default limit unless GOMEMLIMIT (read with getenv) chose
// one (GOMEMLIMIT=off turns the limit off). It returns the limit in force,
// and whether Apply set it.
func Apply(getenv func(string) string, maxInFlightBytes int) (limit int64, set bool) {
	if getenv("GOMEMLIMIT") != "" {
		// A negative input reads the limit without changing it.
		return debug.SetMemoryLimit(-1), false
	}
	limit = Default(maxInFlightBytes)
	debug.SetMemoryLimit(limit)
	return limit, true
}

// String is the limit for the start-up log: "off" when there is none.
func String(limit int64) string {
	if limit == math.MaxInt64 {
		return "off"
	}
	return bytesize.Format(limit)
}
