//go:build bench

package drain

import (
	"fmt"
	"os"
	"testing"

	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// The two walrelay binaries under test. Both are plain builds: -race (as
// harness.Build makes them) would measure the race detector.
var (
	walrelayBin string // as shipped
	discardBin  string // -tags walrelay_discard
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "walrelay-drain-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if walrelayBin, err = benchenv.Build(dir, "walrelay", ""); err == nil {
		discardBin, err = benchenv.Build(dir, "walrelay-discard", "walrelay_discard")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	return m.Run()
}
