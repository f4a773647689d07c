package main

import (
	"math"
	"runtime/debug"

	"github.com/walrelay/walrelay/internal/bytesize"
)

// memoryLimitBase is what walrelay needs besides its in-flight window: the
// runtime, the read buffers of the replication connection, the produce
// batches being written and the metrics.
const memoryLimitBase = 32 << 20

// defaultMemoryLimit is the soft memory limit walrelay gives the Go runtime
// when GOMEMLIMIT is not set: the base plus twice --max-in-flight-bytes (a
// message in flight is held twice, decoded and encoded into its produce
// request). Go's collector otherwise lets the heap grow to about twice what
// is live, and the heap is mostly the window. See DECISIONS 25.
func defaultMemoryLimit(maxInFlightBytes int) int64 {
	return memoryLimitBase + 2*int64(maxInFlightBytes)
}

// applyMemoryLimit sets the default soft memory limit unless GOMEMLIMIT
// chose one (GOMEMLIMIT=off turns the limit off). It returns the limit in
// force, and whether walrelay set it.
func applyMemoryLimit(getenv func(string) string, maxInFlightBytes int) (limit int64, set bool) {
	if getenv("GOMEMLIMIT") != "" {
		// A negative input reads the limit without changing it.
		return debug.SetMemoryLimit(-1), false
	}
	limit = defaultMemoryLimit(maxInFlightBytes)
	debug.SetMemoryLimit(limit)
	return limit, true
}

// memoryLimitField is the limit for the start-up log: "off" when there is
// none.
func memoryLimitField(limit int64) string {
	if limit == math.MaxInt64 {
		return "off"
	}
	return bytesize.Format(limit)
}
