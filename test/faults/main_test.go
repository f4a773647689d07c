//go:build faults

package faults

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/walrelay/walrelay/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "failpoints"))
}

// scale is WALRELAY_CHAOS_SCALE: 1 in make test, more in make chaos.
func scale(t *testing.T) int {
	t.Helper()
	s := os.Getenv("WALRELAY_CHAOS_SCALE")
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("WALRELAY_CHAOS_SCALE=%q: want a whole number of at least 1", s)
	}
	return n
}

// services orders the suite's tests around the rig's PostgreSQL and Kafka.
// A test that stops, pauses or restarts either of them, or listens on the
// rig's one Kafka proxy address (WALRELAY_TEST_KAFKA_PROXY), holds it
// alone (exclusive) and runs on its own; every other test (its faults hit
// its own relays, proxies or servers) holds it shared (parallel) and runs
// beside the others, -parallel at a time. The lock only backs up the order
// go test keeps anyway: the top-level tests that are not parallel run one
// by one first, the parallel ones after them.
var services sync.RWMutex

// exclusive makes t the only test of the suite running until it ends. It
// must not be parallel.
func exclusive(t *testing.T) {
	t.Helper()
	services.Lock()
	t.Cleanup(services.Unlock)
}

// parallel runs t beside the suite's other parallel tests, and never beside
// an exclusive one.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	services.RLock()
	t.Cleanup(services.RUnlock)
}
