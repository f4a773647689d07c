//go:build bench

package drain

import (
	"fmt"
	"os"
	"testing"

	"github.com/walrelay/walrelay/internal/testkit"
	"github.com/walrelay/walrelay/internal/testkit/rig"
	"github.com/walrelay/walrelay/test/bench/benchenv"
)

// The binaries under test. All are plain builds: -race (as harness.Build
// makes them) would measure the race detector.
var (
	walrelayBin string // as shipped
	discardBin  string // -tags walrelay_discard
	goreaderBin string // test/bench/goreader
	prevBin     string // walrelay at WALRELAY_BENCH_BASELINE, or none
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
	if walrelayBin, err = benchenv.Build(dir, "walrelay", os.Getenv("WALRELAY_BENCH_BUILD_TAGS")); err == nil {
		discardBin, err = benchenv.Build(dir, "walrelay-discard", "walrelay_discard")
	}
	if err == nil {
		goreaderBin, err = benchenv.BuildPkg(dir, "goreader", "bench", "./test/bench/goreader")
	}
	if rev := os.Getenv("WALRELAY_BENCH_BASELINE"); rev != "" && err == nil {
		prevBin, err = benchenv.BuildAt(dir, "walrelay-baseline", rev)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	return m.Run()
}

// setUp is what every test of the package starts with: the rig's services,
// the scale, the broker found and warmed up, and the machine's load before
// the runs, for the report.
func setUp(t *testing.T) (pgURL, brokers string, scale float64, loadBefore string) {
	t.Helper()
	pgURL, brokers = testkit.Services(t)
	scale = benchenv.Scale(t)
	kafkaPid = rig.KafkaPid(t)
	warmBroker(t, brokers)
	return pgURL, brokers, scale, benchenv.LoadAverage()
}
