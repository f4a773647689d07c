//go:build faults

package faults

import (
	"os"
	"strconv"
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
